package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// switchableAS is a real AS whose listener answers 503 to everything while
// down is set, counting the requests it refused.
type switchableAS struct {
	issuer  string
	down    atomic.Bool
	refused atomic.Int32
	tokens  atomic.Int32 // token requests served
}

func startSwitchableAS(t *testing.T, upRes string) *switchableAS {
	t.Helper()
	a := &switchableAS{}
	srv := httptest.NewUnstartedServer(nil)
	a.issuer = "http://" + srv.Listener.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := as.New(ctx, as.Config{
		Issuer:    a.issuer,
		Resources: []as.Resource{{URI: upRes, Scopes: []string{"upstream:call"}, Default: true}},
		Clients: []as.Client{{ID: "gw", Secret: gwSecret, GrantTypes: []string{"client_credentials"},
			Scopes: []string{"upstream:call"}, Resources: []string{upRes}}},
		Store:  memory.New(),
		Secret: bytes.Repeat([]byte{9}, 32),
	})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.down.Load() {
			a.refused.Add(1)
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/token" {
			a.tokens.Add(1)
		}
		h.ServeHTTP(w, r)
	})
	srv.Start()
	t.Cleanup(func() { srv.Close(); cancel() })
	return a
}

// refusingUpstream answers 401 to a request whose bearer token is in
// refuse (or to every request while all is set), 200 with the body it got
// otherwise; it records every token and body.
type refusingUpstream struct {
	mu     sync.Mutex
	refuse map[string]bool
	all    bool
	tokens []string
	bodies []string
}

func (u *refusingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	u.mu.Lock()
	u.tokens, u.bodies = append(u.tokens, tok), append(u.bodies, string(b))
	refused := u.all || u.refuse[tok]
	u.mu.Unlock()
	if refused {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.Write(b)
}

func (u *refusingUpstream) seen() ([]string, []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.tokens...), append([]string(nil), u.bodies...)
}

// A 401 from the upstream drops the cached token: the request is sent once
// more with a new token, and when that is refused too the 401 is passed on
// (one retry, no loop). A body that cannot be sent again gets the 401 at
// once, and the next request a new token.
func TestClientCredentialsTransportDropsATokenTheUpstreamRefuses(t *testing.T) {
	up := &refusingUpstream{refuse: map[string]bool{}}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	a := startSwitchableAS(t, upSrv.URL+"/mcp")
	tr := &ccTransport{cfg: &Config{Issuer: a.issuer}, g: &GrantConfig{ClientID: "gw", ClientSecret: gwSecret, Resource: upSrv.URL + "/mcp"},
		base: http.DefaultTransport}
	post := func(body string, replayable bool) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, upSrv.URL+"/mcp", strings.NewReader(body))
		if !replayable {
			req.GetBody = nil
		}
		res, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		return res
	}
	if res := post("one", true); res.StatusCode != http.StatusOK || a.tokens.Load() != 1 {
		t.Fatalf("first request: %d, %d token requests", res.StatusCode, a.tokens.Load())
	}
	if res := post("two", true); res.StatusCode != http.StatusOK || a.tokens.Load() != 1 {
		t.Fatalf("second request: %d, %d token requests (the token is not reused)", res.StatusCode, a.tokens.Load())
	}
	tokens, _ := up.seen()
	up.mu.Lock()
	up.refuse[tokens[0]] = true // revoked
	up.mu.Unlock()

	res := post("three", true)
	b, _ := io.ReadAll(res.Body)
	tokens, bodies := up.seen()
	if res.StatusCode != http.StatusOK || string(b) != "three" || len(tokens) != 4 || tokens[3] == tokens[2] ||
		bodies[2] != "three" || bodies[3] != "three" || a.tokens.Load() != 2 {
		t.Fatalf("after a revocation: %d %q; tokens %d (last two equal: %v), bodies %q, %d token requests",
			res.StatusCode, b, len(tokens), tokens[3] == tokens[2], bodies, a.tokens.Load())
	}

	up.mu.Lock()
	up.all = true
	up.mu.Unlock()
	if res := post("four", true); res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("an upstream refusing every token: %d, want its 401 passed on", res.StatusCode)
	}
	if tokens, _ = up.seen(); len(tokens) != 6 || a.tokens.Load() != 3 {
		t.Fatalf("an upstream refusing every token: %d upstream requests (want 2 for the request), %d token requests", len(tokens)-4, a.tokens.Load())
	}
	if res := post("five", false); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a body that cannot be sent again: %d, want 401", res.StatusCode)
	}
	if tokens, _ = up.seen(); len(tokens) != 7 {
		t.Fatalf("a body that cannot be sent again was sent %d times", len(tokens)-6)
	}
	up.mu.Lock()
	up.all = false
	up.mu.Unlock()
	if res := post("six", true); res.StatusCode != http.StatusOK || a.tokens.Load() != 5 {
		t.Fatalf("after the 401 of an unrepeatable request: %d, %d token requests, want a new token", res.StatusCode, a.tokens.Load())
	}
}

// While the AS does not answer its metadata, requests fail at once with
// errTokenEndpoint, and it is asked again only after a backoff that doubles
// from 1 s to 30 s; once it answers, tokens flow.
func TestClientCredentialsTransportBacksOffAnASThatIsDown(t *testing.T) {
	up := &refusingUpstream{refuse: map[string]bool{}}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	a := startSwitchableAS(t, upSrv.URL+"/mcp")
	a.down.Store(true)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := &ccTransport{cfg: &Config{Issuer: a.issuer}, g: &GrantConfig{ClientID: "gw", ClientSecret: gwSecret, Resource: upSrv.URL + "/mcp"},
		base: http.DefaultTransport, now: func() time.Time { return now }}
	send := func() error {
		req, _ := http.NewRequest(http.MethodPost, upSrv.URL+"/mcp", strings.NewReader("x"))
		res, err := tr.RoundTrip(req)
		if err == nil {
			res.Body.Close()
		}
		return err
	}
	asked := func() int32 { return a.refused.Load() }
	for i := range 5 {
		if err := send(); !errors.Is(err, errTokenEndpoint) {
			t.Fatalf("request %d with the AS down: %v", i, err)
		}
	}
	first := asked()
	if first == 0 {
		t.Fatal("the AS was never asked")
	}
	for _, step := range []struct {
		advance time.Duration
		more    bool
	}{{999 * time.Millisecond, false}, {time.Millisecond, true}, {1500 * time.Millisecond, false}, {500 * time.Millisecond, true},
		{3 * time.Second, false}, {time.Second, true}, {7 * time.Second, false}, {time.Second, true}, {16 * time.Second, true},
		{29 * time.Second, false}, {time.Second, true}, {30 * time.Second, true}} {
		now = now.Add(step.advance)
		before := asked()
		for range 3 {
			if err := send(); !errors.Is(err, errTokenEndpoint) {
				t.Fatalf("with the AS down: %v", err)
			}
		}
		if got := asked() > before; got != step.more {
			t.Fatalf("%v later: AS asked again %v, want %v", step.advance, got, step.more)
		}
		if asked()-before > first {
			t.Fatalf("%v later: %d metadata requests for 3 requests", step.advance, asked()-before)
		}
	}
	a.down.Store(false)
	now = now.Add(30 * time.Second)
	if err := send(); err != nil {
		t.Fatalf("the AS back: %v", err)
	}
	if tokens, _ := up.seen(); len(tokens) != 1 || a.tokens.Load() != 1 {
		t.Fatalf("the AS back: %d upstream requests, %d token requests", len(tokens), a.tokens.Load())
	}
}
