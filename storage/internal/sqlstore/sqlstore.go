// Package sqlstore is the storage.Store of the SQL backends, written once:
// the statements, the record-to-row code and the single-use rules they
// enforce. storage/postgres and storage/sqlite each supply a Dialect (how
// they run statements and transactions, how they encode times and lists,
// how their errors map onto storage's sentinels) and a Syntax (the few
// fragments of SQL in which the two databases differ), embed the Store, and
// keep only what is theirs: connections, transactions, group commit, and
// the statements one of them writes otherwise for speed.
//
// Statements use PostgreSQL's numbered placeholders ($1, $2, ...), which
// SQLite accepts as well (modernc.org/sqlite binds $N to the N-th
// argument), so one text serves both and each driver prepares it once
// (pgx's statement cache, the SQLite backend's statement caches).
//
// The single-use rules are those of RFC 6749 §4.1.2 (codes), RFC 9700
// §4.14.2 (refresh rotation and reuse detection) and RFC 7523 §3 (jti of
// client assertions); each comes from one statement whose WHERE clause
// holds the rule, so that of concurrent callers exactly one sees its row
// change.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// Row is one result row (pgx.Row, *sql.Row).
type Row interface {
	Scan(dest ...any) error
}

// Rows are the rows of a query (pgx.Rows, or *sql.Rows behind a Close
// without a result).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Querier runs statements on a pool, a connection or a transaction. Exec
// returns how many rows the statement changed. Errors are the driver's.
type Querier interface {
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Dialect is what a backend supplies: where statements run, and how values
// travel between records and rows.
type Dialect interface {
	// Read returns where the reads of ctx go: the transaction ctx carries,
	// or a pool.
	Read(ctx context.Context) Querier
	// Write runs one statement that changes rows, in the transaction ctx
	// carries or else committed before it returns, and returns how many
	// rows it changed.
	Write(ctx context.Context, query string, args ...any) (int64, error)
	// WriteRow is Write for a statement that returns one row (RETURNING),
	// scanned into dest.
	WriteRow(ctx context.Context, dest []any, query string, args ...any) error
	// InTx runs f in a transaction of its own, committed when f returns
	// nil, or within the transaction ctx carries. f's errors are returned
	// unchanged; the backend's own (BEGIN, COMMIT) are mapped.
	InTx(ctx context.Context, f func(q Querier) error) error
	// MapErr translates a driver error into storage's sentinels, keeping
	// the cause.
	MapErr(err error) error

	// Storable reports whether the database can hold s as a key. A key it
	// cannot hold cannot have been stored, so a lookup by it finds nothing
	// without asking the database.
	Storable(s string) bool
	// CheckText returns an error when s (a list element, a claim, a user
	// field) cannot be stored exactly.
	CheckText(s string) error
	// Time is t as a statement argument, the zero time as NULL.
	Time(t time.Time) any
	// ScanTime is a scan destination that stores a time column into *p, in
	// UTC, NULL as the zero time.
	ScanTime(p *time.Time) any
	// List is l as a statement argument for a list column.
	List(l []string) any
	// ScanList is a scan destination that stores a list column into *p.
	ScanList(p *[]string) any
	// JTIKey is a jti as the key of the jtis table.
	JTIKey(id string) any
	// RevokeGrants deactivates, in the transaction q, the active tokens
	// that match rows (a condition on tokens, with args), records their
	// status indices StatusInvalid, and returns how many grants
	// (request ids) that touched.
	RevokeGrants(ctx context.Context, q Querier, rows string, args []any) (int, error)
}

// Syntax holds the fragments of SQL in which the backends differ.
type Syntax struct {
	// Name prefixes the errors the store makes ("postgres", "sqlite").
	Name string
	// ForUpdate follows a SELECT whose row is read, changed and written
	// back in one transaction, and locks it until the transaction ends;
	// empty where a transaction locks the whole database.
	ForUpdate string
	// SkipLocked follows the sub-SELECT of rows a batch deletes: it locks
	// them, passing over rows other transactions hold, so that concurrent
	// cleaners never wait for each other.
	SkipLocked string
	// Collate follows a text operand so that it compares bytewise.
	Collate string
	// MaxTime is the latest time the database stores; later expiries
	// taken from claims are stored as MaxTime.
	MaxTime time.Time
	// LockCounters, when set, runs first in UpdateCounters with the sorted
	// keys as List($1): it makes sure every key has a row to lock.
	LockCounters string
	// ReadCounters selects key, count, until and expires_at of the
	// counters whose keys are in List($1), locking them where the database
	// locks rows.
	ReadCounters string
}

// Store is the storage.Store common to the SQL backends; they embed it.
// It is safe for concurrent use.
type Store struct {
	d   Dialect
	syn Syntax

	// Statements that hold a fragment of syn, built once.
	clientForUpdate string
	listClients     string
	tokenWithPerson string
}

// New returns the Store that runs its statements through d, written in
// syn's dialect.
func New(d Dialect, syn Syntax) *Store {
	return &Store{
		d:               d,
		syn:             syn,
		clientForUpdate: selectClient + syn.ForUpdate,
		listClients: `SELECT ` + clientCols + ` FROM clients WHERE id > $1` + syn.Collate +
			` ORDER BY id` + syn.Collate + ` LIMIT $2`,
		tokenWithPerson: tokenWithPersonSQL + syn.Collate + `
		WHERE t.kind = $1 AND t.signature = $2`,
	}
}

// fail maps a driver error: no row is storage.ErrNotFound.
func (s *Store) fail(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return storage.ErrNotFound
	}
	return s.d.MapErr(err)
}

