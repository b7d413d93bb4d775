package rsmiddleware

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// rpcErrorAnswer is one JSON-RPC error Response object as a client reads it.
type rpcErrorAnswer struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"` // "null" for null, empty when missing
	Error   *struct {
		Code    *int    `json:"code"`
		Message *string `json:"message"`
	} `json:"error"`
}

// readRPCErrors reads body as a JSON-RPC error answer (JSON-RPC 2.0 §5,
// §6): one Response object, or a non-empty array of them, each with
// jsonrpc "2.0", an id member (a string, a number or null) and an error
// with an integer code and a string message. batch reports an array.
func readRPCErrors(body []byte) (answers []rpcErrorAnswer, batch bool, ok bool) {
	b := bytes.TrimSpace(body)
	if len(b) > 0 && b[0] == '[' {
		batch = true
		if json.Unmarshal(b, &answers) != nil || len(answers) == 0 {
			return nil, true, false
		}
	} else {
		var one rpcErrorAnswer
		if json.Unmarshal(b, &one) != nil {
			return nil, false, false
		}
		answers = []rpcErrorAnswer{one}
	}
	for _, a := range answers {
		if a.JSONRPC != "2.0" || !isIDValue(a.ID) || a.Error == nil || a.Error.Code == nil || a.Error.Message == nil {
			return nil, batch, false
		}
	}
	return answers, batch, true
}

// Every body that is no JSON-RPC message the server may see is answered
// 400, application/json, with the JSON-RPC 2.0 §5.1 error it earns:
// -32700 for what is not JSON, -32600 for JSON that is no Request or
// Response object and for an empty batch, -32602 for a request whose
// params do not name its tool unambiguously; under the request's id when
// it can be read, null otherwise. A batch with a refused message gets an
// array (§6): an error for each refused message and one for each other
// request with an id, none for notifications. The upstream sees none of
// them, whether the Middleware (scopes read from the body) or MCPFilter
// reads the body.
func TestMalformedBodiesGetTheirJSONRPCError(t *testing.T) {
	type want struct {
		code int
		id   string // JSON of the id
	}
	cases := []struct {
		name  string
		body  string
		batch bool
		want  []want
	}{
		{"answers a body that is not JSON -32700, id null", `{"jsonrpc":"2.0","id":1,"method":`, false, []want{{-32700, "null"}}},
		{"answers blank space -32700, id null", " \n ", false, []want{{-32700, "null"}}},
		{"answers a number -32600, id null", `42`, false, []want{{-32600, "null"}}},
		{"answers a string -32600, id null", `"x"`, false, []want{{-32600, "null"}}},
		{"answers null -32600, id null", `null`, false, []want{{-32600, "null"}}},
		{"answers an empty object -32600, id null", `{}`, false, []want{{-32600, "null"}}},
		{"answers jsonrpc 1.0 -32600 under its id", `{"jsonrpc":"1.0","id":7,"method":"ping"}`, false, []want{{-32600, "7"}}},
		{"answers a missing jsonrpc -32600 under its id", `{"id":"a-1","method":"ping"}`, false, []want{{-32600, `"a-1"`}}},
		{"answers jsonrpc as a number -32600 under its id", `{"jsonrpc":2.0,"id":7,"method":"ping"}`, false, []want{{-32600, "7"}}},
		{"answers a method that is a number -32600 under its id", `{"jsonrpc":"2.0","id":8,"method":5}`, false, []want{{-32600, "8"}}},
		{"answers a method that is null -32600 under its id", `{"jsonrpc":"2.0","id":8,"method":null}`, false, []want{{-32600, "8"}}},
		{"answers params that are a string -32600 under its id", `{"jsonrpc":"2.0","id":9,"method":"ping","params":"x"}`, false, []want{{-32600, "9"}}},
		{"answers a duplicated method -32600 under its id", `{"jsonrpc":"2.0","id":10,"method":"ping","method":"tools/call"}`, false, []want{{-32600, "10"}}},
		{"answers an id that is an object -32600, id null", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, false, []want{{-32600, "null"}}},
		{"answers two ids -32600, id null", `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, false, []want{{-32600, "null"}}},
		{"answers a response without result or error -32600, id null", `{"jsonrpc":"2.0","id":11}`, false, []want{{-32600, "null"}}},
		{"answers a tools/call without a name -32602 under its id", `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{}}`, false, []want{{-32602, "12"}}},
		{"answers a tools/call whose name is a number -32602 under its id", `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":5}}`, false, []want{{-32602, "13"}}},
		{"answers a tools/call with two names -32602 under its string id", `{"jsonrpc":"2.0","id":"x-\u0031","method":"tools/call","params":{"name":"echo","name":"admin_stats"}}`, false, []want{{-32602, `"x-1"`}}},
		{"answers arguments nested deeper than 1000 -32602 under its id", `{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"echo","arguments":{"a":` +
			strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}}}`, false, []want{{-32602, "14"}}},
		{"answers a completion/complete with two refs -32602 under its id", `{"jsonrpc":"2.0","id":15,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"a"},"Ref":{}}}`, false, []want{{-32602, "15"}}},
		{"answers an id beyond float64 -32600, id null", `{"jsonrpc":"2.0","id":1e400,"method":"ping"}`, false, []want{{-32600, "null"}}},
		{"answers an empty batch -32600, id null, as one object", `[]`, false, []want{{-32600, "null"}}},
		{"answers an empty batch with space inside -32600, id null", "[ \n]", false, []want{{-32600, "null"}}},
		{"answers a batch of a number with an array", `[1]`, true, []want{{-32600, "null"}}},
		{"answers each request of a batch with a refused message", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"1.0","id":2,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}]`,
			true, []want{{-32600, "1"}, {-32600, "2"}, {-32602, "3"}}},
	}
	for _, mode := range []struct {
		name   string
		scopes Scopes
	}{
		{"read by the Middleware", filterScopes},
		{"read by the filter", Scopes{Base: []string{"mcp:tools"}}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			var reached atomic.Int32
			fx := newFilterFixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached.Add(1)
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
			}), func(cfg *MCPFilterConfig) { cfg.Scopes = mode.scopes })
			tok := fx.token("mcp:tools mcp:admin mcp:read")
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					resp := fx.post(t, tok, c.body)
					b, _ := io.ReadAll(resp.Body)
					if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/json" {
						t.Fatalf("%d %q %s, want 400 application/json", resp.StatusCode, resp.Header.Get("Content-Type"), b)
					}
					answers, batch, ok := readRPCErrors(b)
					if !ok || batch != c.batch || len(answers) != len(c.want) {
						t.Fatalf("answer %s, want %d JSON-RPC errors (batch %v)", b, len(c.want), c.batch)
					}
					for i, w := range c.want {
						var gotID, wantID any
						_ = json.Unmarshal(answers[i].ID, &gotID)
						_ = json.Unmarshal([]byte(w.id), &wantID)
						if *answers[i].Error.Code != w.code || gotID != wantID {
							t.Errorf("answer %d: code %d id %s, want %d id %s (%s)", i, *answers[i].Error.Code, answers[i].ID, w.code, w.id, b)
						}
					}
				})
			}
			if n := reached.Load(); n != 0 {
				t.Errorf("the upstream saw %d refused bodies", n)
			}
			// A well-formed request of the same token passes: the refusals
			// above are for the bodies alone.
			if resp := fx.post(t, tok, `{"jsonrpc":"2.0","id":1,"method":"ping","params":null}`); resp.StatusCode != http.StatusOK || reached.Load() != 1 {
				t.Errorf("a well-formed ping: %d, upstream reached %d times", resp.StatusCode, reached.Load())
			}
		})
	}
}

