package as

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

var (
	rightSecret = []byte("0123456789abcdef0123456789abcdef-right")
	wrongSecret = []byte("0123456789abcdef0123456789abcdef-wrong")
)

func minimalConfig(store storage.Store, secret []byte) Config {
	return Config{
		Issuer:    "http://127.0.0.1:1",
		Resources: []Resource{{URI: mcpURI, Scopes: []string{"mcp:tools"}}},
		Store:     store,
		Secret:    secret,
	}
}

func keyIDs(t *testing.T, store storage.KeyStore) []string {
	t.Helper()
	recs, err := store.ListKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	return ids
}

// A server started with another secret than the one that sealed the stored
// keys refuses to start, says why, and writes no key.
func TestNewRefusesWhenNoStoredKeyUnseals(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := memory.New()
	if _, err := New(ctx, minimalConfig(store, rightSecret)); err != nil {
		t.Fatal(err)
	}
	before := keyIDs(t, store)
	if len(before) != 1 {
		t.Fatalf("first start stored %d keys", len(before))
	}
	_, err := New(ctx, minimalConfig(store, wrongSecret))
	if !errors.Is(err, ErrUnsealableKeys) {
		t.Fatalf("New with the wrong secret: %v, want ErrUnsealableKeys", err)
	}
	if !strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), before[0]) {
		t.Errorf("message does not name the secret and the key: %v", err)
	}
	if after := keyIDs(t, store); len(after) != 1 || after[0] != before[0] {
		t.Fatalf("keys after the refused start: %v, want %v", after, before)
	}
	if _, err := RotateKey(ctx, store, wrongSecret, "ES256"); !errors.Is(err, ErrUnsealableKeys) {
		t.Fatalf("RotateKey with the wrong secret: %v", err)
	}
	if after := keyIDs(t, store); len(after) != 1 {
		t.Fatalf("RotateKey with the wrong secret wrote a key: %v", after)
	}
	// The right secret still starts, and Ready says so.
	s, err := New(ctx, minimalConfig(store, rightSecret))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
}

