// Package postgres is the PostgreSQL storage.Store, built on pgx/v5's pgxpool.
//
// Exactly-once behaviour comes from single statements: redeeming a code is
// one "UPDATE ... WHERE active", rotating a refresh token one UPDATE whose
// WHERE clause holds the grace rule, using a jti one INSERT ... ON CONFLICT.
// PostgreSQL re-evaluates the WHERE clause of a blocked UPDATE once the
// competing transaction commits, so of any number of concurrent callers, on
// any number of authserver instances, exactly one sees its row change.
//
// Transactions (storage.Transactional) travel in the context: BeginTX stores
// a connection of the pool in the returned context and every method called
// with that context runs on it, in one transaction. BEGIN is sent with the
// transaction's first statement, and token inserts wait to be sent with the
// next statement or with COMMIT, so a code redemption (UPDATE, two INSERTs)
// costs two round trips instead of five (see tx.go). Token inserts outside a
// transaction that arrive together share one statement and one commit (see
// batch.go). A statement that fails
// inside a transaction aborts it (as PostgreSQL does); the caller must then
// Rollback.
//
// The statements and the record-to-row code are shared with the SQLite
// backend (storage/internal/sqlstore); what is PostgreSQL's own (encoding,
// locking, error mapping, the statements it writes otherwise) is in
// dialect.go.
//
// Errors: unique violations map to storage.ErrAlreadyExists; a database that
// cannot be reached, a closed pool, a server shutting down or a connection
// lost map to a wrapped storage.ErrUnavailable. The pool replaces broken
// connections, so the store recovers by itself when the server is back.
//
// The schema comes from package migrations; call Migrate (or open.Migrate)
// before use.
//
// The single-use rules it enforces are those of RFC 6749 §4.1.2 (codes),
// RFC 9700 §4.14.2 (refresh rotation and reuse detection) and RFC 7523 §3
// (jti of client assertions).
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/mcpauth/mcpauth/migrations"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/internal/sqlstore"
)

// Options tune the connection pool. The zero value is usable.
type Options struct {
	// MaxConns caps the pool; 0 means the DSN's pool_max_conns, or
	// DefaultMaxConns when the DSN has none.
	MaxConns int32
	// MinConns keeps that many connections open; 0 opens them on demand.
	MinConns int32
}

// DefaultMaxConns is the pool size when neither Options nor the DSN set
// one: enough for a few dozen concurrent token requests, each of which holds
// a connection for one statement at a time (or for one transaction).
const DefaultMaxConns = 16

// Store is the PostgreSQL backend. It is safe for concurrent use. Its
// storage methods are those of the SQL backends' shared implementation
// (storage/internal/sqlstore), run through this package's dialect
// (dialect.go); CreateToken, TouchClient and RevokeTokens are its own.
type Store struct {
	*core
	pool    *pgxpool.Pool
	inserts tokenInserts
}

// core is the shared implementation, embedded under a name of this
// package so that it adds no exported field.
type core = sqlstore.Store

var (
	_ storage.Store             = (*Store)(nil)
	_ storage.TokenPersonReader = (*Store)(nil)
)

// Open connects to dsn (a postgres:// URL or key=value string; extra
// parameters such as search_path become session settings) and checks the
// connection. A database that cannot be reached yields a wrapped
// storage.ErrUnavailable.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse dsn: %w", err)
	}
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !strings.Contains(dsn, "pool_max_conns"):
		cfg.MaxConns = DefaultMaxConns
	}
	if opts.MinConns > 0 {
		cfg.MinConns = opts.MinConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Store{pool: pool}
	s.core = sqlstore.New(dialect{s}, syntax)
	if err := s.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Pool exposes the connection pool, for health checks and tests.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Migrate applies pending migrations under an advisory lock and returns the
// versions it applied.
func (s *Store) Migrate(ctx context.Context) ([]int, error) {
	r, db, err := s.runner()
	if err != nil {
		return nil, err
	}
	defer db.Close()
	v, err := r.Up(ctx)
	return v, mapErr(err)
}

// MigrationStatus reports applied and pending migrations.
func (s *Store) MigrationStatus(ctx context.Context) (migrations.Status, error) {
	r, db, err := s.runner()
	if err != nil {
		return migrations.Status{}, err
	}
	defer db.Close()
	st, err := r.Status(ctx)
	return st, mapErr(err)
}

func (s *Store) runner() (*migrations.Runner, *sql.DB, error) {
	db := stdlib.OpenDBFromPool(s.pool)
	r, err := migrations.New(db, migrations.Postgres)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return r, db, nil
}

// Close closes the pool; later calls fail with storage.ErrUnavailable.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Ping implements storage.Store.
func (s *Store) Ping(ctx context.Context) error {
	if t := s.txFrom(ctx); t != nil {
		_, err := t.Exec(ctx, "SELECT 1")
		return mapErr(err)
	}
	return mapErr(s.pool.Ping(ctx))
}

// mapErr translates pgx errors into storage sentinels, keeping the cause.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	// Already mapped (a statement's error passed on by a transaction).
	if errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrAlreadyExists) || errors.Is(err, storage.ErrNotFound) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505":
			return fmt.Errorf("%w: %s", storage.ErrAlreadyExists, pgErr.ConstraintName)
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			strings.HasPrefix(pgErr.Code, "57P"), // admin/crash shutdown, cannot connect now
			strings.HasPrefix(pgErr.Code, "53"),  // insufficient resources (too many connections)
			strings.HasPrefix(pgErr.Code, "40"),  // serialization failure, deadlock detected: transient
			pgErr.Code == "55P03",                // lock not available
			pgErr.Code == "57014":                // statement timeout / query canceled
			return fmt.Errorf("%w: %w", storage.ErrUnavailable, err)
		}
		return fmt.Errorf("postgres: %w", err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connErr) || errors.As(err, &netErr) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "closed pool") ||
		strings.Contains(err.Error(), "conn closed") {
		return fmt.Errorf("%w: %w", storage.ErrUnavailable, err)
	}
	return fmt.Errorf("postgres: %w", err)
}

// querier is what both the pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}
