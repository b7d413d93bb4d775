// Package pgtest gives each test its own PostgreSQL schema.
//
// Tests that need PostgreSQL read AUTHSERVER_TEST_POSTGRES (for example
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable). When it is unset
// they are skipped, unless CI is set, in which case they fail.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvVar names the environment variable holding the test database URL.
const EnvVar = "AUTHSERVER_TEST_POSTGRES"

// BaseDSN returns the test database URL, skipping (or, under CI, failing)
// t when it is unset.
func BaseDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvVar)
	if dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set but CI is: PostgreSQL tests must run", EnvVar)
		}
		t.Skipf("%s not set; skipping PostgreSQL test", EnvVar)
	}
	return dsn
}

// Schema creates an empty schema with a random name, drops it when t ends,
// and returns a URL whose connections use it (search_path) together with the
// schema name.
func Schema(t testing.TB) (dsn, schema string) {
	t.Helper()
	base := BaseDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: connect %s: %v", EnvVar, err)
	}
	defer conn.Close(ctx)
	b := make([]byte, 8)
	rand.Read(b)
	schema = "t_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("pgtest: %s is not a URL: %v", EnvVar, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), schema
}