// execCount runs a write and returns how many rows it changed.
func (s *Store) execCount(ctx context.Context, query string, args ...any) (int, error) {
	n, err := s.d.Write(ctx, query, args...)
	if err != nil {
		return 0, s.d.MapErr(err)
	}
	return int(n), nil
}

// execOne runs a write that must change one row, else ErrNotFound.
func (s *Store) execOne(ctx context.Context, query string, args ...any) error {
	n, err := s.execCount(ctx, query, args...)
	if err != nil {
		return err
	}
	if n == 0 {
		return storage.ErrNotFound
	}
	return nil
}

// deleteBatch deletes up to limit rows of table matching cond (with
// before as $1), in one short statement, and returns how many it deleted.
// key lists the columns of the table's primary key. A limit <= 0 deletes
// nothing.
func (s *Store) deleteBatch(ctx context.Context, table, key, cond string, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	return s.execCount(ctx, `DELETE FROM `+table+` WHERE (`+key+`) IN (
		SELECT `+key+` FROM `+table+` WHERE `+cond+` LIMIT $2`+s.syn.SkipLocked+`)`, s.d.Time(before), limit)
}

// ScanStrings returns the first column of every row, and closes rows.
func ScanStrings(rows Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// one scans row with scan into a new record; errors are mapped, no row is
// storage.ErrNotFound.
func one[T any](s *Store, row Row, scan func(Row, *T) error) (*T, error) {
	var v T
	if err := scan(row, &v); err != nil {
		return nil, s.fail(err)
	}
	return &v, nil
}

// collect appends to out a record scanned with scan from every row, and
// closes rows; errors are mapped.
func collect[T any](s *Store, out []T, rows Rows, err error, scan func(Row, *T) error) ([]T, error) {
	err = s.scanAll(rows, err, func(r Rows) error {
		var v T
		if err := scan(r, &v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanAll calls scan for every row, and closes rows; errors are mapped.
func (s *Store) scanAll(rows Rows, err error, scan func(Rows) error) error {
	if err != nil {
		return s.fail(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return s.fail(err)
		}
	}
	return s.fail(rows.Err())
}

// emptyNil turns an empty list into nil, as the records hold it.
func emptyNil(l []string) []string {
	if len(l) == 0 {
		return nil
	}
	return l
}

// bytesOrNil stores an empty byte slice as NULL.
func bytesOrNil(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// storable is Dialect.Storable of every s.
func (s *Store) storable(ss ...string) bool {
	for _, v := range ss {
		if !s.d.Storable(v) {
			return false
		}
	}
	return true
}

// checkText is Dialect.CheckText of every s.
func (s *Store) checkText(ss ...string) error {
	for _, v := range ss {
		if err := s.d.CheckText(v); err != nil {
			return err
		}
	}
	return nil
}

// checkLists is Dialect.CheckText of every element of lists.
func (s *Store) checkLists(lists ...[]string) error {
	for _, l := range lists {
		if err := s.checkText(l...); err != nil {
			return err
		}
	}
	return nil
}
