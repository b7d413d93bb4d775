package secret

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"sync"
	"testing"
)

func TestHasher(t *testing.T) {
	h, err := NewHasher(bytes.Repeat([]byte{7}, 32), "client")
	if err != nil {
		t.Fatal(err)
	}
	s := Generate()
	hash := h.Hash(s)
	if bytes.Contains(hash, []byte(s)) {
		t.Fatal("hash contains the secret")
	}
	if !h.Equal(hash, s) {
		t.Fatal("Equal rejects the right secret")
	}
	if h.Equal(hash, s+"x") || h.Equal(hash, "") || h.Equal(nil, s) {
		t.Fatal("Equal accepts a wrong secret or an empty hash")
	}
	other, _ := NewHasher(bytes.Repeat([]byte{7}, 32), "registration")
	if other.Equal(hash, s) {
		t.Fatal("hashers of different purposes agree")
	}
}

// TestHasherIsHMACUnderTheDerivedKey checks Hash against HMAC-SHA256 under
// the HKDF-derived key, computed afresh, for values hashed one after the
// other and from many goroutines at once by one Hasher (its HMAC states are
// reused): fails if a reused state keeps bytes of an earlier value.
func TestHasherIsHMACUnderTheDerivedKey(t *testing.T) {
	secret := bytes.Repeat([]byte{9}, 32)
	h, err := NewHasher(secret, "client")
	if err != nil {
		t.Fatal(err)
	}
	key, err := hkdf.Key(sha256.New, secret, nil, "mcpauth secret client", 32)
	if err != nil {
		t.Fatal(err)
	}
	want := func(v string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(v))
		return m.Sum(nil)
	}
	values := []string{"", "a", "a longer value than one SHA-256 block of sixty-four bytes, to be sure", "a", Generate()}
	for _, v := range values {
		if got := h.Hash(v); !bytes.Equal(got, want(v)) {
			t.Fatalf("Hash(%q) = %x, want %x", v, got, want(v))
		}
		if !h.Equal(want(v), v) || h.Equal(want(v), v+"x") {
			t.Fatalf("Equal disagrees with HMAC-SHA256 for %q", v)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				v := fmt.Sprintf("goroutine %d value %d", g, i)
				if !bytes.Equal(h.Hash(v), want(v)) || !h.Equal(want(v), v) {
					errs <- v
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for v := range errs {
		t.Errorf("concurrent Hash or Equal of %q differs from HMAC-SHA256", v)
	}
}

func TestGenerate(t *testing.T) {
	a, b := Generate(), Generate()
	if a == b {
		t.Fatal("two secrets are equal")
	}
	raw, err := base64.RawURLEncoding.DecodeString(a)
	if err != nil || len(raw) != 32 {
		t.Fatalf("secret %q decodes to %d bytes, %v", a, len(raw), err)
	}
}

func TestNewHasherRejectsShortKey(t *testing.T) {
	if _, err := NewHasher([]byte("short"), "x"); err == nil {
		t.Fatal("accepted a short key")
	}
}

func ExampleHasher() {
	h, _ := NewHasher(bytes.Repeat([]byte{1}, 32), "client-secret")
	clientSecret := Generate()
	stored := h.Hash(clientSecret) // keep only this
	fmt.Println(h.Equal(stored, clientSecret), h.Equal(stored, "guess"))
	// Output: true false
}

func BenchmarkEqual(b *testing.B) {
	h, _ := NewHasher(bytes.Repeat([]byte{1}, 32), "bench")
	s := Generate()
	hash := h.Hash(s)
	b.ReportAllocs()
	for b.Loop() {
		h.Equal(hash, s)
	}
}
