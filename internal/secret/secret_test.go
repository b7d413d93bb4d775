package secret

import (
	"bytes"
	"encoding/base64"
	"fmt"
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
	for b.Loop() {
		h.Equal(hash, s)
	}
}
