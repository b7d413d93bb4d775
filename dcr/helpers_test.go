package dcr_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/dcr"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// newStore makes the store a test runs on: memory, unless a test running
// the suite on a SQL backend swapped it (see backends_test.go).
var newStore = func(t testing.TB) storage.ClientStore { return memory.New() }

var testSecret = []byte("0123456789abcdef0123456789abcdef-test-secret")

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// env is a registration endpoint served over real HTTP with a memory store.
type env struct {
	t     testing.TB
	srv   *httptest.Server
	store storage.ClientStore
	h     *dcr.Handler
	clock *clock
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func defaultPolicy() dcr.Policy {
	return dcr.Policy{
		Open:      true,
		Scopes:    []string{"mcp:read", "mcp:write"},
		Resources: []string{"https://mcp.example.com/mcp"},
		RateLimit: dcr.RateLimit{PerMinute: -1},
	}
}

func newEnv(t testing.TB, p dcr.Policy) *env {
	t.Helper()
	return newEnvWithStore(t, p, newStore(t))
}

// newEnvWithStore is newEnv on the given store.
func newEnvWithStore(t testing.TB, p dcr.Policy, store storage.ClientStore) *env {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	srv.Start()
	t.Cleanup(srv.Close)
	clk := newClock()
	h, err := dcr.New(dcr.Config{
		Endpoint: srv.URL + "/register",
		Store:    store,
		Secret:   testSecret,
		Policy:   p,
		Logger:   quietLogger(),
		Now:      clk.Now,
	})
	if err != nil {
		t.Fatalf("dcr.New: %v", err)
	}
	h.Mount(mux)
	return &env{t: t, srv: srv, store: store, h: h, clock: clk}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response body %q is not JSON: %v", r.body, err)
	}
	return m
}

func (r response) info(t testing.TB) dcr.ClientInformation {
	t.Helper()
	var ci dcr.ClientInformation
	if err := json.Unmarshal(r.body, &ci); err != nil {
		t.Fatalf("response body %q is not client information: %v", r.body, err)
	}
	return ci
}

func (e *env) do(method, url, token string, body string, hdr map[string]string) response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func (e *env) register(body string) response {
	e.t.Helper()
	return e.do(http.MethodPost, e.srv.URL+"/register", "", body, nil)
}

func (e *env) count() int {
	e.t.Helper()
	n, err := e.store.CountClients(context.Background(), "")
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func mustJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return b.String()
}

// stored reads the stored record of client id and fails the test when it
// cannot.
func (e *env) stored(t testing.TB, id string) *storage.Client {
	t.Helper()
	c, err := e.store.GetClient(context.Background(), id)
	if err != nil {
		t.Fatalf("GetClient(%q): %v", id, err)
	}
	return c
}
