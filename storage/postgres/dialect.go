package postgres

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/internal/sqlstore"
)

// What PostgreSQL does otherwise than SQLite: times are timestamptz, lists
// text[], claims jsonb, jti keys bytea; rows read to be written back are
// locked (FOR UPDATE), batch deletes pass over rows other instances hold
// (SKIP LOCKED); and a few statements (revocation, TouchClient, token
// inserts) are written as one round trip where SQLite needs several.

// maxTime bounds the expiries stored from claims, which may lie further
// ahead than timestamptz can hold (294276 AD): beyond it the insert fails.
var maxTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

var syntax = sqlstore.Syntax{
	Name:       "postgres",
	ForUpdate:  " FOR UPDATE",
	SkipLocked: " FOR UPDATE SKIP LOCKED",
	Collate:    ` COLLATE "C"`,
	MaxTime:    maxTime,
	// A row for every key first, so that every key has a row to lock.
	LockCounters: `INSERT INTO counters (key) SELECT unnest($1::text[]) ORDER BY 1 ON CONFLICT (key) DO NOTHING`,
	ReadCounters: `SELECT key, count, until, expires_at FROM counters WHERE key = ANY($1) ORDER BY key FOR UPDATE`,
}

// ErrUnstorable is returned for a user field that PostgreSQL text cannot
// hold exactly (invalid UTF-8 or NUL).
var ErrUnstorable = errors.New("postgres: value is not valid UTF-8 or contains NUL")

// storable reports whether PostgreSQL text can hold every s: valid UTF-8
// without NUL. A key that cannot be stored cannot be found either, so
// lookups by such keys (a forged token, a hostile client_id) answer
// ErrNotFound instead of a database error; writes of such values fail.
func storable(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			return false
		}
	}
	return true
}

// ts turns Go's zero time into NULL.
func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// dialect is the sqlstore.Dialect of a Store.
type dialect struct{ s *Store }

// pgQ is a querier (the pool, a transaction of this store, a savepoint)
// as a sqlstore.Querier. Over a pointer (the pool, a transaction) it is
// one word, which an interface holds without an allocation.
type pgQ[T querier] struct{ q T }