// A batch with a refused message and more than MaxBatchRequests messages
// is answered by one -32600 error with id null, as MCPFilter answers a
// batch too long: an error for each of its messages would make a body of
// small messages ("{}," is 3 bytes, its error some 130) an answer dozens
// of times its size, built in memory.
func TestAMalformedBatchTooLongGetsOneError(t *testing.T) {
	body := "[" + strings.Repeat(`{},`, 10*MaxBatchRequests) + `{"jsonrpc":"2.0","id":1,"method":"ping"}]`
	for _, mode := range []struct {
		name   string
		scopes Scopes
	}{
		{"read by the Middleware", filterScopes},
		{"read by the filter", Scopes{Base: []string{"mcp:tools"}}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			var reached atomic.Int32
			fx := newFilterFixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached.Add(1)
			}), func(cfg *MCPFilterConfig) { cfg.Scopes = mode.scopes })
			resp := fx.post(t, fx.token("mcp:tools mcp:admin mcp:read"), body)
			b, _ := io.ReadAll(resp.Body)
			answers, batch, ok := readRPCErrors(b)
			if resp.StatusCode != http.StatusBadRequest || !ok || batch || len(answers) != 1 ||
				*answers[0].Error.Code != -32600 || string(answers[0].ID) != "null" {
				t.Fatalf("%d, %d bytes (%d answers, batch %v), want 400 with one -32600 error, id null: %.300s",
					resp.StatusCode, len(b), len(answers), batch, b)
			}
			if reached.Load() != 0 {
				t.Error("the upstream saw the batch")
			}
		})
	}
}