// ListKeys, RetireKey and PruneKeys, the operations behind `authserver keys`.
func TestKeyAdministration(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	first, err := RotateKey(ctx, store, rightSecret, "ES256")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ListKeys(ctx, store, rightSecret)
	if err != nil || len(keys) != 1 || !keys[0].Signing || !keys[0].Loadable || keys[0].ID != first || keys[0].Algorithm != "ES256" {
		t.Fatalf("ListKeys = %+v, %v", keys, err)
	}

	// Retiring the signing key puts a new one in its place.
	second, err := RetireKey(ctx, store, rightSecret, first, "EdDSA")
	if err != nil || second == first {
		t.Fatalf("RetireKey(signing) = %q, %v", second, err)
	}
	keys, _ = ListKeys(ctx, store, rightSecret)
	byID := map[string]KeyInfo{}
	for _, k := range keys {
		byID[k.ID] = k
	}
	if byID[first].RetiredAt == nil || byID[first].Signing || !byID[second].Signing || byID[second].Algorithm != "EdDSA" {
		t.Fatalf("after retire: %+v", keys)
	}
	retiredAt := *byID[first].RetiredAt
	if got, err := RetireKey(ctx, store, rightSecret, first, "ES256"); err != nil || got != second {
		t.Fatalf("retiring a retired key again = %q, %v", got, err)
	}
	keys, _ = ListKeys(ctx, store, rightSecret)
	for _, k := range keys {
		if k.ID == first && (k.RetiredAt == nil || !k.RetiredAt.Equal(retiredAt)) {
			t.Fatalf("retiring a retired key again moved its retirement from %v to %v", retiredAt, k.RetiredAt)
		}
	}
	// With a secret that opens no key, nothing is retired or written.
	if _, err := RetireKey(ctx, store, wrongSecret, second, "ES256"); !errors.Is(err, ErrUnsealableKeys) {
		t.Fatalf("RetireKey with a secret that opens nothing: %v", err)
	}
	if ids := keyIDs(t, store); len(ids) != 2 {
		t.Fatalf("keys after a refused RetireKey: %v", ids)
	}
	if _, err := RetireKey(ctx, store, rightSecret, "no-such-kid", "ES256"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("RetireKey(unknown) = %v", err)
	}

	// A key sealed under another secret (an instance started wrongly,
	// before this check existed) is listed as not loadable.
	sealer, err := newKeySealer(wrongSecret)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := newSigningKey("ES256")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := foreign.record(sealer, time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CreateKey(ctx, rec); err != nil {
		t.Fatal(err)
	}
	keys, _ = ListKeys(ctx, store, rightSecret)
	for _, k := range keys {
		if k.ID == foreign.kid && (k.Loadable || k.Signing) {
			t.Fatalf("foreign key listed as %+v", k)
		}
		if k.ID == second && !k.Signing {
			t.Fatalf("the foreign key displaced the signing key: %+v", keys)
		}
	}

	// Pruned with the wrong secret, nothing goes: every good key would.
	if _, err := PruneKeys(ctx, store, []byte("0123456789abcdef0123456789abcdef-third"), time.Hour, true); !errors.Is(err, ErrUnsealableKeys) {
		t.Fatalf("PruneKeys with a secret that opens nothing: %v", err)
	}
	// Without --unloadable, only keys retired longer than the retention go.
	deleted, err := PruneKeys(ctx, store, rightSecret, time.Hour, false)
	if err != nil || len(deleted) != 0 {
		t.Fatalf("PruneKeys(retention 1h) deleted %v, %v", deleted, err)
	}
	deleted, err = PruneKeys(ctx, store, rightSecret, time.Hour, true)
	if err != nil || len(deleted) != 1 || deleted[0] != foreign.kid {
		t.Fatalf("PruneKeys(unloadable) deleted %v, %v; want the foreign key", deleted, err)
	}
	deleted, err = PruneKeys(ctx, store, rightSecret, -time.Second, false)
	if err != nil || len(deleted) != 1 || deleted[0] != first {
		t.Fatalf("PruneKeys(retention passed) deleted %v, %v; want the retired key", deleted, err)
	}
	if ids := keyIDs(t, store); len(ids) != 1 || ids[0] != second {
		t.Fatalf("keys left: %v, want only %s", ids, second)
	}
	// The newest loadable key is never pruned, retired or not.
	if err := store.RetireKeys(ctx, "", time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	deleted, err = PruneKeys(ctx, store, rightSecret, time.Second, false)
	if err != nil || len(deleted) != 0 {
		t.Fatalf("PruneKeys with every key retired deleted %v, %v; want the newest kept", deleted, err)
	}
}

// A key sealed under another secret, found at every reload, is logged once
// and never signs.
func TestUnloadableKeyIsLoggedOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := memory.New()
	var buf bytes.Buffer
	cfg := minimalConfig(store, rightSecret)
	cfg.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	signing, _ := s.keys.signingKey()
	sealer, _ := newKeySealer(wrongSecret)
	foreign, _ := newSigningKey("ES256")
	rec, _ := foreign.record(sealer, time.Now().Add(time.Second))
	if err := store.CreateKey(ctx, rec); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.keys.reload(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(buf.String(), "signing key does not load"); n != 1 {
		t.Fatalf("logged %d times:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "keys prune --unloadable") || !strings.Contains(buf.String(), foreign.kid) {
		t.Fatalf("the line does not say what to do:\n%s", buf.String())
	}
	if now, _ := s.keys.signingKey(); now.kid != signing.kid {
		t.Fatalf("signs with %s, want %s", now.kid, signing.kid)
	}
}

// Ready names its cause with sentinels the caller matches with errors.Is:
// ErrStorageNotReady (wrapping the storage's own error) once the storage is
// gone, never ErrNoSigningKey.
func TestReadyNamesAStorageOutageWithASentinel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := memory.New()
	s, err := New(ctx, minimalConfig(store, rightSecret))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	store.Close()
	err = s.Ready(ctx)
	if !errors.Is(err, ErrStorageNotReady) || !errors.Is(err, storage.ErrUnavailable) || errors.Is(err, ErrNoSigningKey) {
		t.Fatalf("Ready with the storage closed: %v, want ErrStorageNotReady wrapping storage.ErrUnavailable", err)
	}
}
