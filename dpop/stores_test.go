package dpop

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// TestMemoryJTIsKeepsUpToItsSize: every live id up to the size is
// remembered (100000 when the size given is 0 or less), and an expired
// oldest id is dropped when a new one arrives.
func TestMemoryJTIsKeepsUpToItsSize(t *testing.T) {
	ctx := context.Background()
	if got := NewMemoryJTIs(0).size; got != 100000 {
		t.Errorf("NewMemoryJTIs(0) keeps %d ids; want 100000", got)
	}
	for _, size := range []int{0, -1, 3} {
		m := NewMemoryJTIs(size)
		exp := time.Now().Add(time.Hour)
		for _, id := range []string{"a", "b", "c"} {
			if err := m.UseJTI(ctx, id, exp); err != nil {
				t.Fatalf("size %d, %s: %v", size, id, err)
			}
		}
		for _, id := range []string{"a", "b", "c"} {
			if err := m.UseJTI(ctx, id, exp); !errors.Is(err, ErrReplay) {
				t.Errorf("size %d: %s forgotten: %v", size, id, err)
			}
		}
	}

	now := time.Now()
	m := NewMemoryJTIs(10)
	m.now = func() time.Time { return now }
	if err := m.UseJTI(ctx, "old", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if err := m.UseJTI(ctx, "new", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, kept := m.ids["old"]; kept || len(m.ids) != 1 || len(m.order) != 1 {
		t.Errorf("after an expired id and a new one: ids %v, order %v; want only new", m.ids, m.order)
	}
}

// TestNoncesEdges: a nonce is valid from a minute before its issue time
// (clock differences between instances) to exactly ttl after it; a zero
// ttl means DefaultWindow; a value sealed under the key that is not an
// 8-byte time is refused.
func TestNoncesEdges(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	n, err := NewNonces(secret, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	issued := time.Now().Truncate(time.Second)
	nonce := n.Issue(issued)
	for _, tc := range []struct {
		at time.Duration
		ok bool
	}{
		{-time.Minute, true},
		{-time.Minute - time.Second, false},
		{2 * time.Minute, true},
		{2*time.Minute + time.Second, false},
	} {
		if got := n.Valid(nonce, issued.Add(tc.at)); got != tc.ok {
			t.Errorf("issued%+v: valid %v; want %v", tc.at, got, tc.ok)
		}
	}

	d, err := NewNonces(secret, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Valid(d.Issue(issued), issued.Add(DefaultWindow)) || d.Valid(d.Issue(issued), issued.Add(DefaultWindow+time.Second)) {
		t.Error("a zero ttl is not DefaultWindow")
	}

	// Sixteen bytes whose first eight are a fresh time, sealed as Issue
	// seals: only the length tells it from a real nonce.
	var pt [16]byte
	binary.BigEndian.PutUint64(pt[:8], uint64(issued.Unix()))
	iv := make([]byte, n.aead.NonceSize())
	long := base64.RawURLEncoding.EncodeToString(n.aead.Seal(iv, iv, pt[:], []byte("dpop-nonce")))
	if n.Valid(long, issued) {
		t.Error("a sealed 16-byte value accepted as a nonce")
	}
}
