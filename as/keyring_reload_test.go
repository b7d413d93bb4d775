package as

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpauth/mcpauth/internal/seal"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// keyringWorld is a keyring on a memory store with a settable clock, and
// the sealer its keys are stored under.
type keyringWorld struct {
	t      *testing.T
	store  *listCountingStore
	sealer *seal.Sealer
	now    time.Time
	kr     *keyring
	logs   *logCapture
}

// listCountingStore counts ListKeys calls (keyring reloads).
type listCountingStore struct {
	*memory.Store
	mu    sync.Mutex
	lists int
	fail  error // answered by ListKeys when set
}

func (s *listCountingStore) ListKeys(ctx context.Context) ([]storage.SigningKey, error) {
	s.mu.Lock()
	s.lists++
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	return s.Store.ListKeys(ctx)
}

func (s *listCountingStore) listed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists
}

const testKeyRetention = 20 * time.Minute

func newKeyringWorld(t *testing.T) *keyringWorld {
	t.Helper()
	sealer, err := seal.New([]byte(strings.Repeat("k", 32)), sealPurposeKeys)
	if err != nil {
		t.Fatal(err)
	}
	w := &keyringWorld{t: t, store: &listCountingStore{Store: memory.New()}, sealer: sealer, now: time.Unix(1_800_000_000, 0), logs: &logCapture{}}
	w.kr = &keyring{store: w.store, sealer: sealer, alg: "ES256", retention: testKeyRetention,
		now: func() time.Time { return w.now }, log: logger{slog.New(slog.NewJSONHandler(w.logs, nil))}}
	return w
}

// add stores a new ES256 key created at created and, unless retired is
// zero, retired then; sealer nil means the world's.
func (w *keyringWorld) add(created, retired time.Time, sealer *seal.Sealer) string {
	w.t.Helper()
	if sealer == nil {
		sealer = w.sealer
	}
	k, err := newSigningKey("ES256")
	if err != nil {
		w.t.Fatal(err)
	}
	rec, err := k.record(sealer, created)
	if err != nil {
		w.t.Fatal(err)
	}
	rec.RetiredAt = retired
	if err := w.store.CreateKey(context.Background(), rec); err != nil {
		w.t.Fatal(err)
	}
	return k.kid
}

func (w *keyringWorld) reload() {
	w.t.Helper()
	if err := w.kr.reload(context.Background()); err != nil {
		w.t.Fatal(err)
	}
}