func (p pgQ[T]) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := p.q.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (p pgQ[T]) Query(ctx context.Context, sql string, args ...any) (sqlstore.Rows, error) {
	rows, err := p.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (p pgQ[T]) QueryRow(ctx context.Context, sql string, args ...any) sqlstore.Row {
	return p.q.QueryRow(ctx, sql, args...)
}

func (d dialect) Read(ctx context.Context) sqlstore.Querier {
	if t := d.s.txFrom(ctx); t != nil {
		return pgQ[*pgTx]{t}
	}
	return pgQ[*pgxpool.Pool]{d.s.pool}
}

func (d dialect) Write(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := d.s.q(ctx).Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (d dialect) WriteRow(ctx context.Context, dest []any, sql string, args ...any) error {
	return d.s.q(ctx).QueryRow(ctx, sql, args...).Scan(dest...)
}

// InTx runs f in a transaction of its own, or in a savepoint of the one in
// ctx, so that a failed f leaves the caller's transaction usable.
func (d dialect) InTx(ctx context.Context, f func(sqlstore.Querier) error) error {
	err := pgx.BeginFunc(ctx, d.s.q(ctx), func(tx pgx.Tx) error {
		if err := f(pgQ[pgx.Tx]{tx}); err != nil {
			return closureErr{err}
		}
		return nil
	})
	var ce closureErr
	if errors.As(err, &ce) {
		return ce.err // f's error, unchanged
	}
	return mapErr(err)
}

// closureErr marks an error returned by InTx's f.
type closureErr struct{ err error }

func (e closureErr) Error() string { return e.err.Error() }

func (dialect) MapErr(err error) error { return mapErr(err) }

func (dialect) Storable(s string) bool { return storable(s) }

func (dialect) CheckText(s string) error {
	if !storable(s) {
		return ErrUnstorable
	}
	return nil
}

func (dialect) Time(t time.Time) any { return ts(t) }

func (dialect) ScanTime(p *time.Time) any { return (*pgTime)(p) }

// List keeps nil slices out of NOT NULL array columns.
func (dialect) List(l []string) any {
	if l == nil {
		return []string{}
	}
	return l
}

func (dialect) ScanList(p *[]string) any { return p }

// JTIKey: ids are bytea, so any byte string (a jti may hold "\u0000") is
// accepted.
func (dialect) JTIKey(id string) any { return []byte(id) }

// pgTime scans a timestamptz into a time.Time, in UTC, NULL as the zero
// time, without the allocation a **time.Time destination costs.
type pgTime time.Time

func (t *pgTime) ScanTimestamptz(v pgtype.Timestamptz) error {
	if !v.Valid {
		*t = pgTime{}
		return nil
	}
	*t = pgTime(v.Time.UTC())
	return nil
}

// RevokeGrants deactivates the active tokens of the rows' grants and
// records their status indices StatusInvalid, in one statement, and
// returns how many grants that touched. It runs the statement twice, for
// the reason RevokeRefreshToken in as/ gives: a refresh that committed
// while the first pass waited for its row issued tokens the first pass
// could not see. q is a transaction.
func (dialect) RevokeGrants(ctx context.Context, q sqlstore.Querier, rows string, args []any) (int, error) {
	grants := map[string]bool{}
	for range 2 {
		ids, err := sqlstore.ScanStrings(q.Query(ctx, `WITH r AS (
				UPDATE tokens SET active = false WHERE `+rows+` AND active RETURNING request_id, status_idx, expires_at),
			st AS (
				INSERT INTO token_status (idx, status, expires_at)
				SELECT status_idx, 1, max(expires_at) FROM r WHERE status_idx > 0 GROUP BY status_idx
				ON CONFLICT (idx) DO UPDATE SET expires_at = GREATEST(token_status.expires_at, excluded.expires_at))
			SELECT DISTINCT request_id FROM r`, args...))
		if err != nil {
			return 0, mapErr(err)
		}
		for _, id := range ids {
			grants[id] = true
		}
	}
	return len(grants), nil
}

// CreateToken implements storage.TokenStore. In a transaction the insert
// is sent with the next statement or with COMMIT (tx.go); outside one it
// is group-committed with concurrent inserts (batch.go).
func (s *Store) CreateToken(ctx context.Context, t *storage.Token) error {
	if tx := s.txFrom(ctx); tx != nil {
		// Nothing in the transaction depends on this row's result but its
		// error.
		tx.queue(sqlstore.InsertToken, sqlstore.TokenArgs(dialect{s}, t)...)
		return nil
	}
	return s.insertToken(ctx, t)
}

// TouchClient implements storage.ClientStore; ErrNotFound for an unknown id.
// A stored LastUsedAt within storage.TouchGranularity of at is kept.
func (s *Store) TouchClient(ctx context.Context, id string, at time.Time) error {
	if !storable(id) {
		return storage.ErrNotFound
	}
	// Rows whose last_used_at is recent do not match, so they are neither
	// written nor locked: a client issuing many tokens is no hot row. One
	// round trip: the CTE updates, the outer query tells unknown ids apart.
	var exists bool
	err := s.q(ctx).QueryRow(ctx, `WITH touched AS (
			UPDATE clients SET last_used_at = $2
			WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $3) RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM clients WHERE id = $1)`,
		id, at, at.Add(-storage.TouchGranularity)).Scan(&exists)
	if err != nil {
		return mapErr(err)
	}
	if !exists {
		return storage.ErrNotFound
	}
	return nil
}

// RevokeTokens implements storage.TokenStore in one statement: the tokens
// are deactivated and their status indices recorded StatusInvalid
// together.
func (s *Store) RevokeTokens(ctx context.Context, kind storage.TokenKind, requestID string) error {
	if !storable(string(kind), requestID) {
		return nil
	}
	_, err := s.q(ctx).Exec(ctx, `WITH r AS (
			UPDATE tokens SET active = false WHERE kind = $1 AND request_id = $2 AND active RETURNING status_idx, expires_at)
		INSERT INTO token_status (idx, status, expires_at)
		SELECT status_idx, 1, max(expires_at) FROM r WHERE status_idx > 0 GROUP BY status_idx
		ON CONFLICT (idx) DO UPDATE SET expires_at = GREATEST(token_status.expires_at, excluded.expires_at)`, string(kind), requestID)
	return mapErr(err)
}
