package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/internal/sqlstore"
)

// What SQLite does otherwise than PostgreSQL: times are Unix nanoseconds,
// lists JSON arrays; there are no row locks (every write transaction is
// BEGIN IMMEDIATE, which holds the whole file), so nothing is locked FOR
// UPDATE and a counter needs no row before it is read; and the statements
// PostgreSQL writes as one data-modifying CTE are several here.

var syntax = sqlstore.Syntax{
	Name:         "sqlite",
	MaxTime:      maxNanosTime,
	ReadCounters: `SELECT key, count, until, expires_at FROM counters WHERE key IN (SELECT value FROM json_each($1))`,
}

// ErrInvalidUTF8 is returned when a list element (redirect URI, scope, ...)
// or another text value kept as JSON or compared as text (a claim, a user
// or session field, a counter key) is not valid UTF-8: JSON, the list
// encoding, cannot keep it exactly.
var ErrInvalidUTF8 = errors.New("sqlite: list element is not valid UTF-8")

// maxNanosTime is the latest time Unix nanoseconds in an int64 can hold
// (in 2262); UnixNano of a later one wraps around.
var maxNanosTime = time.Unix(0, math.MaxInt64)

// ts stores a time as Unix nanoseconds, the zero time as NULL, and a time
// after maxNanosTime as maxNanosTime: expiries taken from claims may lie
// centuries ahead and must not wrap into the past (a remembered jti would
// read as expired).
func ts(t time.Time) any {
	switch {
	case t.IsZero():
		return nil
	case t.After(maxNanosTime):
		return int64(math.MaxInt64)
	}
	return t.UnixNano()
}

// nanoTime scans Unix nanoseconds into a time.Time, in UTC, NULL as the
// zero time.
type nanoTime time.Time

func (t *nanoTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*t = nanoTime{}
	case int64:
		*t = nanoTime(time.Unix(0, v).UTC())
	default:
		return fmt.Errorf("sqlite: time column holds %T", src)
	}
	return nil
}

// jsonList scans a JSON array into a []string, an empty one as nil.
type jsonList []string

func (l *jsonList) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case nil:
		*l = nil
		return nil
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return fmt.Errorf("sqlite: list column holds %T", src)
	}
	var out []string
	if err := json.Unmarshal(b, &out); err != nil {
		return fmt.Errorf("sqlite: corrupt list column: %w", err)
	}
	if len(out) == 0 {
		out = nil
	}
	*l = out
	return nil
}

// dialect is the sqlstore.Dialect of a Store.
type dialect struct{ s *Store }

// txQ is a transaction of the store as a sqlstore.Querier: writes use the
// writer connection's statement cache (stmts.go).
type txQ liteTx

func (t *txQ) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return affected(t.s.wexec(ctx, t.conn, query, args...))
}

func (t *txQ) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	return rows(t.conn.QueryContext(ctx, query, args...))
}

func (t *txQ) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	return t.conn.QueryRowContext(ctx, query, args...)
}

// sqlRows are *sql.Rows as sqlstore.Rows.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }

func rows(r *sql.Rows, err error) (sqlstore.Rows, error) {
	if err != nil {
		return nil, err
	}
	return sqlRows{r}, nil
}

func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Read returns the transaction in ctx, or the read pool.
func (d dialect) Read(ctx context.Context) sqlstore.Querier {
	if t := d.s.txFrom(ctx); t != nil {
		return (*txQ)(t)
	}
	return readPool{d.s}
}

// Write runs on the transaction in ctx, or else through the group
// committer.
func (d dialect) Write(ctx context.Context, query string, args ...any) (int64, error) {
	n, err := d.s.execCount(ctx, query, args...)
	return int64(n), err
}

// WriteRow runs on the transaction in ctx, or else in a transaction of its
// own: the group committer answers a count, not a row.
func (d dialect) WriteRow(ctx context.Context, dest []any, query string, args ...any) error {
	return d.s.inTx(ctx, func(q sqlstore.Querier) error {
		return q.QueryRow(ctx, query, args...).Scan(dest...)
	})
}