// state is the signing kid, the kids of the JWKS and the stored kids.
func (w *keyringWorld) state() (signing string, published, stored []string) {
	w.t.Helper()
	if k, err := w.kr.signingKey(); err == nil {
		signing = k.kid
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(w.kr.jwksDoc(), &set); err != nil {
		w.t.Fatal(err)
	}
	for _, k := range set.Keys {
		published = append(published, k.KeyID)
	}
	recs, err := w.store.Store.ListKeys(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	for _, r := range recs {
		stored = append(stored, r.ID)
	}
	slices.Sort(published)
	slices.Sort(stored)
	return signing, published, stored
}

func sorted(s ...string) []string { slices.Sort(s); return s }

// TestKeyringReload pins which stored keys reload keeps, publishes and
// signs with.
func TestKeyringReload(t *testing.T) {
	t.Run("a key retired exactly the retention ago stays; one nanosecond later it is deleted", func(t *testing.T) {
		w := newKeyringWorld(t)
		old := w.add(w.now.Add(-2*time.Hour), w.now.Add(-testKeyRetention), nil)
		cur := w.add(w.now.Add(-time.Hour), time.Time{}, nil)
		w.reload()
		if signing, published, stored := w.state(); signing != cur || !slices.Equal(published, sorted(old, cur)) || !slices.Equal(stored, sorted(old, cur)) {
			t.Fatalf("at the retention: signing %s, published %q, stored %q; want %s signing and both kept", signing, published, stored, cur)
		}
		w.now = w.now.Add(time.Nanosecond)
		w.reload()
		if signing, published, stored := w.state(); signing != cur || !slices.Equal(published, []string{cur}) || !slices.Equal(stored, []string{cur}) {
			t.Fatalf("after the retention: signing %s, published %q, stored %q; want only %s", signing, published, stored, cur)
		}
		if strings.Contains(w.logs.String(), "deleting retired signing key") {
			t.Fatalf("a successful deletion logged an error:\n%s", w.logs)
		}
	})
	t.Run("the newest key is kept and signs when every key is retired long ago", func(t *testing.T) {
		w := newKeyringWorld(t)
		older := w.add(w.now.Add(-3*time.Hour), w.now.Add(-2*time.Hour), nil)
		newest := w.add(w.now.Add(-2*time.Hour), w.now.Add(-2*time.Hour), nil)
		w.reload()
		if signing, published, stored := w.state(); signing != newest || !slices.Equal(published, []string{newest}) || !slices.Equal(stored, []string{newest}) {
			t.Fatalf("signing %s, published %q, stored %q; want only the newest %s (the older %s deleted)", signing, published, stored, newest, older)
		}
	})
	t.Run("of retired keys within the retention the newest signs", func(t *testing.T) {
		w := newKeyringWorld(t)
		a := w.add(w.now.Add(-3*time.Minute), w.now.Add(-time.Minute), nil)
		b := w.add(w.now.Add(-2*time.Minute), w.now.Add(-time.Minute), nil)
		w.reload()
		if signing, published, _ := w.state(); signing != b || !slices.Equal(published, sorted(a, b)) {
			t.Fatalf("signing %s, published %q; want %s signing, both published", signing, published, b)
		}
	})
	t.Run("an unretired key signs even when a retired key is newer", func(t *testing.T) {
		w := newKeyringWorld(t)
		unretired := w.add(w.now.Add(-2*time.Minute), time.Time{}, nil)
		retired := w.add(w.now.Add(-time.Minute), w.now.Add(-30*time.Second), nil)
		w.reload()
		if signing, published, _ := w.state(); signing != unretired || !slices.Equal(published, sorted(unretired, retired)) {
			t.Fatalf("signing %s, published %q; want %s signing, both published", signing, published, unretired)
		}
	})
	t.Run("of two unretired keys the newer signs", func(t *testing.T) {
		w := newKeyringWorld(t)
		older := w.add(w.now.Add(-2*time.Minute), time.Time{}, nil)
		newer := w.add(w.now.Add(-time.Minute), time.Time{}, nil)
		w.reload()
		if signing, published, _ := w.state(); signing != newer || !slices.Equal(published, sorted(older, newer)) {
			t.Fatalf("signing %s, published %q; want %s signing, both published", signing, published, newer)
		}
	})
	t.Run("a deleted key does not stop the keys listed after it from loading", func(t *testing.T) {
		w := newKeyringWorld(t)
		// Listed newest first: the newest (retired), the pruned one, then
		// the only unretired key.
		unretired := w.add(w.now.Add(-4*time.Hour), time.Time{}, nil)
		w.add(w.now.Add(-3*time.Hour), w.now.Add(-3*time.Hour), nil)
		newest := w.add(w.now.Add(-time.Minute), w.now.Add(-30*time.Second), nil)
		w.reload()
		if signing, published, _ := w.state(); signing != unretired || !slices.Equal(published, sorted(unretired, newest)) {
			t.Fatalf("signing %s, published %q; want %s signing, it and %s published", signing, published, unretired, newest)
		}
	})
	t.Run("a key that does not unseal does not stop the keys listed after it from loading", func(t *testing.T) {
		w := newKeyringWorld(t)
		other, err := seal.New([]byte(strings.Repeat("o", 32)), sealPurposeKeys)
		if err != nil {
			t.Fatal(err)
		}
		good := w.add(w.now.Add(-2*time.Minute), time.Time{}, nil)
		bad := w.add(w.now.Add(-time.Minute), time.Time{}, other)
		w.reload()
		if signing, published, _ := w.state(); signing != good || !slices.Equal(published, []string{good}) {
			t.Fatalf("signing %s, published %q; want %s", signing, published, good)
		}
		if w.kr.unloadable == nil || w.kr.unloadable[0] != bad {
			t.Fatalf("unloadable = %q, want [%s]", w.kr.unloadable, bad)
		}
	})
}

// TestKeyringLookupReloadsAtMostOncePerSecond: a kid the keyring does not
// know makes it reload, so a key rotated by another instance is found, but
// at most once a second, so tokens naming random kids cannot make every
// request read the key table.
func TestKeyringLookupReloadsAtMostOncePerSecond(t *testing.T) {
	w := newKeyringWorld(t)
	first := w.add(w.now.Add(-time.Hour), time.Time{}, nil)
	w.reload()
	ctx := context.Background()
	lists := func() int { return w.store.listed() }

	base := lists()
	if k := w.kr.lookup(ctx, first); k == nil || k.kid != first {
		t.Fatalf("lookup of the loaded key: %v", k)
	}
	w.now = w.now.Add(time.Hour)
	if k := w.kr.lookup(ctx, first); k == nil || lists() != base {
		t.Fatalf("lookup of a known key reloaded (%d reloads) or failed (%v)", lists()-base, k)
	}

	// Another instance rotates; this one last reloaded an hour ago.
	second := w.add(w.now, time.Time{}, nil)
	w.reload()
	base = lists()
	w.now = w.now.Add(time.Second - time.Nanosecond)
	if k := w.kr.lookup(ctx, "unknown-kid"); k != nil || lists() != base {
		t.Fatalf("unknown kid within a second of a reload: key %v, %d reloads; want nil and none", k, lists()-base)
	}
	w.now = w.now.Add(time.Nanosecond)
	if k := w.kr.lookup(ctx, "unknown-kid"); k != nil || lists() != base+1 {
		t.Fatalf("unknown kid a second after a reload: key %v, %d reloads; want nil and one", k, lists()-base)
	}
	if k := w.kr.lookup(ctx, "unknown-kid"); k != nil || lists() != base+1 {
		t.Fatalf("unknown kid right after that reload: key %v, %d reloads; want nil and still one", k, lists()-base)
	}

	// A key added since the last reload is found by the next lookup a
	// second later.
	third := w.add(w.now, time.Time{}, nil)
	w.now = w.now.Add(time.Second)
	if k := w.kr.lookup(ctx, third); k == nil || k.kid != third {
		t.Fatalf("lookup of a key added by another instance: %v, want %s (second key %s)", k, third, second)
	}
}

// TestKeyringEnsureAddsAKeyOnlyForAnotherAlgorithm: at start a keyring
// keeps signing with the stored key of its algorithm, and adds (and signs
// with) a new key when the configured algorithm changed.
func TestKeyringEnsureAddsAKeyOnlyForAnotherAlgorithm(t *testing.T) {
	w := newKeyringWorld(t)
	ctx := context.Background()
	if err := w.kr.ensure(ctx); err != nil {
		t.Fatal(err)
	}
	first, _, stored := w.state()
	if first == "" || len(stored) != 1 {
		t.Fatalf("first start: signing %q, stored %q; want one new key", first, stored)
	}
	w.now = w.now.Add(time.Hour)
	if err := w.kr.ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if signing, _, stored := w.state(); signing != first || len(stored) != 1 {
		t.Fatalf("a restart with the same algorithm: signing %q, stored %q; want %s alone", signing, stored, first)
	}
	w.kr.alg = "EdDSA"
	if err := w.kr.ensure(ctx); err != nil {
		t.Fatal(err)
	}
	k, err := w.kr.signingKey()
	if err != nil || k.alg != "EdDSA" || k.kid == first {
		t.Fatalf("a restart with EdDSA configured: %+v, %v; want a new EdDSA key", k, err)
	}
}

// TestKeyringRunLogsOnlyFailedReloads: the periodic reload logs an error
// when reading the keys fails, and nothing when it succeeds.
func TestKeyringRunLogsOnlyFailedReloads(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fail    error
		wantLog bool
	}{
		{"successful reloads", nil, false},
		{"failed reloads", errors.New("connection refused"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newKeyringWorld(t)
			w.add(w.now.Add(-time.Hour), time.Time{}, nil)
			w.store.mu.Lock()
			w.store.fail = tc.fail
			w.store.mu.Unlock()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { w.kr.run(ctx, time.Millisecond); close(done) }()
			// Wait for three reloads (they end when ListKeys returns; the
			// third starts only after the first has been handled).
			deadline := time.Now().Add(time.Minute)
			for w.store.listed() < 3 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			cancel()
			<-done
			if w.store.listed() < 3 {
				t.Fatal("run did not reload")
			}
			if logged := strings.Contains(w.logs.String(), "reloading signing keys"); logged != tc.wantLog {
				t.Fatalf("\"reloading signing keys\" logged = %v, want %v; log:\n%s", logged, tc.wantLog, w.logs)
			}
		})
	}
}
