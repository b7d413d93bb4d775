package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
)

func pgToken(kind storage.TokenKind, sig string) *storage.Token {
	now := time.Now().UTC().Truncate(time.Microsecond)
	return &storage.Token{Kind: kind, Signature: sig, RequestID: "r-" + sig, ClientID: "c", Active: true,
		CreatedAt: now, ExpiresAt: now.Add(time.Hour), Data: []byte("sealed")}
}

// Token inserts inside a transaction travel with the next statement or
// with COMMIT (tx.go). An insert that fails there fails the call that sent
// it, the transaction writes nothing, and the connection goes back to the
// pool usable; a COMMIT after a failed statement is an error, not a
// silent rollback.
func TestPipelinedTransactionFailuresWriteNothing(t *testing.T) {
	pgtest.BaseDSN(t)
	s := openMigrated(t, mustSchema(t), 1) // one connection: it must survive every case
	ctx := context.Background()
	if err := s.CreateToken(ctx, pgToken(storage.KindAccessToken, "taken")); err != nil {
		t.Fatal(err)
	}
	absent := func(sig string) {
		t.Helper()
		if _, err := s.GetToken(ctx, storage.KindAccessToken, sig); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("%s after the failed transaction: %v, want ErrNotFound", sig, err)
		}
	}

	// A duplicate queued behind a good insert fails at COMMIT.
	tx, err := s.BeginTX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateToken(tx, pgToken(storage.KindAccessToken, "fresh-1")); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateToken(tx, pgToken(storage.KindAccessToken, "taken")); err != nil {
		t.Fatalf("queued insert: %v", err)
	}
	if err := s.Commit(tx); !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("Commit with a duplicate queued: %v, want ErrAlreadyExists", err)
	}
	absent("fresh-1")

	// A duplicate queued before a statement fails that statement; COMMIT
	// afterwards is refused.
	tx, err = s.BeginTX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.CreateToken(tx, pgToken(storage.KindAccessToken, "fresh-2"))
	s.CreateToken(tx, pgToken(storage.KindAccessToken, "taken"))
	if _, err := s.GetToken(tx, storage.KindAccessToken, "fresh-2"); !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("statement after a queued duplicate: %v, want ErrAlreadyExists", err)
	}
	if err := s.Commit(tx); err == nil {
		t.Fatal("Commit after a failed statement returned nil")
	}
	absent("fresh-2")

	// The transaction reads its own queued writes, and a rollback drops
	// them unsent.
	tx, err = s.BeginTX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.CreateToken(tx, pgToken(storage.KindAccessToken, "fresh-3"))
	if got, err := s.GetToken(tx, storage.KindAccessToken, "fresh-3"); err != nil || !got.Active {
		t.Fatalf("own queued write: %+v, %v", got, err)
	}
	s.CreateToken(tx, pgToken(storage.KindAccessToken, "fresh-4"))
	if err := s.Rollback(tx); err != nil {
		t.Fatal(err)
	}
	absent("fresh-3")
	absent("fresh-4")

	// The one connection is still usable, inside and outside transactions.
	tx, err = s.BeginTX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeactivateToken(tx, storage.KindAccessToken, "taken"); err != nil {
		t.Fatal(err)
	}
	s.CreateToken(tx, pgToken(storage.KindAccessToken, "fresh-5"))
	if err := s.Commit(tx); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetToken(ctx, storage.KindAccessToken, "fresh-5"); err != nil || !got.Active {
		t.Fatalf("committed token: %+v, %v", got, err)
	}
	if got, err := s.GetToken(ctx, storage.KindAccessToken, "taken"); err != nil || got.Active {
		t.Fatalf("deactivated in the committed transaction: %+v, %v", got, err)
	}
}

func mustSchema(t *testing.T) string {
	dsn, _ := pgtest.Schema(t)
	return dsn
}
