package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/sqlite"
)

func ExampleOpen() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "authserver")
	defer os.RemoveAll(dir)

	s, err := sqlite.Open(ctx, filepath.Join(dir, "authserver.db"))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	applied, err := s.Migrate(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("applied", applied)

	// Redeem an authorization code inside a transaction, as the token
	// endpoint does: the second redemption finds it inactive.
	code := &storage.Token{Kind: storage.KindAuthorizeCode, Signature: "sig", RequestID: "req", Active: true, ExpiresAt: time.Now().Add(time.Minute)}
	if err := s.CreateToken(ctx, code); err != nil {
		panic(err)
	}
	for range 2 {
		txCtx, err := s.BeginTX(ctx)
		if err != nil {
			panic(err)
		}
		if err := s.DeactivateToken(txCtx, storage.KindAuthorizeCode, "sig"); err != nil {
			fmt.Println(err)
			s.Rollback(txCtx)
			continue
		}
		fmt.Println("redeemed")
		s.Commit(txCtx)
	}
	// Output:
	// applied [1 2 3 4 5 7]
	// redeemed
	// storage: inactive
}
