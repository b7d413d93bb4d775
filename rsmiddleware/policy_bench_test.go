package rsmiddleware

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/toolpolicy"
)

// benchRules are 20 rules of the kinds docs/POLICY.md shows: globs over
// tools, prompts, resources and methods, on claims, arguments, client and
// scopes. allMatch makes every one of them match tools/call of
// delete_thing (each evaluated on each call); otherwise two do.
func benchRules(allMatch bool) []toolpolicy.Rule {
	exprs := []string{
		"'ops' in claims.groups && args.environment != 'production'",
		"claims.tenant == 'acme'",
		"client_id.startsWith('app')",
		"'mcp:tools' in scopes",
		"!has(args.force) || args.force == false",
		"size(args) <= 10",
		"claims.email.endsWith('@acme.example')",
		"method == 'tools/call'",
		"name.matches('^[a-z_]+$')",
		"args.environment in ['dev', 'staging', 'production']",
	}
	var out []toolpolicy.Rule
	for i := range 20 {
		m := toolpolicy.Match{Tools: []string{fmt.Sprintf("tool_%d_*", i)}}
		switch {
		case allMatch || i < 2:
			m = toolpolicy.Match{Tools: []string{"delete_*", "*_thing"}}
		case i%4 == 1:
			m = toolpolicy.Match{Prompts: []string{fmt.Sprintf("prompt_%d", i)}}
		case i%4 == 2:
			m = toolpolicy.Match{Resources: []string{fmt.Sprintf("file:///data/%d/*", i)}}
		case i%4 == 3:
			m = toolpolicy.Match{Methods: []string{"completion/complete"}}
		}
		out = append(out, toolpolicy.Rule{Match: m, Allow: exprs[i%len(exprs)], Message: "denied"})
	}
	return out
}

// BenchmarkPolicyCall measures what the policy adds to one tools/call
// through MCPFilter (parse, audit, the answer read back): the same
// request with no policy, with 20 rules of which two match the tool, and
// with 20 that all match it. The difference of ns/op is the policy's CPU
// per call (one goroutine, nothing waits); cpu-us/op is the process's CPU
// time per call.
//
//	go test ./rsmiddleware -run '^$' -bench PolicyCall -benchtime 20000x -count 5
func BenchmarkPolicyCall(b *testing.B) {
	claims, _ := json.Marshal(map[string]any{"iss": "https://as.example", "sub": "alice", "aud": testResource, "client_id": "app-1",
		"scope": "mcp:tools", "groups": []string{"ops", "dev"}, "tenant": "acme", "email": "alice@acme.example", "exp": 2e9, "iat": 1e9, "jti": "j"})
	token := "eyJhbGciOiJFUzI1NiJ9." + base64.RawURLEncoding.EncodeToString(claims) + ".sig"
	p := &Principal{Subject: "alice", ClientID: "app-1", Scopes: []string{"mcp:tools"}}
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_thing","arguments":{"environment":"staging","reason":"cleanup","items":[1,2,3]}}}`
	answer := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"deleted"}]}}`)
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})
	for _, tc := range []struct {
		name  string
		rules []toolpolicy.Rule
	}{{"none", nil}, {"20-rules-2-match", benchRules(false)}, {"20-rules-all-match", benchRules(true)}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := MCPFilterConfig{Audit: AuditLog(io.Discard, "json"), Logger: slog.New(slog.DiscardHandler)}
			if tc.rules != nil {
				e, err := toolpolicy.New(toolpolicy.Config{Rules: tc.rules})
				if err != nil {
					b.Fatal(err)
				}
				cfg.Policy = e
			}
			h := NewMCPFilter(cfg).Wrap(upstream)
			serve := func() *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
				r = r.WithContext(ContextWithPrincipal(r.Context(), p, token))
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}
			if w := serve(); !strings.Contains(w.Body.String(), "deleted") {
				b.Fatalf("answer %s", w.Body)
			}
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				serve()
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N)/1e3, "cpu-us/op")
		})
	}
}

// processCPU is the user and system CPU time of this process (the
// benchmark's goroutine and the garbage collector's), which other load on
// the machine does not inflate as it does wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPolicyToolsList measures a tools/list answer of 50 tools cut to
// what the caller can call under 20 rules, all matching delete_* and
// *_thing (partial evaluation per listed entry the rules match).
func BenchmarkPolicyToolsList(b *testing.B) {
	claims, _ := json.Marshal(map[string]any{"sub": "bob", "groups": []string{"dev"}, "tenant": "acme", "email": "bob@acme.example"})
	token := "eyJhbGciOiJFUzI1NiJ9." + base64.RawURLEncoding.EncodeToString(claims) + ".sig"
	p := &Principal{Subject: "bob", ClientID: "app-1", Scopes: []string{"mcp:tools"}}
	var tools []string
	for i := range 50 {
		name := fmt.Sprintf("tool_%d", i)
		if i%10 == 0 {
			name = fmt.Sprintf("delete_%d", i)
		}
		tools = append(tools, `{"name":"`+name+`","inputSchema":{"type":"object"}}`)
	}
	answer := []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[` + strings.Join(tools, ",") + `]}}`)
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})
	for _, tc := range []struct {
		name  string
		rules []toolpolicy.Rule
	}{{"none", nil}, {"20-rules", benchRules(true)}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := MCPFilterConfig{Audit: AuditLog(io.Discard, "json"), Logger: slog.New(slog.DiscardHandler)}
			if tc.rules != nil {
				e, err := toolpolicy.New(toolpolicy.Config{Rules: tc.rules})
				if err != nil {
					b.Fatal(err)
				}
				cfg.Policy = e
			}
			h := NewMCPFilter(cfg).Wrap(upstream)
			cpu := processCPU()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
				r = r.WithContext(ContextWithPrincipal(r.Context(), p, token))
				h.ServeHTTP(httptest.NewRecorder(), r)
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N)/1e3, "cpu-us/op")
		})
	}
}

