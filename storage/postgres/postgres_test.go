package postgres_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/postgres"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
	"github.com/mcpauth/mcpauth/storage/storagetest"
)

// newStore opens a migrated store on a fresh schema.
func newStore(t testing.TB) *postgres.Store {
	t.Helper()
	dsn, _ := pgtest.Schema(t)
	return openMigrated(t, dsn, 8)
}

// openMigrated opens a store on dsn, closed when t ends, and migrates it.
func openMigrated(t testing.TB, dsn string, maxConns int32) *postgres.Store {
	t.Helper()
	ctx := context.Background()
	s, err := postgres.Open(ctx, dsn, postgres.Options{MaxConns: maxConns})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	pgtest.BaseDSN(t)
	storagetest.RunTests(t, func(t *testing.T) storage.Store { return newStore(t) })
}

func TestOpenUnreachableDatabaseIsUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := postgres.Open(ctx, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", postgres.Options{})
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Open on a closed port = %v, want ErrUnavailable", err)
	}
}

func TestOpenRejectsAMalformedDSN(t *testing.T) {
	_, err := postgres.Open(context.Background(), "postgres://%zz", postgres.Options{})
	if err == nil || errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Open with a malformed DSN = %v, want a configuration error", err)
	}
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	s := newStore(t)
	s.Close()
	ctx := context.Background()
	if _, err := s.GetClient(ctx, "x"); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("GetClient on a closed store = %v, want ErrUnavailable", err)
	}
	if err := s.Ping(ctx); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Ping on a closed store = %v, want ErrUnavailable", err)
	}
}

// When the server drops every connection (as on a restart), calls fail with
// ErrUnavailable, never a raw driver error, and the pool recovers by itself.
func TestTerminatedConnectionsAreUnavailableThenRecover(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	tok := &storage.Token{Kind: storage.KindAccessToken, Signature: "sig", RequestID: "r", Active: true, ExpiresAt: time.Now().Add(time.Hour)}
	if err := s.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	// Warm several pool connections, then kill them from another session.
	for range 4 {
		if _, err := s.GetToken(ctx, storage.KindAccessToken, "sig"); err != nil {
			t.Fatal(err)
		}
	}
	conns := s.Pool().AcquireAllIdle(ctx)
	var pids []uint32
	for _, c := range conns {
		pids = append(pids, c.Conn().PgConn().PID())
		c.Release()
	}
	if len(pids) == 0 {
		t.Fatal("no idle connections to terminate")
	}
	admin := newStore(t)
	var killed int
	if err := admin.Pool().QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE pid = ANY($1)) k`, pids).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != len(pids) {
		t.Fatalf("terminated %d of %d connections", killed, len(pids))
	}
	sawUnavailable, recovered := false, false
	for range 20 {
		_, err := s.GetToken(ctx, storage.KindAccessToken, "sig")
		if err == nil {
			recovered = true
			break
		}
		if !errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("GetToken on a dropped connection = %v, want ErrUnavailable", err)
		}
		sawUnavailable = true
	}
	if !recovered {
		t.Fatal("the store did not recover after its connections were terminated")
	}
	t.Logf("saw ErrUnavailable before recovery: %v", sawUnavailable)
}

func BenchmarkStore(b *testing.B) {
	pgtest.BaseDSN(b)
	storagetest.RunBenchmarks(b, func(b *testing.B) storage.Store {
		dsn, _ := pgtest.Schema(b)
		return openMigrated(b, dsn, 32)
	})
}

// Three pools on one schema stand for three authserver instances.
func TestInstancesSharingOneDatabase(t *testing.T) {
	t.Parallel()
	dsn, _ := pgtest.Schema(t)
	var stores []storage.Store
	for range 3 {
		stores = append(stores, openMigrated(t, dsn, 8))
	}
	storagetest.RunSharedTests(t, stores)
}

// auditBenchRows is how many audit events BenchmarkAuditList lists from:
// STORAGE_AUDIT_BENCH_ROWS, default a million.
func auditBenchRows(b *testing.B) int {
	if v := os.Getenv("STORAGE_AUDIT_BENCH_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			b.Fatalf("STORAGE_AUDIT_BENCH_ROWS=%q: want a number of at least 1000", v)
		}
		return n
	}
	return 1_000_000
}

// A page of audit events, filtered or not, at the top or deep down, from
// a million events (docs/BENCHMARKS.md).
func BenchmarkAuditList(b *testing.B) {
	pgtest.BaseDSN(b)
	s := newStore(b)
	n := auditBenchRows(b)
	start := time.Now()
	storagetest.SeedAuditEvents(b, s, n, time.Now())
	// As autovacuum would soon after: statistics for the planner.
	if _, err := s.Pool().Exec(context.Background(), "ANALYZE audit_events"); err != nil {
		b.Fatal(err)
	}
	b.Logf("appended %d events in %v", n, time.Since(start).Round(time.Millisecond))
	storagetest.RunAuditBenchmarks(b, s, n)
}
