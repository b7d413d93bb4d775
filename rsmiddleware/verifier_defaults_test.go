package rsmiddleware

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestVerifierStatusDefaults: without StatusMaxAge and StatusFailAfter a
// list is fetched once for many tokens, and while the AS is down it still
// decides a minute later (the defaults are 30 s and 10 min).
func TestVerifierStatusDefaults(t *testing.T) {
	ks := newKeyServer(t)
	clk := &testClock{t: time.Now()}
	v := ks.verifier(t, func(c *Config) { c.Now, c.CacheSize = clk.Now, -1 })
	tok := ks.statusToken(1)
	for range 2 {
		if _, err := v.Verify(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
		// Past the retry back-off of a failed fetch, within 30 s.
		clk.Advance(statusRetry + time.Second)
	}
	if got := ks.statusHits.Load(); got != 1 {
		t.Fatalf("%d list fetches for two tokens within 30 s; want 1", got)
	}
	ks.down.Store(true)
	clk.Advance(time.Minute)
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("AS down for a minute: %v", err)
	}
}

// TestVerifierKeyRefreshInterval: with keys loaded, an unknown kid makes
// the Verifier fetch the key set again only RefreshInterval after its last
// try, and then at once (not one second later).
func TestVerifierKeyRefreshInterval(t *testing.T) {
	ks := newKeyServer(t)
	clk := &testClock{t: time.Now()}
	v := ks.verifier(t, func(c *Config) { c.Now, c.CacheSize, c.RefreshInterval = clk.Now, -1, time.Minute })
	if _, err := v.Verify(context.Background(), ks.mint(ks.claims())); err != nil {
		t.Fatal(err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ks.mu.Lock()
	ks.keys["new"] = other
	ks.mu.Unlock()
	hits := ks.jwksHits.Load()
	clk.Advance(2 * time.Second)
	if _, err := v.Verify(context.Background(), ks.mintWith("new", "at+jwt", ks.claims())); err == nil || ks.jwksHits.Load() != hits {
		t.Fatalf("2 s after the last fetch: %v, %d fetches; want refused without a fetch", err, ks.jwksHits.Load()-hits)
	}
	clk.Advance(time.Minute - 2*time.Second)
	if _, err := v.Verify(context.Background(), ks.mintWith("new", "at+jwt", ks.claims())); err != nil {
		t.Fatalf("exactly RefreshInterval after the last fetch: %v", err)
	}
}

// TestVerifierLogsToItsLogger: a failed key refresh is logged to the
// configured Logger.
func TestVerifierLogsToItsLogger(t *testing.T) {
	ks := newKeyServer(t)
	var logs lockedBuffer
	v := ks.verifier(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	ks.down.Store(true)
	_, _ = v.Verify(context.Background(), ks.mint(ks.claims()))
	if !strings.Contains(logs.String(), "JWKS refresh failed") {
		t.Fatalf("log %q; want the failed refresh", logs.String())
	}
}
