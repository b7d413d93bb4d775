package rsmiddleware

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// downstreamRefusing answers 401 invalid_token to the tokens in refuse and
// 200 to any other, recording each request's token and body.
type downstreamRefusing struct {
	mu        sync.Mutex
	refuseAll bool
	refused   map[string]bool
	tokens    []string
	bodies    []string
}

func (d *downstreamRefusing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	d.mu.Lock()
	d.tokens = append(d.tokens, tok)
	d.bodies = append(d.bodies, string(b))
	refuse := d.refuseAll || (len(d.tokens) == 1)
	if refuse {
		d.refused[tok] = true
	}
	d.mu.Unlock()
	if refuse {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func TestExchangedTokenRefusedByTheResourceIsExchangedAnew(t *testing.T) {
	ks := newKeyServer(t)
	e := newExchanger(t, ks, nil)
	d := &downstreamRefusing{refused: map[string]bool{}}
	srv := httptest.NewServer(d)
	defer srv.Close()
	client := &http.Client{Transport: e.Transport(nil, downstreamRes)}
	ctx := ContextWithPrincipal(context.Background(), &Principal{Subject: "alice"}, ks.mint(ks.claims()))
	post := func(body io.Reader) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, body)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	// The first token is refused: the request is sent once more, whole,
	// with a token exchanged anew, and that answer is the caller's.
	if got := post(strings.NewReader(`{"n":1}`)); got != http.StatusOK {
		t.Fatalf("status %d, want 200 from the second send", got)
	}
	if len(d.tokens) != 2 || d.tokens[0] == d.tokens[1] || d.bodies[0] != `{"n":1}` || d.bodies[1] != `{"n":1}` {
		t.Fatalf("downstream saw tokens %d (distinct: %v), bodies %q", len(d.tokens), len(d.tokens) == 2 && d.tokens[0] != d.tokens[1], d.bodies)
	}
	if got := ks.tokenHits.Load(); got != 2 {
		t.Fatalf("token endpoint called %d times, want 2", got)
	}
	// The new token is the cached one now.
	if got := post(strings.NewReader(`{"n":2}`)); got != http.StatusOK || ks.tokenHits.Load() != 2 || d.tokens[2] != d.tokens[1] {
		t.Fatalf("status %d, token endpoint %d calls, third token reused: %v", got, ks.tokenHits.Load(), d.tokens[2] == d.tokens[1])
	}

	// A resource that refuses every token: one retry, then its 401 is
	// passed on and neither token stays cached.
	d.mu.Lock()
	d.refuseAll = true
	d.mu.Unlock()
	if got := post(strings.NewReader(`{"n":3}`)); got != http.StatusUnauthorized {
		t.Fatalf("status %d, want the second 401", got)
	}
	if len(d.tokens) != 5 || ks.tokenHits.Load() != 3 {
		t.Fatalf("downstream saw %d requests, token endpoint %d calls; want 5 and 3", len(d.tokens), ks.tokenHits.Load())
	}
	// A body that cannot be read twice is sent once; the refused token
	// is still dropped, so the next call exchanges anew.
	if got := post(io.NopCloser(strings.NewReader(`{"n":4}`))); got != http.StatusUnauthorized || len(d.tokens) != 6 || ks.tokenHits.Load() != 4 {
		t.Fatalf("one-shot body: status %d, %d requests, %d exchanges; want 401, 6, 4", got, len(d.tokens), ks.tokenHits.Load())
	}
	if got := post(io.NopCloser(strings.NewReader(`{"n":5}`))); got != http.StatusUnauthorized || ks.tokenHits.Load() != 5 {
		t.Fatalf("after a refused one-shot send: %d exchanges, want 5", ks.tokenHits.Load())
	}
}
