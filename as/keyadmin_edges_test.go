package as

import (
	"context"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// keyRecords makes n loadable key records (sealed with rightSecret), the
// i-th created i hours after a fixed time, none retired.
func keyRecords(t *testing.T, n int) []storage.SigningKey {
	t.Helper()
	ctx := context.Background()
	src := memory.New()
	for range n {
		if _, err := RotateKey(ctx, src, rightSecret, "ES256"); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := src.ListKeys(ctx)
	if err != nil || len(recs) != n {
		t.Fatalf("ListKeys = %d, %v", len(recs), err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range recs {
		recs[i].CreatedAt, recs[i].RetiredAt = base.Add(time.Duration(i)*time.Hour), time.Time{}
	}
	return recs
}

func storeOf(t *testing.T, recs ...storage.SigningKey) *memory.Store {
	t.Helper()
	s := memory.New()
	for i := range recs {
		if err := s.CreateKey(context.Background(), &recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func signingOf(t *testing.T, s storage.KeyStore) string {
	t.Helper()
	keys, err := ListKeys(context.Background(), s, rightSecret)
	if err != nil {
		t.Fatal(err)
	}
	signing := ""
	for _, k := range keys {
		if k.Signing {
			if signing != "" {
				t.Fatalf("two signing keys: %+v", keys)
			}
			signing = k.ID
		}
	}
	return signing
}

// TestListKeysSigningIsTheNewestUsable: the signing key is the newest
// loadable key not retired, whatever the order of the others.
func TestListKeysSigningIsTheNewestUsable(t *testing.T) {
	r := keyRecords(t, 2) // r[1] is the newer
	if got := signingOf(t, storeOf(t, r[0], r[1])); got != r[1].ID {
		t.Errorf("two keys: signing %q, want the newer %q", got, r[1].ID)
	}
	retired := r[1]
	retired.RetiredAt = retired.CreatedAt.Add(time.Minute)
	if got := signingOf(t, storeOf(t, r[0], retired)); got != r[0].ID {
		t.Errorf("the newer retired: signing %q, want the older %q", got, r[0].ID)
	}
}

// TestRetireKeyOfARetiredOrNonSigningKey: retiring a retired key changes
// no other key; retiring a key that does not sign retires the others but
// the signing one and writes no new key.
func TestRetireKeyOfARetiredOrNonSigningKey(t *testing.T) {
	ctx := context.Background()
	r := keyRecords(t, 3) // r[2] signs
	old := r[0]
	old.RetiredAt = old.CreatedAt.Add(time.Minute)
	s := storeOf(t, old, r[1], r[2])
	got, err := RetireKey(ctx, s, rightSecret, old.ID, "ES256")
	if err != nil || got != r[2].ID {
		t.Fatalf("RetireKey(retired) = %q, %v; want %q", got, err, r[2].ID)
	}
	keys, _ := ListKeys(ctx, s, rightSecret)
	for _, k := range keys {
		if k.ID == r[1].ID && k.RetiredAt != nil {
			t.Errorf("retiring a retired key retired %s too", k.ID)
		}
	}
	got, err = RetireKey(ctx, s, rightSecret, r[1].ID, "ES256")
	if err != nil || got != r[2].ID {
		t.Fatalf("RetireKey(not signing) = %q, %v; want %q", got, err, r[2].ID)
	}
	keys, _ = ListKeys(ctx, s, rightSecret)
	if len(keys) != 3 {
		t.Errorf("RetireKey(not signing) left %d keys, want 3 (no new key)", len(keys))
	}
	for _, k := range keys {
		if k.ID == r[1].ID && k.RetiredAt == nil {
			t.Errorf("%s not retired", k.ID)
		}
	}
}

// TestPruneKeysRefusesOnlyWhenAskedToDeleteUnloadable: a secret that opens
// no key is refused only when unloadable keys are to be deleted, and an
// empty store has nothing to refuse.
func TestPruneKeysRefusesOnlyWhenAskedToDeleteUnloadable(t *testing.T) {
	ctx := context.Background()
	s := storeOf(t, keyRecords(t, 1)...)
	if deleted, err := PruneKeys(ctx, s, wrongSecret, time.Hour, false); err != nil || len(deleted) != 0 {
		t.Errorf("PruneKeys(wrong secret, keep unloadable) = %v, %v; want nothing, no error", deleted, err)
	}
	if deleted, err := PruneKeys(ctx, memory.New(), rightSecret, time.Hour, true); err != nil || len(deleted) != 0 {
		t.Errorf("PruneKeys(empty store) = %v, %v; want nothing, no error", deleted, err)
	}
}

// TestKeyRetention: the access-token lifetime plus two reloads and a
// minute, zero and negative values taking the defaults.
func TestKeyRetention(t *testing.T) {
	for _, tc := range []struct{ ttl, reload, want time.Duration }{
		{5 * time.Minute, 10 * time.Second, 5*time.Minute + 20*time.Second + time.Minute},
		{0, 10 * time.Second, DefaultAccessTokenTTL + 20*time.Second + time.Minute},
		{5 * time.Minute, 0, 5*time.Minute + 30*time.Second + time.Minute},
		{5 * time.Minute, -time.Second, 5*time.Minute + 30*time.Second + time.Minute},
	} {
		if got := KeyRetention(tc.ttl, tc.reload); got != tc.want {
			t.Errorf("KeyRetention(%v, %v) = %v, want %v", tc.ttl, tc.reload, got, tc.want)
		}
	}
}

// TestRotateKeyWithANewerUnloadableKey: the secret opens the keys when it
// opens any of them, also when a newer one was sealed under another
// secret. Fails if the first key that does not unseal ends the check.
func TestRotateKeyWithANewerUnloadableKey(t *testing.T) {
	ctx := context.Background()
	good := keyRecords(t, 1)[0]
	src := memory.New()
	if _, err := RotateKey(ctx, src, wrongSecret, "ES256"); err != nil {
		t.Fatal(err)
	}
	recs, err := src.ListKeys(ctx)
	if err != nil || len(recs) != 1 {
		t.Fatalf("ListKeys = %d, %v", len(recs), err)
	}
	bad := recs[0]
	bad.CreatedAt, bad.RetiredAt = good.CreatedAt.Add(time.Hour), time.Time{}
	s := storeOf(t, good, bad)
	if _, err := RotateKey(ctx, s, rightSecret, "ES256"); err != nil {
		t.Errorf("RotateKey with a newer key of another secret: %v", err)
	}
}
