package rsmiddleware

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// benchTools is a tools/list result of 50 tools, each with a description of
// about 150 characters and an input schema of three described properties.
func benchTools() string {
	var tools []string
	for i := range 50 {
		tools = append(tools, fmt.Sprintf(`{"name":"tool_%d","title":"Tool %d","description":"Looks up the records of kind %d in the inventory and returns them as a table, newest first; at most one hundred records are returned per call.",`+
			`"inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"Words the records must contain."},"limit":{"type":"integer","description":"How many records to return."},"since":{"type":"string","format":"date-time","description":"Only records changed after this time."}},"required":["query"]},`+
			`"annotations":{"readOnlyHint":true,"title":"Inventory lookup %d"}}`, i, i, i, i))
	}
	return `{"tools":[` + strings.Join(tools, ",") + `]}`
}

// BenchmarkToolGuard measures what pins (enforce, every tool approved) and
// screening (hide, the built-in patterns) add to a tools/list answer of 50
// tools and to a tools/call through MCPFilter, against the same filter
// without them; "cold" is a filter that has seen no definition before
// (every digest computed and every text screened; a call first lists the
// tools). cpu-us/op is the process's CPU time per request.
//
//	go test ./rsmiddleware -run '^$' -bench ToolGuard -benchtime 2000x -count 3
func BenchmarkToolGuard(b *testing.B) {
	p := &Principal{Subject: "alice", ClientID: "app-1", Scopes: []string{"mcp:tools"}}
	list := []byte(`{"jsonrpc":"2.0","id":1,"result":` + benchTools() + `}`)
	callAnswer := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"done"}]}}`)
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(body), `"tools/list"`) {
			_, _ = w.Write([]byte(strings.Replace(string(list), `"id":1`, `"id":`+idOf(string(body)), 1)))
			return
		}
		_, _ = w.Write(callAnswer)
	})
	path := filepath.Join(b.TempDir(), "pins.json")
	learn, err := NewToolPins(ToolPinsConfig{File: path, Mode: PinsLearn, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	h := NewMCPFilter(MCPFilterConfig{Pins: learn, Logger: slog.New(slog.DiscardHandler)}).Wrap(upstream)
	serveOn(h, p, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`) // pins all 50
	pins, err := NewToolPins(ToolPinsConfig{File: path, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	screen, _ := NewScreening(ScreeningConfig{})
	for _, req := range []struct{ name, body, want string }{
		{"tools-list-50", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "tool_49"},
		{"tools-call", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"tool_3","arguments":{"query":"disk"}}}`, "done"},
	} {
		for _, tc := range []struct {
			name   string
			pins   *ToolPins
			screen *Screening
			cold   bool // a new filter per request: no definition seen before
		}{{"none", nil, nil, false}, {"pins+screening", pins, screen, false}, {"pins+screening-cold", pins, screen, true}} {
			b.Run(req.name+"/"+tc.name, func(b *testing.B) {
				cfg := MCPFilterConfig{Audit: AuditLog(io.Discard, "json"), Logger: slog.New(slog.DiscardHandler),
					Pins: tc.pins, Screening: tc.screen}
				h := NewMCPFilter(cfg).Wrap(upstream)
				if w := serveOn(h, p, req.body); !strings.Contains(w.Body.String(), req.want) {
					b.Fatalf("answer %s", w.Body)
				}
				b.ReportAllocs()
				cpu := processCPU()
				for b.Loop() {
					if tc.cold {
						h = NewMCPFilter(cfg).Wrap(upstream)
					}
					serveOn(h, p, req.body)
				}
				b.ReportMetric(float64(processCPU()-cpu)/float64(b.N)/1e3, "cpu-us/op")
			})
		}
	}
}

func idOf(body string) string {
	_, rest, _ := strings.Cut(body, `"id":`)
	id, _, _ := strings.Cut(rest, ",")
	return id
}

func serveOn(h http.Handler, p *Principal, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	r = r.WithContext(ContextWithPrincipal(r.Context(), p, ""))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}