// BenchmarkPolicyStep measures the policy's own step of a tools/call in
// MCPFilter, what the gateway adds per call with Policy set: the caller
// made from the verified token (its claims decoded once per token, as the
// Verifier's cache hands out one Principal per token), the arguments
// decoded for the rules that read them, every matching rule evaluated.
// The request's parse is done once, outside the loop: the filter does it
// with or without a policy.
//
//	go test ./rsmiddleware -run '^$' -bench PolicyStep -benchtime 200000x -count 5
func BenchmarkPolicyStep(b *testing.B) {
	claims, _ := json.Marshal(map[string]any{"iss": "https://as.example", "sub": "alice", "aud": testResource, "client_id": "app-1",
		"scope": "mcp:tools", "groups": []string{"ops", "dev"}, "tenant": "acme", "email": "alice@acme.example", "exp": 2e9, "iat": 1e9, "jti": "j"})
	token := "eyJhbGciOiJFUzI1NiJ9." + base64.RawURLEncoding.EncodeToString(claims) + ".sig"
	p := &Principal{Subject: "alice", ClientID: "app-1", Scopes: []string{"mcp:tools"}}
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_thing","arguments":{"environment":"staging","reason":"cleanup","items":[1,2,3]}}}`)
	for _, tc := range []struct {
		name  string
		rules []toolpolicy.Rule
	}{{"20-rules-2-match", benchRules(false)}, {"20-rules-all-match", benchRules(true)}} {
		b.Run(tc.name, func(b *testing.B) {
			e, err := toolpolicy.New(toolpolicy.Config{Rules: tc.rules})
			if err != nil {
				b.Fatal(err)
			}
			f := NewMCPFilter(MCPFilterConfig{Policy: e, Logger: slog.New(slog.DiscardHandler)})
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r = r.WithContext(ContextWithPrincipal(r.Context(), p, token))
			reqs, err := parseRequests(body, false)
			if err != nil {
				b.Fatal(err)
			}
			w := httptest.NewRecorder()
			start := time.Now()
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				if !f.applyPolicy(w, r, p, f.caller(r, p), start, body, reqs) {
					b.Fatalf("denied: %s", w.Body)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N)/1e3, "cpu-us/op")
		})
	}
}
