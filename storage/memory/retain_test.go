package memory_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// A token's signature is usually the last segment of the whole token
// string; the stored record must hold a copy of it, not a slice that keeps
// the whole token (and the buffer it was built in) alive for the token's
// lifetime.
func TestCreateTokenKeepsACopyOfTheSignature(t *testing.T) {
	s := memory.New()
	defer s.Close()
	whole := strings.Repeat("h", 400) + "." + strings.Repeat("p", 400) + ".signature-segment"
	sig := whole[strings.LastIndexByte(whole, '.')+1:]
	now := time.Now()
	ctx := context.Background()
	if err := s.CreateToken(ctx, &storage.Token{Kind: storage.KindAccessToken, Signature: sig, RequestID: "r",
		Active: true, CreatedAt: now, ExpiresAt: now.Add(time.Hour), Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetToken(ctx, storage.KindAccessToken, sig)
	if err != nil {
		t.Fatal(err)
	}
	if got.Signature != sig {
		t.Fatalf("signature %q, want %q", got.Signature, sig)
	}
	start := uintptr(unsafe.Pointer(unsafe.StringData(whole)))
	p := uintptr(unsafe.Pointer(unsafe.StringData(got.Signature)))
	if p >= start && p < start+uintptr(len(whole)) {
		t.Fatal("the stored signature points into the caller's token string")
	}
}
