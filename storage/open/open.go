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
	"net/url"
	"strings"

	"github.com/mcpauth/mcpauth/internal/redact"
	"github.com/mcpauth/mcpauth/migrations"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
	"github.com/mcpauth/mcpauth/storage/postgres"
	"github.com/mcpauth/mcpauth/storage/sqlite"
)

// ErrUnknownDSN is returned for a DSN none of the backends accepts.
var ErrUnknownDSN = errors.New("storage: unknown storage DSN (want memory, sqlite:PATH or postgres://...)")

// errBadURL is returned for a postgres:// DSN that is not a URL. The DSN
// itself is never part of an error: its password would be in it.
var errBadURL = fmt.Errorf("%w: the postgres URL does not parse (percent-encode characters such as @ : / ? # %% in the user name and password)", ErrUnknownDSN)

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
		// A password with an unescaped "@" is ambiguous: the URL parser
		// splits at the first "/" (taking part of the password for the host),
		// people mean the last "@". Refuse it rather than guess.
		_, rest, _ := strings.Cut(dsn, "://")
		at := strings.LastIndexByte(rest, '@')
		if _, err := url.Parse(dsn); err != nil || at >= 0 && strings.ContainsAny(rest[:at], "/?#") {
			return 0, "", errBadURL
		}
		return kindPostgres, dsn, nil
	}
	return 0, "", ErrUnknownDSN
}

// Open opens the store dsn names. Unreachable databases yield a wrapped
// storage.ErrUnavailable; a malformed DSN ErrUnknownDSN or a parse error.
// No error of this package holds the DSN's password (package redact).
func Open(ctx context.Context, dsn string) (storage.Store, error) {
	s, err := open(ctx, dsn)
	return s, redact.Error(err, dsn)
}

func open(ctx context.Context, dsn string) (storage.Store, error) {
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
		return nil, redact.Error(err, dsn)
	}
	defer m.Close()
	v, err := m.Migrate(ctx)
	return v, redact.Error(err, dsn)
}

// MigrationStatus reports applied and pending migrations of the database dsn
// names. For memory it reports nothing applied and nothing pending.
func MigrationStatus(ctx context.Context, dsn string) (migrations.Status, error) {
	m, err := openMigrator(ctx, dsn)
	if err != nil || m == nil {
		return migrations.Status{}, redact.Error(err, dsn)
	}
	defer m.Close()
	st, err := m.MigrationStatus(ctx)
	return st, redact.Error(err, dsn)
}
