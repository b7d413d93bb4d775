package migrations_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/mcpauth/mcpauth/migrations"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
)

func TestLoadReturnsVersionsInOrder(t *testing.T) {
	for _, d := range []migrations.Dialect{migrations.Postgres, migrations.SQLite} {
		ms, err := migrations.Load(d)
		if err != nil {
			t.Fatalf("Load(%s): %v", d, err)
		}
		if len(ms) == 0 || ms[0].Version != 1 {
			t.Fatalf("Load(%s) = %d migrations, want version 1 first", d, len(ms))
		}
		for i := 1; i < len(ms); i++ {
			if ms[i].Version <= ms[i-1].Version {
				t.Fatalf("Load(%s): versions out of order", d)
			}
		}
	}
	if _, err := migrations.Load("oracle"); err == nil {
		t.Fatal("Load of an unknown dialect succeeded")
	}
}

func versions(t *testing.T, d migrations.Dialect) []int {
	ms, err := migrations.Load(d)
	if err != nil {
		t.Fatal(err)
	}
	var vs []int
	for _, m := range ms {
		vs = append(vs, m.Version)
	}
	return vs
}

// checkUpAndStatus migrates a fresh database and checks what Status says
// before and after, and that a second Up is a no-op.
func checkUpAndStatus(t *testing.T, db *sql.DB, d migrations.Dialect) {
	ctx := context.Background()
	r, err := migrations.New(db, d)
	if err != nil {
		t.Fatal(err)
	}
	all := versions(t, d)
	st, err := r.Status(ctx)
	if err != nil {
		t.Fatalf("Status before Up: %v", err)
	}
	if len(st.Applied) != 0 || !slices.Equal(st.Pending, all) || st.Current() != 0 {
		t.Fatalf("Status before Up = %+v, want all pending", st)
	}
	applied, err := r.Up(ctx)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	if !slices.Equal(applied, all) {
		t.Fatalf("Up applied %v, want %v", applied, all)
	}
	st, err = r.Status(ctx)
	if err != nil {
		t.Fatalf("Status after Up: %v", err)
	}
	if !slices.Equal(st.Applied, all) || len(st.Pending) != 0 || len(st.Unknown) != 0 || st.Current() != all[len(all)-1] {
		t.Fatalf("Status after Up = %+v", st)
	}
	applied, err = r.Up(ctx)
	if err != nil || len(applied) != 0 {
		t.Fatalf("second Up = %v, %v; want nothing applied", applied, err)
	}
	// A version from a newer release shows as unknown.
	if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future.sql', 'x')`); err != nil {
		t.Fatal(err)
	}
	st, err = r.Status(ctx)
	if err != nil || !slices.Equal(st.Unknown, []int{9999}) {
		t.Fatalf("Status with a future version = %+v, %v", st, err)
	}
}

func TestSQLiteUpAndStatus(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkUpAndStatus(t, db, migrations.SQLite)
}

func TestPostgresUpAndStatus(t *testing.T) {
	t.Parallel()
	dsn, _ := pgtest.Schema(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkUpAndStatus(t, db, migrations.Postgres)
}

// upConcurrently runs Up from n pools on one fresh database (driver, dsn),
// released at once as several instances starting together, and checks that
// each version was applied exactly once across them and none failed.
func upConcurrently(t *testing.T, n int, d migrations.Dialect, driver, dsn string) {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		applied []int
		start   = make(chan struct{})
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := sql.Open(driver, dsn)
			if err != nil {
				t.Error(err)
				return
			}
			defer db.Close()
			r, err := migrations.New(db, d)
			if err != nil {
				t.Error(err)
				return
			}
			<-start
			vs, err := r.Up(context.Background())
			if err != nil {
				t.Errorf("concurrent Up: %v", err)
				return
			}
			mu.Lock()
			applied = append(applied, vs...)
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	slices.Sort(applied)
	if want := versions(t, d); !slices.Equal(applied, want) {
		t.Fatalf("versions applied across %d instances = %v, want each of %v once", n, applied, want)
	}
}

// Several instances starting at once against one fresh schema: each version
// is applied exactly once and every instance ends up migrated.
func TestPostgresConcurrentUpAppliesEachVersionOnce(t *testing.T) {
	t.Parallel()
	dsn, _ := pgtest.Schema(t)
	upConcurrently(t, 8, migrations.Postgres, "pgx", dsn)
}

func TestSQLiteConcurrentUpAppliesEachVersionOnce(t *testing.T) {
	upConcurrently(t, 4, migrations.SQLite, "sqlite",
		filepath.Join(t.TempDir(), "m.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"))
}
