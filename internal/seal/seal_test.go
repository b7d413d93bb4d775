package seal

import (
	"bytes"
	"errors"
	"testing"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func TestSealOpen(t *testing.T) {
	s, err := New(key(1), "test")
	if err != nil {
		t.Fatal(err)
	}
	pt := []byte("private key bytes")
	sealed := s.Seal(pt, []byte("kid-1"))
	if bytes.Contains(sealed, pt) {
		t.Fatal("sealed value contains the plaintext")
	}
	got, err := s.Open(sealed, []byte("kid-1"))
	if err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if bytes.Equal(sealed, s.Seal(pt, []byte("kid-1"))) {
		t.Fatal("two seals of one value are equal: nonce reused")
	}
}

func TestOpenRefuses(t *testing.T) {
	s, _ := New(key(1), "test")
	other, _ := New(key(2), "test")
	otherPurpose, _ := New(key(1), "other")
	sealed := s.Seal([]byte("v"), []byte("ad"))
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	cases := []struct {
		name   string
		sealer *Sealer
		value  []byte
		ad     string
	}{
		{"refuses other associated data", s, sealed, "other"},
		{"refuses another key", other, sealed, "ad"},
		{"refuses another purpose", otherPurpose, sealed, "ad"},
		{"refuses a tampered value", s, tampered, "ad"},
		{"refuses a truncated value", s, sealed[:10], "ad"},
		{"refuses empty input", s, nil, "ad"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.sealer.Open(c.value, []byte(c.ad)); !errors.Is(err, ErrOpen) {
				t.Fatalf("err = %v, want ErrOpen", err)
			}
		})
	}
}

func TestNewRejectsShortSecret(t *testing.T) {
	if _, err := New(make([]byte, 31), "x"); err == nil {
		t.Fatal("accepted a 31-byte secret")
	}
}

func FuzzOpen(f *testing.F) {
	s, _ := New(key(3), "fuzz")
	f.Add(s.Seal([]byte("x"), nil))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = s.Open(b, nil) // must not panic
	})
}

func BenchmarkSeal(b *testing.B) {
	s, _ := New(key(1), "bench")
	pt := make([]byte, 512)
	for b.Loop() {
		s.Seal(pt, []byte("sig"))
	}
}