func (d dialect) InTx(ctx context.Context, f func(sqlstore.Querier) error) error {
	return d.s.inTx(ctx, f)
}

func (dialect) MapErr(err error) error { return mapErr(err) }

// Storable: SQLite text holds any bytes, and compares them bytewise.
func (dialect) Storable(string) bool { return true }

func (dialect) CheckText(s string) error {
	if !utf8.ValidString(s) {
		return ErrInvalidUTF8
	}
	return nil
}

func (dialect) Time(t time.Time) any { return ts(t) }

func (dialect) ScanTime(p *time.Time) any { return (*nanoTime)(p) }

func (dialect) List(l []string) any {
	if l == nil {
		l = []string{}
	}
	b, _ := json.Marshal(l)
	return string(b)
}

func (dialect) ScanList(p *[]string) any { return (*jsonList)(p) }

func (dialect) JTIKey(id string) any { return id }

// RevokeGrants records the status indices of the rows' active tokens
// StatusInvalid first, then counts their grants and deactivates them. q is
// a transaction, which holds the file: nothing changes in between.
func (dialect) RevokeGrants(ctx context.Context, q sqlstore.Querier, where string, args []any) (int, error) {
	if _, err := q.Exec(ctx, `INSERT INTO token_status (idx, status, expires_at)
		SELECT status_idx, 1, MAX(expires_at) FROM tokens WHERE `+where+` AND active AND status_idx > 0 GROUP BY status_idx
		ON CONFLICT (idx) DO UPDATE SET expires_at = MAX(COALESCE(expires_at, 0), COALESCE(excluded.expires_at, 0))`, args...); err != nil {
		return 0, mapErr(err)
	}
	var n int
	if err := q.QueryRow(ctx, `SELECT COUNT(DISTINCT request_id) FROM tokens WHERE `+where+` AND active`, args...).Scan(&n); err != nil {
		return 0, mapErr(err)
	}
	if _, err := q.Exec(ctx, `UPDATE tokens SET active = 0 WHERE `+where+` AND active`, args...); err != nil {
		return 0, mapErr(err)
	}
	return n, nil
}

// TouchClient implements storage.ClientStore; ErrNotFound for an unknown id.
// A stored LastUsedAt within storage.TouchGranularity of at is kept.
func (s *Store) TouchClient(ctx context.Context, id string, at time.Time) error {
	// Read first, on the read pool: a recent last_used_at (the usual case
	// for a busy client) needs no turn on the single writer connection.
	var last sql.NullInt64
	err := dialect{s}.Read(ctx).QueryRow(ctx, `SELECT last_used_at FROM clients WHERE id = $1`, id).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return storage.ErrNotFound
	}
	if err != nil {
		return mapErr(err)
	}
	cutoff := at.Add(-storage.TouchGranularity).UnixNano()
	if last.Valid && last.Int64 >= cutoff {
		return nil
	}
	_, err = s.execCount(ctx, `UPDATE clients SET last_used_at = $2
		WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $3)`, id, ts(at), cutoff)
	return err
}

// RevokeTokens implements storage.TokenStore. The statuses are recorded by
// a statement of their own, before the tokens are deactivated, so a
// failure in between leaves the tokens refused by resource servers rather
// than accepted.
func (s *Store) RevokeTokens(ctx context.Context, kind storage.TokenKind, requestID string) error {
	if _, err := s.execCount(ctx, `INSERT INTO token_status (idx, status, expires_at)
		SELECT status_idx, 1, MAX(expires_at) FROM tokens WHERE kind = $1 AND request_id = $2 AND active AND status_idx > 0 GROUP BY status_idx
		ON CONFLICT (idx) DO UPDATE SET expires_at = MAX(COALESCE(expires_at, 0), COALESCE(excluded.expires_at, 0))`,
		string(kind), requestID); err != nil {
		return err
	}
	_, err := s.execCount(ctx, `UPDATE tokens SET active = 0 WHERE kind = $1 AND request_id = $2 AND active`, string(kind), requestID)
	return err
}
