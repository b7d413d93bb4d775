package rsmiddleware

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Only a CORS preflight passes MCPFilter without a principal; any other
// request without one (the filter wrapped outside Middleware) is 401 and
// never reaches the handler.
func TestMCPFilterNeedsAPrincipal(t *testing.T) {
	reached := 0
	f := NewMCPFilter(MCPFilterConfig{Scopes: filterScopes})
	srv := httptest.NewServer(principalFrom(f.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached++
		w.WriteHeader(http.StatusNoContent)
	}))))
	defer srv.Close()
	if got := send(t, srv, http.MethodPost, "", "").StatusCode; got != http.StatusUnauthorized || reached != 0 {
		t.Errorf("a POST without a principal: %d, handler reached %d times; want 401, 0", got, reached)
	}
	if got := send(t, srv, http.MethodOptions, "", "", "Origin", "https://app.example", "Access-Control-Request-Method", "POST").StatusCode; got != http.StatusNoContent || reached != 1 {
		t.Errorf("a preflight: %d, handler reached %d times; want 204, 1", got, reached)
	}
}

// The name of a tools/call or prompts/get is read (the audit's tool
// field); that of another method's params is not.
func TestParseRequestsReadsNamesOfCallsAndPromptsOnly(t *testing.T) {
	for body, want := range map[string]string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}`:     "t",
		`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p"}}`:    "p",
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"name":"r"}}`: "",
	} {
		reqs, err := parseRequests([]byte(body), false)
		if err != nil || len(reqs) != 1 || reqs[0].tool != want {
			t.Errorf("%s: %v, tool %q; want %q", body, err, reqs[0].tool, want)
		}
	}
	// A response without an id (JSON-RPC 2.0 §5 requires one, null at
	// least) is one event, not refused: the server judges it.
	if reqs, err := parseRequests([]byte(`{"jsonrpc":"2.0","result":{}}`), true); err != nil || len(reqs) != 1 || !reqs[0].response {
		t.Errorf("a response without id: %v, %d messages", err, len(reqs))
	}
}

// What AuditRefused reads of a refused body: exactly MaxRefusedPeekBytes,
// with or without Content-Length, is read and its messages named; one byte
// more is one event of MethodUnknown; a batch of more than MaxBatchRequests
// messages is one event of MethodBatch; a refused GET gets no event.
func TestAuditRefusedBodyLimits(t *testing.T) {
	fx := newFilterFixture(t, mcpUpstream(false), nil)
	const ping = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	padded := func(n int) string { return ping + strings.Repeat(" ", n-len(ping)) }
	post := func(body string, chunked bool) {
		var r io.Reader = strings.NewReader(body)
		if chunked {
			r = io.MultiReader(r) // no length known: sent chunked
		}
		req, _ := http.NewRequest(http.MethodPost, fx.srv.URL, r)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", resp.StatusCode)
		}
	}
	var batch []string
	for i := 0; i <= MaxBatchRequests; i++ {
		batch = append(batch, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i))
	}
	for _, c := range []struct {
		name    string
		body    string
		chunked bool
		method  string
	}{
		{"exactly the limit, with Content-Length", padded(MaxRefusedPeekBytes), false, "ping"},
		{"exactly the limit, chunked", padded(MaxRefusedPeekBytes), true, "ping"},
		{"one byte more, chunked", padded(MaxRefusedPeekBytes + 1), true, MethodUnknown},
		{"a batch of one message too many", "[" + strings.Join(batch, ",") + "]", false, MethodBatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(fx.audit.String())
			post(c.body, c.chunked)
			lines := auditLines(t, fx.audit.String()[before:])
			if len(lines) != 1 || lines[0].Method != c.method || lines[0].Result != AuditUnauthorized {
				t.Errorf("audit: %+v, want one event of %s", lines, c.method)
			}
		})
	}
	t.Run("a GET", func(t *testing.T) {
		before := len(fx.audit.String())
		req, _ := http.NewRequest(http.MethodGet, fx.srv.URL, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || len(fx.audit.String()) != before {
			t.Errorf("status %d, audit %q; want 401 and no event", resp.StatusCode, fx.audit.String()[before:])
		}
	})
}

// A notification before two requests under one id does not hide them.
func TestSharedIDLooksPastNotifications(t *testing.T) {
	reqs, err := parseRequests([]byte(`[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":1.0,"method":"ping"}]`), false)
	if err != nil || !sharedID(reqs) {
		t.Errorf("%v, shared: %v; want two requests under one id", err, err == nil && sharedID(reqs))
	}
}
