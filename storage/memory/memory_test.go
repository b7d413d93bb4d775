package memory_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
	"github.com/mcpauth/mcpauth/storage/storagetest"
)

func TestConformance(t *testing.T) {
	storagetest.RunTests(t, func(t *testing.T) storage.Store {
		s := memory.New()
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	s := memory.New()
	s.Close()
	if err := s.Ping(context.Background()); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Ping on closed store = %v, want ErrUnavailable", err)
	}
}

func ExampleNew() {
	ctx := context.Background()
	s := memory.New()
	defer s.Close()

	code := &storage.Token{Kind: storage.KindAuthorizeCode, Signature: "sig", RequestID: "req", Active: true, ExpiresAt: time.Now().Add(time.Minute)}
	if err := s.CreateToken(ctx, code); err != nil {
		panic(err)
	}
	fmt.Println(s.DeactivateToken(ctx, storage.KindAuthorizeCode, "sig"))
	fmt.Println(errors.Is(s.DeactivateToken(ctx, storage.KindAuthorizeCode, "sig"), storage.ErrInactive))
	// Output:
	// <nil>
	// true
}

func BenchmarkStore(b *testing.B) {
	storagetest.RunBenchmarks(b, func(b *testing.B) storage.Store {
		s := memory.New()
		b.Cleanup(func() { s.Close() })
		return s
	})
}
