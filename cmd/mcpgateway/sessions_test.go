package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	sessionKey      = "session-key-0123456789abcdef-0123456789"
	otherSessionKey = "another-key-0123456789abcdef-0123456789"
)

// instance starts another gateway of s's configuration with session_key
// key, in front of the same upstream and AS: the gateway after a restart,
// or a second instance behind a load balancer.
func (s *stack) instance(t *testing.T, key string) *httptest.Server {
	t.Helper()
	cfg := *s.cfg
	cfg.SessionKey = key
	g, err := NewGateway(&cfg, Options{Logger: slog.New(slog.DiscardHandler), AuditWriter: s.audit})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = g.Server()
	srv.Config.Addr = ""
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// router sends each request of a client, with its token, to the gateway
// instances it is pointed at, in turn.
type router struct {
	token string
	mu    sync.Mutex
	hosts []string
	n     int
}

func (rt *router) to(srvs ...*httptest.Server) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.hosts = rt.hosts[:0]
	for _, s := range srvs {
		u, _ := url.Parse(s.URL)
		rt.hosts = append(rt.hosts, u.Host)
	}
}

func (rt *router) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	host := rt.hosts[rt.n%len(rt.hosts)]
	rt.n++
	rt.mu.Unlock()
	r = r.Clone(r.Context())
	u := *r.URL
	u.Host = host
	r.URL, r.Host = &u, ""
	r.Header.Set("Authorization", "Bearer "+rt.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connectVia opens an MCP Go SDK client session through rt.
func connectVia(t *testing.T, s *stack, rt *router) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: s.resource, HTTPClient: &http.Client{Transport: rt}, MaxRetries: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func echo(cs *mcp.ClientSession, text string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		return "", err
	}
	if len(res.Content) != 1 {
		return "", errors.New("no content")
	}
	tc, _ := res.Content[0].(*mcp.TextContent)
	if tc == nil {
		return "", errors.New("not text")
	}
	return tc.Text, nil
}

