package rsmiddleware

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// holdFirstToken is a transport that holds the first token request until a
// second one arrives or a while has passed, so that callers that would each
// exchange are all under way at once.
type holdFirstToken struct {
	base    http.RoundTripper
	once    sync.Once
	release chan struct{}
	mu      sync.Mutex
	seen    int
}

func (h *holdFirstToken) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/token") {
		h.mu.Lock()
		h.seen++
		first := h.seen == 1
		h.mu.Unlock()
		if first {
			select {
			case <-h.release:
			case <-time.After(300 * time.Millisecond):
			}
		} else {
			h.once.Do(func() { close(h.release) })
		}
	}
	return h.base.RoundTrip(r)
}

// Concurrent cache misses for one subject token and resource share one
// exchange: the token endpoint is asked once and every caller gets the same
// token, through Exchange and through the Transport alike.
func TestExchangerCollapsesConcurrentMisses(t *testing.T) {
	ks := newKeyServer(t)
	hold := &holdFirstToken{base: ks.srv.Client().Transport, release: make(chan struct{})}
	e := newExchanger(t, ks, func(c *ExchangeConfig) { c.HTTPClient = &http.Client{Transport: hold} })
	if _, err := e.endpoint(context.Background()); err != nil { // discovery out of the way
		t.Fatal(err)
	}
	inbound := ks.mint(ks.claims())
	ctx := ContextWithPrincipal(context.Background(), &Principal{Subject: "alice"}, inbound)
	const n = 16
	toks := make([]*ExchangedToken, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { toks[i], errs[i] = e.Token(ctx, downstreamRes) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || toks[i] != toks[0] {
			t.Fatalf("caller %d: %v, token shared %v", i, errs[i], toks[i] == toks[0])
		}
	}
	if got := ks.tokenHits.Load(); got != 1 {
		t.Fatalf("token endpoint asked %d times for %d concurrent misses, want 1", got, n)
	}
}

// A caller waiting for another's exchange is not failed by the other
// caller's context ending: it exchanges on its own.
func TestExchangerWaiterOutlivesACancelledExchange(t *testing.T) {
	ks := newKeyServer(t)
	hold := &holdFirstToken{base: ks.srv.Client().Transport, release: make(chan struct{})}
	e := newExchanger(t, ks, func(c *ExchangeConfig) { c.HTTPClient = &http.Client{Transport: hold} })
	if _, err := e.endpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	inbound := ks.mint(ks.claims())
	first, cancel := context.WithCancel(ContextWithPrincipal(context.Background(), &Principal{Subject: "alice"}, inbound))
	done := make(chan error, 1)
	go func() { _, err := e.Token(first, downstreamRes); done <- err }()
	for inflight(e) == 0 {
		time.Sleep(time.Millisecond)
	}
	second := make(chan error, 1)
	go func() {
		_, err := e.Token(ContextWithPrincipal(context.Background(), &Principal{Subject: "alice"}, inbound), downstreamRes)
		second <- err
	}()
	time.Sleep(20 * time.Millisecond) // the second caller is waiting for the first's exchange
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled exchange succeeded")
	}
	if err := <-second; err != nil {
		t.Fatalf("the waiting caller failed with the other's context: %v", err)
	}
}

func inflight(e *Exchanger) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.inflight)
}
