package rsmiddleware

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestParseAuthorization(t *testing.T) {
	tests := []struct {
		name, header, token string
		err                 error
	}{
		{"reads a bearer token", "Bearer abc.DEF-_~+/", "abc.DEF-_~+/", nil},
		{"matches the scheme case-insensitively", "bearer abc", "abc", nil},
		{"accepts trailing padding", "Bearer abc==", "abc==", nil},
		{"treats an empty header as no token", "", "", ErrNoToken},
		{"treats another scheme as no token", "Basic dXNlcjpwdw==", "", ErrNoToken},
		{"refuses a bare scheme", "Bearer", "", ErrMalformedAuthorization},
		{"refuses an empty token", "Bearer ", "", ErrMalformedAuthorization},
		{"refuses spaces inside the token", "Bearer a b", "", ErrMalformedAuthorization},
		{"refuses padding in the middle", "Bearer a=b", "", ErrMalformedAuthorization},
		{"refuses a comma-separated second credential", "Bearer a, Bearer b", "", ErrMalformedAuthorization},
		{"refuses control characters", "Bearer a\x00b", "", ErrMalformedAuthorization},
		{"accepts a token of 16 KiB", "Bearer " + strings.Repeat("a", 16<<10), strings.Repeat("a", 16<<10), nil},
		{"refuses a token over 16 KiB", "Bearer " + strings.Repeat("a", 16<<10+1), "", ErrMalformedAuthorization},
		{"refuses a token of padding only", "Bearer ==", "", ErrMalformedAuthorization},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := ParseAuthorization(tt.header)
			if tok != tt.token || err != tt.err {
				t.Fatalf("ParseAuthorization(%q) = %q, %v", tt.header, tok, err)
			}
		})
	}
}

func FuzzParseAuthorization(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer a.b.c", "Basic x", "Bearer  a==", "Bearer a=b", "", "Bearer"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, err := ParseAuthorization(h)
		if err != nil {
			if tok != "" {
				t.Fatal("token returned with an error")
			}
			return
		}
		if tok == "" || strings.ContainsAny(tok, " \t\r\n,\"") || !strings.HasSuffix(h, tok) {
			t.Fatalf("ParseAuthorization(%q) = %q", h, tok)
		}
	})
}

func TestPeekJSONRPC(t *testing.T) {
	tests := []struct {
		name, body string
		want       []rpcCall
		ok         bool
	}{
		{"reads a single request", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, []rpcCall{{Method: "tools/list"}}, true},
		{"reads the tool of a tools/call", toolCall("write_file"), []rpcCall{{Method: "tools/call", Tool: "write_file", Name: "write_file"}}, true},
		{"reads the name of a prompts/get", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p"}}`, []rpcCall{{Method: "prompts/get", Name: "p"}}, true},
		{"reads the uri of a resources/read", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a"}}`, []rpcCall{{Method: "resources/read", Name: "file:///a"}}, true},
		{"reads the ref of a completion/complete", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":""}}}`, []rpcCall{{Method: "completion/complete", Name: "p", Ref: "ref/prompt"}}, true},
		{"refuses a case variant of a completion ref's uri", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"a","Uri":"b"}}}`, nil, false},
		{"refuses a case variant of uri", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a","URI":"b"}}`, nil, false},
		{"reads every message of a batch", "[" + toolCall("a") + `,{"jsonrpc":"2.0","method":"ping","id":2}]`, []rpcCall{{Method: "tools/call", Tool: "a", Name: "a"}, {Method: "ping"}}, true},
		{"reads a response as a call without method", `{"jsonrpc":"2.0","id":1,"result":{}}`, []rpcCall{{}}, true},
		{"ignores case variants of other keys", `{"jsonrpc":"2.0","ID":1,"method":"ping"}`, []rpcCall{{Method: "ping"}}, true},
		{"refuses a duplicate method", `{"method":"ping","method":"tools/call"}`, nil, false},
		{"refuses a case variant of method", `{"method":"ping","METHOD":"tools/call"}`, nil, false},
		{"refuses a case variant of params", `{"method":"tools/call","params":{"name":"a"},"Params":{"name":"b"}}`, nil, false},
		{"refuses a non-string method", `{"method":1}`, nil, false},
		{"refuses a tools/call with params not an object", `{"method":"tools/call","params":[1]}`, nil, false},
		{"refuses trailing data", `{"method":"ping"} {"method":"tools/call"}`, nil, false},
		{"refuses a batch with a non-object", `[1]`, nil, false},
		{"refuses an empty body", ``, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := peekJSONRPC([]byte(tt.body))
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v", err)
			}
			if tt.ok && !equalCalls(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func equalCalls(a, b []rpcCall) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzPeekJSONRPC checks that whatever the peek accepts, encoding/json reads
// the same method and tool name: a body cannot show the scope check one
// method and the handler another.
func FuzzPeekJSONRPC(f *testing.F) {
	for _, s := range []string{
		toolCall("a"), `[` + toolCall("x") + `,{"method":"ping"}]`, `{"method":"tools/call","params":{"name":"a","Name":"b"}}`,
		`{"method":"ping","Method":"x"}`, `[]`, `{}`, `{"method":"tools/call","params":{"name":"\u0061"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		calls, err := peekJSONRPC(body)
		if err != nil {
			return
		}
		var msgs []json.RawMessage
		if b := bytes.TrimSpace(body); b[0] == '[' {
			if json.Unmarshal(b, &msgs) != nil {
				t.Fatal("peek accepted a batch encoding/json refuses")
			}
		} else {
			msgs = []json.RawMessage{b}
		}
		if len(msgs) != len(calls) {
			t.Fatalf("%d messages, %d calls", len(msgs), len(calls))
		}
		for i, m := range msgs {
			var std struct {
				Method string `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			_ = json.Unmarshal(m, &std)
			if std.Method != calls[i].Method {
				t.Fatalf("method %q, peek saw %q", std.Method, calls[i].Method)
			}
			if std.Method == "tools/call" && std.Params.Name != calls[i].Tool {
				t.Fatalf("tool %q, peek saw %q", std.Params.Name, calls[i].Tool)
			}
		}
	})
}

// parseChallenge reads a Bearer challenge as a client would (RFC 9110
// §11.6.1: auth-param = token "=" quoted-string, separated by commas).
func parseChallenge(h string) (map[string]string, bool) {
	rest, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return nil, false
	}
	params := map[string]string{}
	for rest != "" {
		eq := strings.Index(rest, `="`)
		if eq <= 0 {
			return nil, false
		}
		name := rest[:eq]
		rest = rest[eq+2:]
		var v strings.Builder
		closed := false
		for i := 0; i < len(rest); i++ {
			switch c := rest[i]; {
			case c == '\\' && i+1 < len(rest):
				i++
				v.WriteByte(rest[i])
			case c == '"':
				rest = rest[i+1:]
				closed = true
			default:
				v.WriteByte(c)
			}
			if closed {
				break
			}
		}
		if !closed {
			return nil, false
		}
		if _, dup := params[name]; dup {
			return nil, false
		}
		params[name] = v.String()
		if rest == "" {
			break
		}
		if rest, ok = strings.CutPrefix(rest, ", "); !ok {
			return nil, false
		}
	}
	return params, true
}

