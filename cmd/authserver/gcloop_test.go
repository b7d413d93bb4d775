package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
	"github.com/mcpauth/mcpauth/storage"
)

// Garbage collection is periodic in serve (gc.interval), not only
// the `authserver gc` command. The loop serve starts deletes an expired token
// on its first tick and keeps a live one.
func TestServeCollectsGarbageEveryInterval(t *testing.T) {
	cfg, err := config.Parse([]byte(`
issuer: http://127.0.0.1:9000
storage: memory
resources:
  - uri: http://127.0.0.1:8080/mcp
    scopes: [mcp:tools]
gc:
  interval: 1s
  batch_size: 2
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := build(ctx, cfg, false, log, env{stdin: nil, stdout: io.Discard, stderr: io.Discard, lookup: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.store.Close()
	now := time.Now()
	for sig, exp := range map[string]time.Time{"expired": now.Add(-time.Minute), "live": now.Add(time.Hour)} {
		if err := s.store.CreateToken(ctx, &storage.Token{Kind: storage.KindAccessToken, Signature: sig, RequestID: sig,
			ClientID: "c", Active: true, CreatedAt: now.Add(-time.Hour), ExpiresAt: exp}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() { s.gcLoop(ctx); close(done) }()

	// Wait for the first pass (one interval); the deadline only bounds a
	// broken loop, it measures nothing.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.store.GetToken(ctx, storage.KindAccessToken, "expired")
		if errors.Is(err, storage.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("expired token still stored after 30s with gc.interval 1s (last lookup: %v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := s.store.GetToken(ctx, storage.KindAccessToken, "live"); err != nil {
		t.Errorf("live token: %v", err)
	}
	cancel()
	<-done // the loop ends with its context
}