// postTo sends one JSON-RPC message to the gateway served by srv.
func postTo(t *testing.T, s *stack, srv *httptest.Server, method, token, session, body string) *http.Response {
	t.Helper()
	u, _ := url.Parse(s.resource)
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, srv.URL+u.Path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// rawID is the upstream's session ID within a signed one.
func rawID(signed string) string {
	if i := strings.LastIndexByte(signed, '.'); i >= 0 {
		return signed[:i]
	}
	return signed
}

// A session opened through one gateway goes on through a new gateway with
// the same session_key (a restart) and ends, 404, at one with another key;
// the Go SDK client then reports ErrSessionMissing, and a new session
// through that gateway works. The upstream only ever sees its own IDs.
func TestGatewaySessionSurvivesARestartWithTheSameKey(t *testing.T) {
	s := newStack(t, false, baseConfig+"session_key: "+sessionKey+"\n")
	rt := &router{token: s.token(t, "user-bot")}
	rt.to(s.gw)
	cs := connectVia(t, s, rt)
	if got, err := echo(cs, "before"); err != nil || got != "before" {
		t.Fatalf("echo: %q %v", got, err)
	}

	restarted := s.instance(t, sessionKey)
	rt.to(restarted)
	s.gw.CloseClientConnections() // the first gateway is gone, streams and all
	if got, err := echo(cs, "after the restart"); err != nil || got != "after the restart" {
		t.Fatalf("echo after the restart: %q %v", got, err)
	}
	sid := cs.ID()
	for _, got := range s.up.seenSessions() {
		if got != "" && got != rawID(sid) {
			t.Fatalf("the upstream got Mcp-Session-Id %q, want its own %q", got, rawID(sid))
		}
	}

	rekeyed := s.instance(t, otherSessionKey)
	rt.to(rekeyed)
	before := len(s.up.seen())
	if _, err := echo(cs, "after a new key"); !errors.Is(err, mcp.ErrSessionMissing) {
		t.Fatalf("a session of another key: %v, want ErrSessionMissing", err)
	}
	if resp := postTo(t, s, rekeyed, http.MethodPost, rt.token, sid, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a session of another key: %d, want 404", resp.StatusCode)
	}
	if n := len(s.up.seen()) - before; n != 0 {
		t.Errorf("%d requests of the refused session reached the upstream", n)
	}
	fresh := connectVia(t, s, rt) // what MCP asks of the client: a new session
	if got, err := echo(fresh, "new session"); err != nil || got != "new session" {
		t.Fatalf("echo in a new session: %q %v", got, err)
	}
}

// Two gateways with one session_key serve one session request by request,
// through the Go SDK client.
func TestGatewayInstancesWithOneKeyServeOneSession(t *testing.T) {
	s := newStack(t, true, baseConfig+"session_key: "+sessionKey+"\n")
	rt := &router{token: s.token(t, "user-bot")}
	rt.to(s.gw, s.instance(t, sessionKey))
	cs := connectVia(t, s, rt)
	for i, text := range []string{"one", "two", "three", "four"} {
		if got, err := echo(cs, text); err != nil || got != text {
			t.Fatalf("call %d: %q %v", i, got, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if rt.n < 6 {
		t.Fatalf("%d requests, want both instances used", rt.n)
	}
}

// Only the signed ID of the caller's own session passes, at every
// instance: another user's, the upstream's raw ID and a tampered MAC are
// 404 before the upstream; a DELETE reaches the upstream with its own ID.
func TestGatewayRefusesSessionIDsNotSignedForTheCaller(t *testing.T) {
	s := newStack(t, false, baseConfig+"session_key: "+sessionKey+"\n")
	one, two := s.gw, s.instance(t, sessionKey)
	alice, bob := s.token(t, "user-bot"), s.token(t, "admin-bot")
	resp := rawPost(t, s, alice, "", initialize, nil)
	sid := resp.Header.Get("Mcp-Session-Id")
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(sid, ".") {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	if got := s.up.seenSessions(); len(got) != 1 || got[0] != "" {
		t.Fatalf("the upstream got %q", got)
	}
	if resp := postTo(t, s, two, http.MethodPost, alice, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notification at the second instance: %d", resp.StatusCode)
	}
	tampered := []byte(sid)
	if tampered[len(tampered)-3] == 'A' {
		tampered[len(tampered)-3] = 'B'
	} else {
		tampered[len(tampered)-3] = 'A'
	}
	for _, tc := range []struct {
		name           string
		token, session string
		status         int
	}{
		{"lets alice use her session", alice, sid, 200},
		{"refuses bob with alice's session ID", bob, sid, 404},
		{"refuses alice with the upstream's raw ID", alice, rawID(sid), 404},
		{"refuses bob with the upstream's raw ID", bob, rawID(sid), 404},
		{"refuses a tampered MAC", alice, string(tampered), 404},
		{"refuses the MAC alone", alice, sid[len(rawID(sid)):], 404},
	} {
		for i, srv := range []*httptest.Server{one, two} {
			t.Run(tc.name, func(t *testing.T) {
				before := len(s.up.seen())
				resp := postTo(t, s, srv, http.MethodPost, tc.token, tc.session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
				if resp.StatusCode != tc.status {
					t.Fatalf("instance %d: %d, want %d", i+1, resp.StatusCode, tc.status)
				}
				reached := len(s.up.seen()) - before
				if tc.status == 404 && reached != 0 {
					t.Fatalf("instance %d: the refused request reached the upstream", i+1)
				}
				if tc.status == 200 && resp.Header.Get("Mcp-Session-Id") != "" && resp.Header.Get("Mcp-Session-Id") != sid {
					t.Fatalf("instance %d: answer's Mcp-Session-Id %q, want %q", i+1, resp.Header.Get("Mcp-Session-Id"), sid)
				}
			})
		}
	}
	if resp := postTo(t, s, two, http.MethodDelete, bob, sid, ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("bob's DELETE of alice's session: %d, want 404", resp.StatusCode)
	}
	if resp := postTo(t, s, two, http.MethodDelete, alice, sid, ""); resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	if got := s.up.seenSessions(); got[len(got)-1] != rawID(sid) {
		t.Fatalf("the upstream's DELETE carried %q, want %q", got[len(got)-1], rawID(sid))
	}
	if resp := postTo(t, s, one, http.MethodPost, alice, sid, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the ended session at the other instance: %d, want 404 (the upstream's)", resp.StatusCode)
	}
}

// Without session_key the gateway draws a key of its own and says so
// once: two such gateways do not share sessions.
func TestGatewayWithoutSessionKeyDrawsOneAndSaysSo(t *testing.T) {
	s := newStack(t, false, baseConfig)
	var logs bytes.Buffer
	g, err := NewGateway(s.cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), AuditWriter: s.audit})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), "no session_key") {
		t.Fatalf("%d log lines, want one about session_key:\n%s", n, logs.String())
	}
	other := httptest.NewServer(g)
	t.Cleanup(other.Close)
	alice := s.token(t, "user-bot")
	resp := rawPost(t, s, alice, "", initialize, nil)
	io.Copy(io.Discard, resp.Body)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || !strings.Contains(sid, ".") {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	if resp := postTo(t, s, s.gw, http.MethodPost, alice, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != 200 {
		t.Fatalf("the same gateway: %d", resp.StatusCode)
	}
	if resp := postTo(t, s, other, http.MethodPost, alice, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a gateway with a key of its own: %d, want 404", resp.StatusCode)
	}
}
