// Package open turns a storage DSN from configuration into a storage.Store.
//
//	memory                          in-process, lost on exit (tests, throwaway runs)
//	sqlite:PATH                     embedded file, e.g. sqlite:./authserver.db (the default)
//	postgres://... postgresql://... PostgreSQL (pgx URL; extra parameters such
//	                                as search_path become session settings)
//
// Open does not migrate: call Migrate first (authserver migrate up, or serve
// on start), which is a no-op for memory.
//
// A DSN names no protocol of its own; the stores it opens keep the records of
// RFC 6749, RFC 7591 and RFC 9068 described in package storage.
package open

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mcpauth/mcpauth/migrations"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
	"github.com/mcpauth/mcpauth/storage/postgres"
	"github.com/mcpauth/mcpauth/storage/sqlite"
)

// ErrUnknownDSN is returned for a DSN none of the backends accepts.
var ErrUnknownDSN = errors.New("storage: unknown storage DSN (want memory, sqlite:PATH or postgres://...)")

type kind int

const (
	kindMemory kind = iota + 1
	kindSQLite
	kindPostgres
)

// parse returns the backend and its own part of dsn.
func parse(dsn string) (kind, string, error) {
	switch {
	case dsn == "memory":
		return kindMemory, "", nil
	case strings.HasPrefix(dsn, "sqlite:"):
		path := strings.TrimPrefix(dsn, "sqlite:")
		if path == "" {
			return 0, "", fmt.Errorf("%w: sqlite: needs a file path", ErrUnknownDSN)
		}
		return kindSQLite, path, nil
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return kindPostgres, dsn, nil
	}
	return 0, "", ErrUnknownDSN
}

// Open opens the store dsn names. Unreachable databases yield a wrapped
// storage.ErrUnavailable; a malformed DSN ErrUnknownDSN or a parse error.
func Open(ctx context.Context, dsn string) (storage.Store, error) {
	k, rest, err := parse(dsn)
	if err != nil {
		return nil, err
	}
	switch k {
	case kindMemory:
		return memory.New(), nil
	case kindSQLite:
		return orNil(sqlite.Open(ctx, rest))
	default:
		return orNil(postgres.Open(ctx, rest, postgres.Options{}))
	}
}

// orNil returns a nil storage.Store with an error, rather than a non-nil
// interface holding the backend's nil pointer.
func orNil[S storage.Store](s S, err error) (storage.Store, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
}

// migrator is what the SQL backends offer beyond storage.Store.
type migrator interface {
	Migrate(ctx context.Context) ([]int, error)
	MigrationStatus(ctx context.Context) (migrations.Status, error)
	Close() error
}

func openMigrator(ctx context.Context, dsn string) (migrator, error) {
	k, rest, err := parse(dsn)
	if err != nil {
		return nil, err
	}
	switch k {
	case kindMemory:
		return nil, nil
	case kindSQLite:
		return sqlite.Open(ctx, rest)
	default:
		return postgres.Open(ctx, rest, postgres.Options{MaxConns: 2})
	}
}

// Migrate applies pending migrations to the database dsn names. On
// PostgreSQL it holds an advisory lock, so several instances may call it at
// once. For memory it does nothing.
func Migrate(ctx context.Context, dsn string) error {
	_, err := Up(ctx, dsn)
	return err
}

// Up is Migrate that also returns the versions it applied, for
// "authserver migrate up" to print.
func Up(ctx context.Context, dsn string) ([]int, error) {
	m, err := openMigrator(ctx, dsn)
	if err != nil || m == nil {
		return nil, err
	}
	defer m.Close()
	return m.Migrate(ctx)
}

// MigrationStatus reports applied and pending migrations of the database dsn
// names. For memory it reports nothing applied and nothing pending.
func MigrationStatus(ctx context.Context, dsn string) (migrations.Status, error) {
	m, err := openMigrator(ctx, dsn)
	if err != nil || m == nil {
		return migrations.Status{}, err
	}
	defer m.Close()
	return m.MigrationStatus(ctx)
}
