package rsmiddleware_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// Trimming tools/list to the caller's scopes and auditing each call. In a
// server the filter sits inside Middleware.Wrap, which puts the principal
// in the context; here it is put there by hand.
func ExampleMCPFilter() {
	scopes := rsmiddleware.Scopes{
		Base:  []string{"mcp:tools"},
		Tools: map[string][]string{"admin_stats": {"mcp:admin"}},
	}
	filter := rsmiddleware.NewMCPFilter(rsmiddleware.MCPFilterConfig{
		Scopes: scopes,
		Audit: func(e rsmiddleware.AuditEvent) {
			fmt.Println("audit:", e.Event, e.Subject, e.Result)
		},
	})
	server := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo"},{"name":"admin_stats"}]}}`)
	})
	h := filter.Wrap(server)

	req := httptest.NewRequest("POST", "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	p := &rsmiddleware.Principal{Subject: "alice", ClientID: "app", Scopes: []string{"mcp:tools"}}
	req = req.WithContext(rsmiddleware.ContextWithPrincipal(context.Background(), p, ""))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	fmt.Println(rec.Body.String())
	// Output:
	// audit: tools/list alice ok
	// {"id":1,"jsonrpc":"2.0","result":{"tools":[{"name":"echo"}]}}
}
