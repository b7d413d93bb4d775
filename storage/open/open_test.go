package open_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/migrations"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/open"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
)

func TestUnknownDSNsAreRejected(t *testing.T) {
	for _, dsn := range []string{"", "mem", "MEMORY", "sqlite:", "sqlite3:x.db", "mysql://x", "file:x.db", "./authserver.db"} {
		t.Run(fmt.Sprintf("dsn %q is rejected", dsn), func(t *testing.T) {
			ctx := context.Background()
			if _, err := open.Open(ctx, dsn); !errors.Is(err, open.ErrUnknownDSN) {
				t.Errorf("Open = %v, want ErrUnknownDSN", err)
			}
			if err := open.Migrate(ctx, dsn); !errors.Is(err, open.ErrUnknownDSN) {
				t.Errorf("Migrate = %v, want ErrUnknownDSN", err)
			}
			if _, err := open.MigrationStatus(ctx, dsn); !errors.Is(err, open.ErrUnknownDSN) {
				t.Errorf("MigrationStatus = %v, want ErrUnknownDSN", err)
			}
		})
	}
}

// checkBackend migrates, checks the status, opens and uses the store.
func checkBackend(t *testing.T, dsn string, wantMigrations bool) {
	ctx := context.Background()
	applied, err := open.Up(ctx, dsn)
	if err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if wantMigrations != (len(applied) > 0) {
		t.Fatalf("Migrate applied %v", applied)
	}
	st, err := open.MigrationStatus(ctx, dsn)
	if err != nil || len(st.Pending) != 0 {
		t.Fatalf("MigrationStatus = %+v, %v; want nothing pending", st, err)
	}
	if again, err := open.Up(ctx, dsn); err != nil || len(again) != 0 {
		t.Fatalf("second Migrate = %v, %v; want nothing applied", again, err)
	}
	s, err := open.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if err := s.CreateClient(ctx, &storage.Client{ID: "c", Source: "dcr"}); err != nil {
		t.Fatalf("CreateClient: %v", err)
	}
	if _, err := s.GetClient(ctx, "c"); err != nil {
		t.Fatalf("GetClient: %v", err)
	}
}

func TestMemoryOpensWithoutMigrations(t *testing.T) {
	checkBackend(t, "memory", false)
}

func TestSQLiteMigratesAndOpens(t *testing.T) {
	checkBackend(t, "sqlite:"+filepath.Join(t.TempDir(), "authserver.db"), true)
}

func TestPostgresMigratesAndOpens(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	checkBackend(t, dsn, true)
	st, err := open.MigrationStatus(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := migrations.Load(migrations.Postgres)
	if st.Current() != all[len(all)-1].Version {
		t.Fatalf("Current = %d", st.Current())
	}
}

func TestUnreachablePostgresIsUnavailable(t *testing.T) {
	s, err := open.Open(context.Background(), "postgresql://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2")
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Open = %v, want ErrUnavailable", err)
	}
	if s != nil {
		t.Fatalf("Open failed but returned a non-nil store %#v", s)
	}
}

func TestFailedSQLiteOpenReturnsANilStore(t *testing.T) {
	s, err := open.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "missing-dir", "x.db"))
	if err == nil {
		t.Fatal("Open of a file in a missing directory succeeded")
	}
	if s != nil {
		t.Fatalf("Open failed but returned a non-nil store %#v", s)
	}
}

func ExampleOpen() {
	ctx := context.Background()
	dsn := "memory" // or "sqlite:./authserver.db", "postgres://user@host/db"
	if err := open.Migrate(ctx, dsn); err != nil {
		panic(err)
	}
	s, err := open.Open(ctx, dsn)
	if err != nil {
		panic(err)
	}
	defer s.Close()
	err = s.UseJTI(ctx, "assertion-jti", time.Now().Add(time.Minute))
	fmt.Println(err)
	err = s.UseJTI(ctx, "assertion-jti", time.Now().Add(time.Minute))
	fmt.Println(errors.Is(err, storage.ErrAlreadyUsed))
	// Output:
	// <nil>
	// true
}

// No error of Open, Migrate or MigrationStatus holds the DSN's password, even
// for a DSN that does not parse (pgx echoes those, redacting only up to the
// first "@") or one whose password holds characters a URL parser splits on.
func TestErrorsNeverHoldTheDatabasePassword(t *testing.T) {
	const pw = "Se@cr/et-pw"
	for _, tc := range []struct{ name, dsn string }{
		{"an unescaped slash and at sign", "postgres://u:" + pw + "@127.0.0.1:1/x?sslmode=disable"},
		{"a bad sslmode", "postgres://u:" + pw + "@127.0.0.1:1/x?sslmode=bogus"},
		{"a bad percent escape", "postgres://u:" + pw + "%zz@127.0.0.1:1/x"},
		{"a password parameter", "postgres://u@127.0.0.1:1/x?connect_timeout=2&sslmode=bogus&password=" + pw},
		{"an unreachable server", "postgres://u:Se%40cr%2Fet-pw@127.0.0.1:1/x?sslmode=disable&connect_timeout=2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			_, err1 := open.Open(ctx, tc.dsn)
			err2 := open.Migrate(ctx, tc.dsn)
			_, err3 := open.MigrationStatus(ctx, tc.dsn)
			for _, err := range []error{err1, err2, err3} {
				if err == nil {
					t.Fatal("no error")
				}
				for _, part := range []string{pw, "cr/et", "Se%40cr%2Fet"} {
					if strings.Contains(err.Error(), part) {
						t.Errorf("error holds the password (%q): %v", part, err)
					}
				}
			}
		})
	}
}