// dropControls is what the header keeps of s: control characters removed.
func dropControls(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// FuzzChallenge builds WWW-Authenticate challenges from arbitrary values:
// the header never carries a control character (no header splitting, no
// NUL), and a client reads back exactly the values given, less their
// control characters; no value can inject a parameter of its own.
func FuzzChallenge(f *testing.F) {
	f.Add("https://h.example/.well-known/oauth-protected-resource/mcp", "mcp:read mcp:write", "invalid_token", "the access token is invalid")
	f.Add(`a", error="none`, `x\"`, "", "line\r\nSet-Cookie: a=b")
	f.Add("", "", "insufficient_scope", "\x00\x01\x7f")
	f.Add("\\", "\"", "\\\"", "é\u202e")
	// Nothing but one control character: DEL, then U+0001.
	f.Add("", "", "invalid_token", "\x7f")
	f.Add("", "", "invalid_token", "\x01")
	f.Fuzz(func(t *testing.T, prm, scopes, code, desc string) {
		c := Challenge{ResourceMetadata: prm, Scopes: strings.Fields(scopes), Error: code, Description: desc}
		h := c.String()
		for i := 0; i < len(h); i++ {
			if h[i] < 0x20 || h[i] == 0x7f {
				t.Fatalf("control character %#x in %q", h[i], h)
			}
		}
		got, ok := parseChallenge(h)
		if !ok {
			t.Fatalf("a client cannot read %q", h)
		}
		want := map[string]string{}
		for k, v := range map[string]string{"resource_metadata": prm, "scope": strings.Join(c.Scopes, " "), "error": code, "error_description": desc} {
			if v != "" {
				want[k] = dropControls(v)
			}
		}
		for k, v := range want {
			if want[k] == "" {
				delete(want, k)
				continue
			}
			if got[k] != v {
				t.Fatalf("%s = %q, want %q; header %q", k, got[k], v, h)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Fatalf("parameter %s injected into %q", k, h)
			}
		}
	})
}

// TestObjectFieldsRefusesWhatIsNoObject: objectFields gives errPeek for an
// empty value or one that is not an object.
func TestObjectFieldsRefusesWhatIsNoObject(t *testing.T) {
	for _, v := range []string{"", "  ", "[]", `"a"`} {
		if err := objectFields([]byte(v), func(_, _ []byte) error { return nil }); err != errPeek {
			t.Errorf("objectFields(%q) = %v; want errPeek", v, err)
		}
	}
}

// TestPeekJSONRPCReadsKeysAsTheDecoderDoes: member names with escapes are
// decoded, whitespace around names and values is skipped, so the method
// and tool an MCP server reads are the ones the scopes are chosen by.
func TestPeekJSONRPCReadsKeysAsTheDecoderDoes(t *testing.T) {
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"m\u0065thod":"tools/call","p\u0061rams":{"n\u0061me":"deploy"}}`,
		"{ \"jsonrpc\" : \"2.0\" ,\t\"id\" : 1 ,\r\n\"method\" : \"tools/call\" , \"params\" : { \"name\" : \"deploy\" } }",
	} {
		calls, err := peekJSONRPC([]byte(body))
		if err != nil || len(calls) != 1 || calls[0].Method != "tools/call" || calls[0].Name != "deploy" {
			t.Errorf("peekJSONRPC(%q) = %+v, %v; want tools/call of deploy", body, calls, err)
		}
	}
}
