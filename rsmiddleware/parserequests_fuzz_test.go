package rsmiddleware

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzParseRequests checks the audit's reading of a request body against
// encoding/json: whatever parseRequests accepts, each message is one
// request, in order; one with a method has the method and tool
// encoding/json reads and an id whose key is the canonical JSON of that
// id, one without (a response) no method, no key and that canonical id.
func FuzzParseRequests(f *testing.F) {
	for _, s := range []string{
		toolCall("a"), `[` + toolCall("x") + `,{"jsonrpc":"2.0","id":"7","method":"ping"}]`,
		`{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"a","arguments":{"b":[1,2e0]}}}`,
		`{"id":"\u0041","method":"prompts/get","params":{"name":"p","arguments":null}}`,
		`[{"id":1,"result":{}},{"method":"notifications/initialized"}]`, `{"id":-0,"method":"x"}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		reqs, err := parseRequests(body, false)
		if err != nil {
			return
		}
		// A body the Middleware has peeked is read the same without the
		// second peek.
		if again, err := parseRequests(body, true); err != nil || len(again) != len(reqs) {
			t.Fatalf("peeked body: %d requests (%v), unpeeked %d", len(again), err, len(reqs))
		} else {
			for i := range again {
				if *again[i] != *reqs[i] {
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
