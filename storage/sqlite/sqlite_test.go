package sqlite_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/sqlite"
	"github.com/mcpauth/mcpauth/storage/storagetest"
)

func openMigrated(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path)
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
	storagetest.RunTests(t, func(t *testing.T) storage.Store {
		return openMigrated(t, filepath.Join(t.TempDir(), "authserver.db"))
	})
}

func TestDataSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authserver.db")
	ctx := context.Background()
	s := openMigrated(t, path)
	if err := s.CreateClient(ctx, &storage.Client{ID: "c", Source: "dcr"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := openMigrated(t, path)
	if _, err := s2.GetClient(ctx, "c"); err != nil {
		t.Fatalf("client lost across reopen: %v", err)
	}
	st, err := s2.MigrationStatus(ctx)
	if err != nil || len(st.Pending) != 0 {
		t.Fatalf("MigrationStatus after reopen = %+v, %v", st, err)
	}
}

func TestOpenRejectsUnsupportedPaths(t *testing.T) {
	for _, p := range []string{"", ":memory:", "x.db?mode=ro", filepath.Join(t.TempDir(), "missing-dir", "x.db")} {
		if s, err := sqlite.Open(context.Background(), p); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", p)
		}
	}
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	s := openMigrated(t, filepath.Join(t.TempDir(), "authserver.db"))
	s.Close()
	if _, err := s.GetClient(context.Background(), "x"); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("GetClient on a closed store = %v, want ErrUnavailable", err)
	}
}

func BenchmarkStore(b *testing.B) {
	storagetest.RunBenchmarks(b, func(b *testing.B) storage.Store {
		return openMigrated(b, filepath.Join(b.TempDir(), "authserver.db"))
	})
}

// Two stores on one file stand for two processes sharing it.
func TestInstancesSharingOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authserver.db")
	storagetest.RunSharedTests(t, []storage.Store{openMigrated(t, path), openMigrated(t, path)})
}

// Times are Unix nanoseconds, which end in 2262. A later expiry (a token
// or consent lifetime taken from far-future claims) is stored as the
// latest time they hold, never wrapped into the past, where it would read
// as expired.
func TestTimesAfter2262AreStoredAsTheLatestNotWrapped(t *testing.T) {
	s := openMigrated(t, filepath.Join(t.TempDir(), "authserver.db"))
	ctx := context.Background()
	far := time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC)
	tok := &storage.Token{Kind: storage.KindAccessToken, Signature: "far", RequestID: "r", Active: true,
		CreatedAt: time.Now(), ExpiresAt: far}
	if err := s.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetToken(ctx, storage.KindAccessToken, "far")
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Unix(0, math.MaxInt64).UTC(); !got.ExpiresAt.Equal(want) {
		t.Fatalf("ExpiresAt of a token expiring in 2500 reads %v, want %v", got.ExpiresAt, want)
	}
	if n, err := s.DeleteExpiredTokens(ctx, time.Now(), 10); err != nil || n != 0 {
		t.Fatalf("DeleteExpiredTokens deleted %d (%v), want the far token kept", n, err)
	}
}

// A page of audit events, filtered or not, at the top or deep down, from
// STORAGE_AUDIT_BENCH_ROWS events, default a million (docs/BENCHMARKS.md).
func BenchmarkAuditList(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("STORAGE_AUDIT_BENCH_ROWS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			b.Fatalf("STORAGE_AUDIT_BENCH_ROWS=%q: want a number of at least 1000", v)
		}
	}
	s := openMigrated(b, filepath.Join(b.TempDir(), "authserver.db"))
	start := time.Now()
	storagetest.SeedAuditEvents(b, s, n, time.Now())
	b.Logf("appended %d events in %v", n, time.Since(start).Round(time.Millisecond))
	storagetest.RunAuditBenchmarks(b, s, n)
}
