package rsmiddleware

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"testing"
)

// refusalChains are the Middleware and MCPFilter in front of an MCP server
// that counts what reaches it: one chain where the Middleware reads the
// body for its scopes, one where only MCPFilter reads it. token holds
// every scope either chain asks for, so nothing is refused for scopes.
type refusalChains struct {
	chains  []http.Handler
	token   string
	reached atomic.Int32
}

func newRefusalChains(tb testing.TB) *refusalChains {
	ks := newKeyServer(tb)
	c := ks.claims()
	c["scope"] = "mcp:tools mcp:admin mcp:read"
	rc := &refusalChains{token: "Bearer " + ks.mint(c)}
	server := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.reached.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	prm, _ := ResourceMetadataURL(testResource)
	for _, scopes := range []Scopes{filterScopes, {Base: []string{"mcp:tools"}}} {
		f := NewMCPFilter(MCPFilterConfig{Scopes: scopes, Audit: AuditLog(io.Discard, "json"), Logger: quiet})
		mw, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(tb, nil), ResourceMetadataURL: prm, Scopes: scopes,
			Logger: quiet, OnInsufficientScope: f.AuditDenied, OnRefused: f.AuditRefused})
		if err != nil {
			tb.Fatal(err)
		}
		rc.chains = append(rc.chains, mw.Wrap(f.Wrap(server)))
	}
	return rc
}

// serve posts body to each chain, of the MCP revision version ("": none),
// and checks the answer: never a 5xx; a body refused (the server did not
// see it) is answered 400 or 413, application/json, with a JSON-RPC error
// (readRPCErrors), -32700 with id null for one that is not JSON. It
// reports whether every chain refused the body.
func (rc *refusalChains) serve(t *testing.T, body []byte, version string) (refused bool) {
	refused = true
	for i, h := range rc.chains {
		req := httptest.NewRequest(http.MethodPost, testResource, bytes.NewReader(body))
		req.Header.Set("Authorization", rc.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if version != "" {
			req.Header.Set(ProtocolVersionHeader, version)
		}
		rec := httptest.NewRecorder()
		before := rc.reached.Load()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("chain %d: %d %s", i, rec.Code, rec.Body)
		}
		if rc.reached.Load() != before {
			refused = false
			continue
		}
		if rec.Code != http.StatusBadRequest && rec.Code != http.StatusRequestEntityTooLarge || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("chain %d refused with %d %q %s", i, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
		answers, _, ok := readRPCErrors(rec.Body.Bytes())
		if !ok {
			t.Fatalf("chain %d: the refusal %s is no JSON-RPC error", i, rec.Body)
		}
		if !json.Valid(body) && (len(answers) != 1 || *answers[0].Error.Code != -32700 || string(answers[0].ID) != "null") {
			t.Fatalf("chain %d: %s for a body that is not JSON, want -32700 with id null", i, rec.Body)
		}
	}
	return refused
}

// FuzzParseRequests checks the audit's reading of a request body against
// encoding/json: whatever parseRequests accepts, each message is one
// request, in order; one with a method has the method and tool
// encoding/json reads and an id whose key is the canonical JSON of that
// id, one without (a response) no method, no key and that canonical id.
//
// Served through the Middleware and MCPFilter, of MCP 2025-03-26 and of
// 2025-06-18 (no batches), no body is answered with a 5xx, a body parseRequests refuses never reaches the server, and every
// refused body is answered with a JSON-RPC error (refusalChains.serve).
func FuzzParseRequests(f *testing.F) {
	rc := newRefusalChains(f)
	for _, s := range []string{
		toolCall("a"), `[` + toolCall("x") + `,{"jsonrpc":"2.0","id":"7","method":"ping"}]`,
		`{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"a","arguments":{"b":[1,2e0]}}}`,
		`{"id":"\u0041","method":"prompts/get","params":{"name":"p","arguments":null}}`,
		`[{"id":1,"result":{}},{"method":"notifications/initialized"}]`, `{"id":-0,"method":"x"}`, `[]`,
		`42`, `{}`, `{"jsonrpc":"1.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":{},"method":"ping"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":1.0,"method":"tools/list"}]`,
		`{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"name":"a","name":"b"}}`, `{"jsonrpc":"2.0","id":1,"method":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		// MCP 2025-03-26 has batches, 2025-06-18 has none.
		refused := rc.serve(t, body, "")
		if rc.serve(t, body, BatchesVersion) != refused && !isBatch(body) {
			t.Fatalf("%q refused by one MCP revision, not the other", body)
		}
		reqs, err := parseRequests(body, false)
		if err != nil {
			if !refused {
				t.Fatalf("parseRequests refused %q (%v), the server saw it", body, err)
			}
			return
		}
		// A body the Middleware has peeked is read the same without the
		// second peek.
		if again, err := parseRequests(body, true); err != nil || len(again) != len(reqs) {
			t.Fatalf("peeked body: %d requests (%v), unpeeked %d", len(again), err, len(reqs))
		} else {
			for i := range again {
				if !reflect.DeepEqual(again[i], reqs[i]) {
					t.Fatalf("peeked body, request %d: %+v, unpeeked %+v", i, *again[i], *reqs[i])
				}
			}
		}
		var msgs []json.RawMessage
		if b := bytes.TrimSpace(body); b[0] == '[' {
			if json.Unmarshal(b, &msgs) != nil {
				t.Fatal("parseRequests accepted a batch encoding/json refuses")
			}
		} else {
			msgs = []json.RawMessage{b}
		}
		i := 0
		for _, m := range msgs {
			var std struct {
				ID     json.RawMessage `json:"id"`
				Method *string         `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			_ = json.Unmarshal(m, &std)
			if i >= len(reqs) {
				t.Fatalf("%d requests for %d messages", len(reqs), len(msgs))
			}
			q := reqs[i]
			i++
			if std.Method == nil {
				want := ""
				if len(std.ID) > 0 && string(std.ID) != "null" {
					c, err := CanonicalJSON(std.ID)
					if err != nil {
						t.Fatal(err)
					}
					want = string(c)
				}
				if !q.response || q.method != "" || q.key != "" || q.id != want {
					t.Fatalf("response %s: %+v", m, *q)
				}
				continue
			}
			if q.method != *std.Method {
				t.Fatalf("method %q, parseRequests saw %q", *std.Method, q.method)
			}
			if (q.method == "tools/call" || q.method == "prompts/get") && q.tool != std.Params.Name {
				t.Fatalf("tool %q, parseRequests saw %q", std.Params.Name, q.tool)
			}
			if len(std.ID) == 0 || string(std.ID) == "null" {
				if q.key != "" {
					t.Fatalf("no id, key %q", q.key)
				}
				continue
			}
			want, err := CanonicalJSON(std.ID)
			if err != nil || q.key != string(want) {
				t.Fatalf("id %s: key %q, canonical %q (%v)", std.ID, q.key, want, err)
			}
		}
		if i != len(reqs) {
			t.Fatalf("%d requests, %d messages with a method", len(reqs), i)
		}
	})
}
