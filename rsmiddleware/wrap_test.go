package rsmiddleware

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestOnlyAPreflightPassesWithoutAToken: a request passes unauthenticated
// only when it is an OPTIONS with both Origin and
// Access-Control-Request-Method; the CORS headers on another method do not
// make it a preflight.
func TestOnlyAPreflightPassesWithoutAToken(t *testing.T) {
	f := newRS(t, nil)
	for _, tc := range []struct {
		method string
		header map[string]string
	}{
		{"POST", map[string]string{"Origin": "https://inspector.example", "Access-Control-Request-Method": "POST"}},
		{"POST", map[string]string{"Access-Control-Request-Method": "POST"}},
		{"OPTIONS", map[string]string{"Access-Control-Request-Method": "POST"}},
		{"OPTIONS", map[string]string{"Origin": "https://inspector.example"}},
	} {
		resp, _ := f.do(t, tc.method, "/mcp", tc.header, rpc("tools/list", nil))
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s with %v: status %d; want 401", tc.method, tc.header, resp.StatusCode)
		}
	}
}

// TestWrapLeavesWhatItNeedNotRead: a query string without access_token is
// no refusal, and with no per-method or per-tool scopes the body is not
// read or parsed (a body that is not JSON-RPC reaches the handler).
func TestWrapLeavesWhatItNeedNotRead(t *testing.T) {
	f := newRS(t, func(c *MiddlewareConfig) { c.Scopes = Scopes{} })
	auth := map[string]string{"Authorization": "Bearer " + f.ks.mint(f.ks.claims())}
	resp, body := f.do(t, "POST", "/mcp?session=1", auth, "not json")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"body":"not json"`) {
		t.Fatalf("status %d, body %s; want 200 with the body passed on", resp.StatusCode, body)
	}
}

// lockedBuffer is an io.Writer for a logger written from server goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMiddlewareLogger: a refused token is logged to the configured
// Logger; without one the Middleware logs to slog.Default.
func TestMiddlewareLogger(t *testing.T) {
	var logs lockedBuffer
	f := newRS(t, func(c *MiddlewareConfig) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	resp, _ := f.do(t, "POST", "/mcp", map[string]string{"Authorization": "Bearer not-a-jwt"}, rpc("tools/list", nil))
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(logs.String(), "rsmiddleware: token refused") {
		t.Fatalf("status %d, log %q; want 401 and the refusal logged", resp.StatusCode, logs.String())
	}
	d := newRS(t, func(c *MiddlewareConfig) { c.Logger = nil })
	if resp, _ := d.do(t, "POST", "/mcp", map[string]string{"Authorization": "Bearer not-a-jwt"}, rpc("tools/list", nil)); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a Logger: status %d; want 401", resp.StatusCode)
	}
}

// TestReadBody: bodies of unknown length, of a Content-Length that lies,
// and of exactly the limit are read; one byte more is too large.
func TestReadBody(t *testing.T) {
	req := func(n int64, body string) *http.Request {
		return &http.Request{ContentLength: n, Body: io.NopCloser(strings.NewReader(body))}
	}
	for _, tc := range []struct {
		name string
		r    *http.Request
		want string
		err  error
	}{
		{"unknown length", req(-1, "abc"), "abc", nil},
		{"known length", req(3, "abc"), "abc", nil},
		{"a Content-Length far over the limit, with a short body", req(1<<50, "x"), "x", nil},
		{"exactly the limit, unknown length", req(-1, "0123456789"), "0123456789", nil},
		{"exactly the limit, known length", req(10, "0123456789"), "0123456789", nil},
		{"over the limit, unknown length", req(-1, "0123456789a"), "", errBodyTooLarge},
		{"over the limit, known length", req(11, "0123456789a"), "", errBodyTooLarge},
	} {
		b, err := readBody(tc.r, 10)
		if string(b) != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("%s: %q, %v; want %q, %v", tc.name, b, err, tc.want, tc.err)
		}
	}
}

// TestUnreadBody: a buffered body counts as unread only until something
// reads from it.
func TestUnreadBody(t *testing.T) {
	r := &http.Request{Body: newBufferedBody([]byte("abc"), true, io.NopCloser(nil))}
	if bb, ok := unreadBody(r); !ok || string(bb.b) != "abc" {
		t.Fatal("an unread buffered body is not found")
	}
	var one [1]byte
	if _, err := r.Body.Read(one[:]); err != nil {
		t.Fatal(err)
	}
	if _, ok := unreadBody(r); ok {
		t.Fatal("a partly read body counts as unread")
	}
	if _, ok := unreadBody(&http.Request{Body: io.NopCloser(strings.NewReader("abc"))}); ok {
		t.Fatal("a plain body counts as a buffered one")
	}
}

// TestMethodScopesAloneAreEnforced: scopes configured for methods only
// (no per-tool scopes) are still read from the body and required.
func TestMethodScopesAloneAreEnforced(t *testing.T) {
	f := newRS(t, func(c *MiddlewareConfig) {
		c.Scopes = Scopes{Methods: map[string][]string{"tools/call": {"mcp:write"}}}
	})
	resp, _ := f.do(t, "POST", "/mcp", map[string]string{"Authorization": "Bearer " + f.ks.mint(f.ks.claims())}, rpc("tools/call", map[string]any{"name": "x"}))
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("tools/call without mcp:write: status %d; want 403", resp.StatusCode)
	}
}

// TestPrincipalFromAnEmptyContext: no principal, no panic.
func TestPrincipalFromAnEmptyContext(t *testing.T) {
	if p, ok := PrincipalFromContext(context.Background()); ok || p != nil {
		t.Fatalf("PrincipalFromContext(empty) = %v, %v", p, ok)
	}
}

// TestMountPRMAtTheRootOnlyWhenAsked: the root well-known path serves the
// metadata only with root set, and a resource at the origin's root is
// mounted once.
func TestMountPRMAtTheRootOnlyWhenAsked(t *testing.T) {
	doc, err := NewProtectedResourceMetadata(testResource, []string{"https://as.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	if err := MountPRM(mux, doc, false); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/.well-known/oauth-protected-resource", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("root path without root: status %d; want 404", rec.Code)
	}
	rootDoc, err := NewProtectedResourceMetadata("https://mcp.example.com", []string{"https://as.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := MountPRM(http.NewServeMux(), rootDoc, true); err != nil {
		t.Fatal(err)
	}
}

// A CORS preflight passes the whole chain a gateway builds (Middleware,
// SessionBinding, MCPFilter) to the handler, which answers it; an OPTIONS
// that is no preflight still needs a token.
func TestPreflightReachesTheHandlerThroughTheChain(t *testing.T) {
	ks := newKeyServer(t)
	prm, _ := ResourceMetadataURL(testResource)
	f := NewMCPFilter(MCPFilterConfig{Scopes: filterScopes, Audit: AuditLog(io.Discard, "json"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	mw, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(t, nil), ResourceMetadataURL: prm, Scopes: filterScopes,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), OnInsufficientScope: f.AuditDenied, OnRefused: f.AuditRefused})
	if err != nil {
		t.Fatal(err)
	}
	var b SessionBinding
	srv := httptest.NewServer(mw.Wrap(b.Wrap(f.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
		w.Header().Set("Access-Control-Allow-Headers", "authorization, content-type, mcp-protocol-version, mcp-session-id")
		w.WriteHeader(http.StatusNoContent)
	})))))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name   string
		header map[string]string
		status int
	}{
		{"answers a preflight", map[string]string{"Origin": "http://localhost:6274", "Access-Control-Request-Method": "POST",
			"Access-Control-Request-Headers": "authorization, content-type"}, http.StatusNoContent},
		{"answers a preflight naming a session", map[string]string{"Origin": "http://localhost:6274", "Access-Control-Request-Method": "GET",
			"Mcp-Session-Id": "s-1"}, http.StatusNoContent},
		{"refuses an OPTIONS without Access-Control-Request-Method", map[string]string{"Origin": "http://localhost:6274"}, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodOptions, srv.URL, nil)
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("%d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status == http.StatusNoContent && resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:6274" {
				t.Errorf("Access-Control-Allow-Origin %q", resp.Header.Get("Access-Control-Allow-Origin"))
			}
		})
	}
}
