// Package sqlite is the embedded storage.Store, on modernc.org/sqlite (pure
// Go, no cgo). It is the default backend of a single authserver process.
//
// The database runs in WAL mode with synchronous=FULL, so a write that has
// returned survives the process being killed (and, as far as the file system
// keeps its promises, a power cut). All writes go through one connection and
// write transactions start with BEGIN IMMEDIATE, so writers queue instead of
// failing with SQLITE_BUSY; reads use a separate pool and run alongside.
// busy_timeout covers other processes opening the same file.
//
// Single writes outside a transaction are group-committed: writes that
// arrive while a commit is under way are run one after the other inside the
// next BEGIN IMMEDIATE ... COMMIT, and each caller gets its own result once
// that commit is durable. Each statement still sees the effects of the ones
// before it, so the exactly-once rules hold; concurrent writers share an
// fsync instead of queueing for one each.
//
// Transactions (storage.Transactional) travel in the context and hold the
// writer connection until Commit or Rollback: calling a write method with a
// context outside the open transaction, from the goroutine that holds it,
// waits forever.
//
// Lists are stored as JSON arrays, timestamps as Unix nanoseconds, secrets
// and sealed data as blobs.
//
// The single-use rules it enforces are those of RFC 6749 §4.1.2 (codes),
// RFC 9700 §4.14.2 (refresh rotation and reuse detection) and RFC 7523 §3
// (jti of client assertions).
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	sqlite3 "modernc.org/sqlite"
	sqlitelib "modernc.org/sqlite/lib"

	"github.com/mcpauth/mcpauth/migrations"
	"github.com/mcpauth/mcpauth/storage"
)

// Store is the SQLite backend. It is safe for concurrent use.
type Store struct {
	w *sql.DB // one connection: every write
	r *sql.DB // reads outside transactions

	writes chan *writeReq // single writes, for the group committer
	stop   chan struct{}  // closed by Close
	done   chan struct{}  // closed when the committer has returned

	stmts stmtCache    // the writer connection's prepared statements
	held  atomic.Int32 // writer connections taken and not yet given back
	reads sync.Map     // query -> *sql.Stmt of the read pool
}

var (
	_ storage.Store             = (*Store)(nil)
	_ storage.TokenPersonReader = (*Store)(nil)
)

// maxBatch caps how many single writes share one commit.
const maxBatch = 128

// BusyTimeout is how long a statement waits for another process's lock.
const BusyTimeout = 10 * time.Second

// Open opens (creating if needed) the database file at path and checks it.
// It does not migrate; call Migrate.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") || path == ":memory:" {
		return nil, fmt.Errorf("sqlite: unsupported database path %q", path)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(1)")
	dsn := path + "?" + q.Encode()
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	r, err := sql.Open("sqlite", dsn)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	s := &Store{w: w, r: r, writes: make(chan *writeReq, maxBatch), stop: make(chan struct{}), done: make(chan struct{})}
	go s.commitLoop()
	// Open the writer first: it creates the file and switches it to WAL.
	if err := w.PingContext(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, mapErr(err))
	}
	if err := r.PingContext(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, mapErr(err))
	}
	return s, nil
}

// Migrate applies pending migrations and returns the versions it applied.
func (s *Store) Migrate(ctx context.Context) ([]int, error) {
	r, err := migrations.New(s.w, migrations.SQLite)
	if err != nil {
		return nil, err
	}
	v, err := r.Up(ctx)
	return v, mapErr(err)
}

// MigrationStatus reports applied and pending migrations.
func (s *Store) MigrationStatus(ctx context.Context) (migrations.Status, error) {
	r, err := migrations.New(s.r, migrations.SQLite)
	if err != nil {
		return migrations.Status{}, err
	}
	st, err := r.Status(ctx)
	return st, mapErr(err)
}

// Close stops the group committer (a batch already started is finished),
// then closes both pools; later calls fail with storage.ErrUnavailable.
func (s *Store) Close() error {
	select {
	case <-s.stop:
		return nil
	default:
	}
	close(s.stop)
	<-s.done
	if s.held.Load() == 0 {
		// No transaction holds the writer: finalize its statements.
		if conn, err := s.w.Conn(context.Background()); err == nil {
			s.stmts.close(conn)
			conn.Close()
		}
	}
	s.closeReads()
	return errors.Join(s.r.Close(), s.w.Close())
}

// Ping implements storage.Store.
func (s *Store) Ping(ctx context.Context) error {
	if t := s.txFrom(ctx); t != nil {
		_, err := t.conn.ExecContext(ctx, "SELECT 1")
		return mapErr(err)
	}
	return mapErr(s.r.PingContext(ctx))
}

// mapErr translates driver errors into storage sentinels, keeping the cause.
func mapErr(err error) error {
	if err == nil || errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrAlreadyExists) {
		return err
	}
	var se *sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlitelib.SQLITE_CONSTRAINT_PRIMARYKEY, sqlitelib.SQLITE_CONSTRAINT_UNIQUE:
			return fmt.Errorf("%w: %w", storage.ErrAlreadyExists, err)
		}
		switch se.Code() & 0xff {
		case sqlitelib.SQLITE_BUSY, sqlitelib.SQLITE_LOCKED, sqlitelib.SQLITE_IOERR,
			sqlitelib.SQLITE_CANTOPEN, sqlitelib.SQLITE_FULL, sqlitelib.SQLITE_READONLY:
			return fmt.Errorf("%w: %w", storage.ErrUnavailable, err)
		}
		return fmt.Errorf("sqlite: %w", err)
	}
	if errors.Is(err, sql.ErrConnDone) || strings.Contains(err.Error(), "database is closed") ||
		strings.Contains(err.Error(), "statement is closed") { // a read racing Close
		return fmt.Errorf("%w: %w", storage.ErrUnavailable, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("sqlite: %w", err)
}

type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type txKey struct{}

type liteTx struct {
	s    *Store
	conn *sql.Conn // the writer connection, inside BEGIN IMMEDIATE
	done bool
}

func (s *Store) txFrom(ctx context.Context) *liteTx {
	t, _ := ctx.Value(txKey{}).(*liteTx)
	if t == nil || t.s != s || t.done {
		return nil
	}
	return t
}

// rq is where reads go: the transaction in ctx, or the read pool.
func (s *Store) rq(ctx context.Context) querier {
	if t := s.txFrom(ctx); t != nil {
		return t.conn
	}
	return readPool{s}
}

// begin takes the writer connection (waiting at most until ctx ends) and
// starts BEGIN IMMEDIATE on it. The transaction is driven by hand rather than
// by database/sql's Tx, which would roll back as soon as the context that
// began it is cancelled, even after the caller moved on to Commit.
func (s *Store) begin(ctx context.Context) (*liteTx, error) {
	conn, err := s.writer(ctx)
	if err != nil {
		return nil, mapErr(err)
	}
	if _, err := s.wexec(ctx, conn, "BEGIN IMMEDIATE"); err != nil {
		s.release(conn)
		return nil, mapErr(err)
	}
	return &liteTx{s: s, conn: conn}, nil
}

// end commits or rolls back and gives the writer connection back. When
// COMMIT fails the transaction is rolled back, so the connection is clean.
func (t *liteTx) end(commit bool) error {
	t.done = true
	ctx := context.Background()
	defer t.s.release(t.conn)
	if commit {
		_, err := t.s.wexec(ctx, t.conn, "COMMIT")
		if err == nil {
			return nil
		}
		t.s.wexec(ctx, t.conn, "ROLLBACK")
		return mapErr(err)
	}
	_, err := t.s.wexec(ctx, t.conn, "ROLLBACK")
	return mapErr(err)
}

// BeginTX implements storage.Transactional with BEGIN IMMEDIATE on the writer
// connection. A context that already carries a transaction of this store is
// returned unchanged (no nesting).
func (s *Store) BeginTX(ctx context.Context) (context.Context, error) {
	if s.txFrom(ctx) != nil {
		return ctx, nil
	}
	t, err := s.begin(ctx)
	if err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, txKey{}, t), nil
}

// ErrNoTransaction is returned by Commit and Rollback when ctx carries no open
// transaction of this store.
var ErrNoTransaction = errors.New("sqlite: no open transaction in context")

// Commit implements storage.Transactional.
func (s *Store) Commit(ctx context.Context) error {
	t := s.txFrom(ctx)
	if t == nil {
		return ErrNoTransaction
	}
	return t.end(true)
}

// Rollback implements storage.Transactional.
func (s *Store) Rollback(ctx context.Context) error {
	t := s.txFrom(ctx)
	if t == nil {
		return ErrNoTransaction
	}
	return t.end(false)
}

// ts stores a time as Unix nanoseconds, the zero time as NULL.
func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// maxNanosTime is the latest time Unix nanoseconds in an int64 can hold
// (in 2262); UnixNano of a later one wraps around.
var maxNanosTime = time.Unix(0, math.MaxInt64)

// nanos is t as Unix nanoseconds, a time after maxNanosTime as
// maxNanosTime: for expiries taken from claims, which may lie centuries
// ahead and must not wrap into the past (a remembered jti would read as
// expired).
func nanos(t time.Time) int64 {
	if t.After(maxNanosTime) {
		return math.MaxInt64
	}
	return t.UnixNano()
}

func untime(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

func list(s []string) string {
	if s == nil {
		s = []string{}
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// ErrInvalidUTF8 is returned when a list element (redirect URI, scope, ...)
// is not valid UTF-8: JSON, the list encoding, cannot keep it exactly.
var ErrInvalidUTF8 = errors.New("sqlite: list element is not valid UTF-8")

func checkLists(lists ...[]string) error {
	for _, l := range lists {
		for _, v := range l {
			if !utf8.ValidString(v) {
				return ErrInvalidUTF8
			}
		}
	}
	return nil
}

func unlist(s string) ([]string, error) {
	var out []string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("sqlite: corrupt list column: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

const clientCols = `id, secret_hash, secret_expires_at, public, name, redirect_uris, grant_types,
	response_types, scopes, resources, token_endpoint_auth_method, jwks, jwks_uri,
	application_type, metadata, registration_token_hash, source, created_at, updated_at, last_used_at`

func clientArgs(c *storage.Client) []any {
	return []any{c.ID, c.SecretHash, ts(c.SecretExpiresAt), boolInt(c.Public), c.Name, list(c.RedirectURIs),
		list(c.GrantTypes), list(c.ResponseTypes), list(c.Scopes), list(c.Resources),
		c.TokenEndpointAuthMethod, c.JWKS, c.JWKSURI, c.ApplicationType, c.Metadata,
		c.RegistrationTokenHash, c.Source, c.CreatedAt.UnixNano(), c.UpdatedAt.UnixNano(), ts(c.LastUsedAt)}
}

func scanClient(row interface{ Scan(...any) error }) (*storage.Client, error) {
	var c storage.Client
	var secretExp, lastUsed sql.NullInt64
	var created, updated int64
	var redirects, grants, responses, scopes, resources string
	err := row.Scan(&c.ID, &c.SecretHash, &secretExp, &c.Public, &c.Name, &redirects,
		&grants, &responses, &scopes, &resources, &c.TokenEndpointAuthMethod,
		&c.JWKS, &c.JWKSURI, &c.ApplicationType, &c.Metadata, &c.RegistrationTokenHash,
		&c.Source, &created, &updated, &lastUsed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, storage.ErrNotFound
	}
	if err != nil {
		return nil, mapErr(err)
	}
	c.SecretExpiresAt, c.LastUsedAt = untime(secretExp), untime(lastUsed)
	c.CreatedAt, c.UpdatedAt = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	for _, f := range []struct {
		dst *[]string
		src string
	}{{&c.RedirectURIs, redirects}, {&c.GrantTypes, grants}, {&c.ResponseTypes, responses}, {&c.Scopes, scopes}, {&c.Resources, resources}} {
		if *f.dst, err = unlist(f.src); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

// GetClient implements storage.ClientStore.
func (s *Store) GetClient(ctx context.Context, id string) (*storage.Client, error) {
	return scanClient(s.rq(ctx).QueryRowContext(ctx, `SELECT `+clientCols+` FROM clients WHERE id = ?`, id))
}

// CreateClient implements storage.ClientStore. A zero CreatedAt or UpdatedAt
// is stored as the current time.
func (s *Store) CreateClient(ctx context.Context, c *storage.Client) error {
	n := *c
	if n.CreatedAt.IsZero() {
		n.CreatedAt = time.Now()
	}
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = n.CreatedAt
	}
	if err := checkLists(n.RedirectURIs, n.GrantTypes, n.ResponseTypes, n.Scopes, n.Resources); err != nil {
		return err
	}
	_, err := s.execCount(ctx, `INSERT INTO clients (`+clientCols+`) VALUES
		(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, clientArgs(&n)...)
	return err
}

// UpdateClient implements storage.ClientStore: read, update and write in one
// IMMEDIATE transaction (or the caller's).
func (s *Store) UpdateClient(ctx context.Context, id string, update func(storage.Client) (storage.Client, error)) error {
	run := func(q querier) error {
		old, err := scanClient(q.QueryRowContext(ctx, `SELECT `+clientCols+` FROM clients WHERE id = ?`, id))
		if err != nil {
			return err
		}
		n, err := update(*old)
		if err != nil {
			return err // unchanged, as storage.ClientStore promises
		}
		n.ID = id
		if err := checkLists(n.RedirectURIs, n.GrantTypes, n.ResponseTypes, n.Scopes, n.Resources); err != nil {
			return err
		}
		_, err = q.ExecContext(ctx, `UPDATE clients SET secret_hash=?2, secret_expires_at=?3, public=?4, name=?5,
			redirect_uris=?6, grant_types=?7, response_types=?8, scopes=?9, resources=?10,
			token_endpoint_auth_method=?11, jwks=?12, jwks_uri=?13, application_type=?14, metadata=?15,
			registration_token_hash=?16, source=?17, created_at=?18, updated_at=?19, last_used_at=?20
			WHERE id = ?1`, clientArgs(&n)...)
		return mapErr(err)
	}
	if t := s.txFrom(ctx); t != nil {
		return run(t.conn)
	}
	t, err := s.begin(ctx)
	if err != nil {
		return err
	}
	err = run(t.conn)
	if eerr := t.end(err == nil); err == nil {
		err = eerr
	}
	return err
}

// execCount runs a write and returns the rows it changed: on the
// transaction in ctx, or else through the group committer.
func (s *Store) execCount(ctx context.Context, query string, args ...any) (int, error) {
	if t := s.txFrom(ctx); t != nil {
		res, err := s.wexec(ctx, t.conn, query, args...)
		if err != nil {
			return 0, mapErr(err)
		}
		n, err := res.RowsAffected()
		return int(n), mapErr(err)
	}
	return s.submit(ctx, query, args)
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

// DeleteClient implements storage.ClientStore.
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	return s.inTx(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, `DELETE FROM clients WHERE id = ?`, id)
		if err != nil {
			return mapErr(err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return cmpErr(err, storage.ErrNotFound)
		}
		_, err = revokeWhere(ctx, q, storage.GrantFilter{ClientID: id})
		return err
	})
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return mapErr(err)
	}
	return otherwise
}

// inTx runs f on the transaction in ctx, or else in a transaction of its
// own (BEGIN IMMEDIATE on the writer), committed when f succeeds.
func (s *Store) inTx(ctx context.Context, f func(q querier) error) error {
	if t := s.txFrom(ctx); t != nil {
		return f(t.conn)
	}
	t, err := s.begin(ctx)
	if err != nil {
		return err
	}
	err = f(t.conn)
	if eerr := t.end(err == nil); err == nil {
		err = eerr
	}
	return err
}

// grantWhere is the WHERE clause selecting the tokens of the grants f
// matches, and its arguments.
func grantWhere(f storage.GrantFilter) (string, []any) {
	var conds []string
	var args []any
	for _, c := range []struct{ col, v string }{{"client_id", f.ClientID}, {"subject", f.Subject}, {"request_id", f.RequestID}} {
		if c.v != "" {
			conds = append(conds, c.col+" = ?")
			args = append(args, c.v)
		}
	}
	if len(conds) == 0 {
		return "1", nil
	}
	return strings.Join(conds, " AND "), args
}

// grantRows is the condition on tokens rows that selects every code and
// token of the grants where matches: a grant matches when any of its rows
// does (an access token another client got by token exchange is in the
// grant it was exchanged from), and is revoked whole, so no row keeps
// working under a status index the revocation marks invalid. The kind
// list lets the (kind, request_id) index serve the outer lookup.
func grantRows(where string) string {
	return `kind IN ('` + string(storage.KindAuthorizeCode) + `', '` + string(storage.KindPKCE) + `', '` +
		string(storage.KindAccessToken) + `', '` + string(storage.KindRefreshToken) + `')
		AND request_id IN (SELECT request_id FROM tokens WHERE ` + where + `)`
}

// revokeWhere deactivates the active tokens of the grants f matches,
// recording their status indices StatusInvalid first, and returns how
// many grants that touched. q is a transaction.
func revokeWhere(ctx context.Context, q querier, f storage.GrantFilter) (int, error) {
	where, args := grantWhere(f)
	where = grantRows(where)
	if _, err := q.ExecContext(ctx, `INSERT INTO token_status (idx, status, expires_at)
		SELECT status_idx, 1, MAX(expires_at) FROM tokens WHERE `+where+` AND active AND status_idx > 0 GROUP BY status_idx
		ON CONFLICT (idx) DO UPDATE SET expires_at = MAX(COALESCE(expires_at, 0), COALESCE(excluded.expires_at, 0))`, args...); err != nil {
		return 0, mapErr(err)
	}
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(DISTINCT request_id) FROM tokens WHERE `+where+` AND active`, args...).Scan(&n); err != nil {
		return 0, mapErr(err)
	}
	if _, err := q.ExecContext(ctx, `UPDATE tokens SET active = 0 WHERE `+where+` AND active`, args...); err != nil {
		return 0, mapErr(err)
	}
	return n, nil
}

// ListGrants implements storage.GrantStore.
func (s *Store) ListGrants(ctx context.Context, f storage.GrantFilter, now time.Time, limit int) ([]storage.Grant, error) {
	where, args := grantWhere(f)
	if limit <= 0 {
		limit = -1
	}
	args = append(args, now.UnixNano(), limit)
	rows, err := s.rq(ctx).QueryContext(ctx, `SELECT request_id, MAX(subject), MAX(client_id), MIN(created_at), MAX(created_at),
		MAX(expires_at), MAX(status_idx) FROM tokens WHERE `+where+` GROUP BY request_id
		HAVING SUM(active AND kind IN ('access', 'refresh') AND expires_at > ?) > 0
		ORDER BY MAX(created_at) DESC, request_id LIMIT ?`, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []storage.Grant
	for rows.Next() {
		var g storage.Grant
		var created, last, exp sql.NullInt64
		if err := rows.Scan(&g.RequestID, &g.Subject, &g.ClientID, &created, &last, &exp, &g.StatusIndex); err != nil {
			return nil, mapErr(err)
		}
		g.CreatedAt, g.LastUsedAt, g.ExpiresAt = untime(created), untime(last), untime(exp)
		out = append(out, g)
	}
	return out, mapErr(rows.Err())
}

// RevokeGrants implements storage.GrantStore in one transaction.
func (s *Store) RevokeGrants(ctx context.Context, f storage.GrantFilter) (int, error) {
	if f.IsZero() {
		return 0, storage.ErrInvalidFilter
	}
	var n int
	err := s.inTx(ctx, func(q querier) error {
		var err error
		if n, err = revokeWhere(ctx, q, f); err != nil {
			return err
		}
		if f.RequestID != "" {
			return nil
		}
		where, args := grantWhere(storage.GrantFilter{Subject: f.Subject, ClientID: f.ClientID})
		_, err = q.ExecContext(ctx, `DELETE FROM consents WHERE `+where, args...)
		return mapErr(err)
	})
	return n, err
}

// AllocateStatusIndices implements storage.StatusStore with one UPDATE.
func (s *Store) AllocateStatusIndices(ctx context.Context, n int) (int64, error) {
	if n < 1 {
		return 0, errors.New("sqlite: AllocateStatusIndices needs n >= 1")
	}
	var last int64
	err := s.inTx(ctx, func(q querier) error {
		return mapErr(q.QueryRowContext(ctx, `UPDATE status_counter SET last = last + ? WHERE id = 1 RETURNING last`, n).Scan(&last))
	})
	if err != nil {
		return 0, err
	}
	return last - int64(n) + 1, nil
}

// StatusList implements storage.StatusStore.
func (s *Store) StatusList(ctx context.Context, now time.Time) (int64, []int64, error) {
	q := s.rq(ctx)
	var last int64
	if err := q.QueryRowContext(ctx, `SELECT last FROM status_counter WHERE id = 1`).Scan(&last); err != nil {
		return 0, nil, mapErr(err)
	}
	rows, err := q.QueryContext(ctx, `SELECT idx FROM token_status WHERE status = 1 AND (expires_at IS NULL OR expires_at >= ?) ORDER BY idx`, now.UnixNano())
	if err != nil {
		return 0, nil, mapErr(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var idx int64
		if err := rows.Scan(&idx); err != nil {
			return 0, nil, mapErr(err)
		}
		out = append(out, idx)
	}
	return last, out, mapErr(rows.Err())
}

// DeleteExpiredStatuses implements storage.StatusStore. A limit <= 0
// deletes nothing.
func (s *Store) DeleteExpiredStatuses(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	return s.execCount(ctx, `DELETE FROM token_status WHERE idx IN (
		SELECT idx FROM token_status WHERE expires_at < ? LIMIT ?)`, before.UnixNano(), limit)
}

// TouchClient implements storage.ClientStore; ErrNotFound for an unknown id.
// A stored LastUsedAt within storage.TouchGranularity of at is kept.
func (s *Store) TouchClient(ctx context.Context, id string, at time.Time) error {
	// Read first, on the read pool: a recent last_used_at (the usual case
	// for a busy client) needs no turn on the single writer connection.
	var last sql.NullInt64
	err := s.rq(ctx).QueryRowContext(ctx, `SELECT last_used_at FROM clients WHERE id = ?`, id).Scan(&last)
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
	_, err = s.execCount(ctx, `UPDATE clients SET last_used_at = ?2
		WHERE id = ?1 AND (last_used_at IS NULL OR last_used_at < ?3)`, id, at.UnixNano(), cutoff)
	return err
}

// CountClients implements storage.ClientStore.
func (s *Store) CountClients(ctx context.Context, source string) (int, error) {
	var n int
	err := s.rq(ctx).QueryRowContext(ctx, `SELECT count(*) FROM clients WHERE ?1 = '' OR source = ?1`, source).Scan(&n)
	return n, mapErr(err)
}

// ListClients implements storage.ClientStore.
func (s *Store) ListClients(ctx context.Context, afterID string, limit int) ([]storage.Client, error) {
	out := []storage.Client{}
	if limit <= 0 {
		return out, nil
	}
	rows, err := s.rq(ctx).QueryContext(ctx, `SELECT `+clientCols+` FROM clients WHERE id > ? ORDER BY id LIMIT ?`, afterID, limit)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		c, err := scanClient(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *c)
	}
	return out, mapErr(rows.Err())
}

// ReapClients implements storage.ClientStore. A limit <= 0 deletes nothing.
func (s *Store) ReapClients(ctx context.Context, neverUsedBefore, idleBefore time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	var n int
	err := s.inTx(ctx, func(q querier) error {
		rows, err := q.QueryContext(ctx, `DELETE FROM clients WHERE id IN (
			SELECT id FROM clients WHERE source IN ('dcr', 'cimd')
			AND ((last_used_at IS NULL AND created_at < ?1) OR last_used_at < ?2)
			ORDER BY id LIMIT ?3) RETURNING id`, neverUsedBefore.UnixNano(), idleBefore.UnixNano(), limit)
		if err != nil {
			return mapErr(err)
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return mapErr(err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return mapErr(err)
		}
		for _, id := range ids {
			if _, err := revokeWhere(ctx, q, storage.GrantFilter{ClientID: id}); err != nil {
				return err
			}
		}
		n = len(ids)
		return nil
	})
	return n, err
}

const tokenCols = `kind, signature, request_id, client_id, subject, active, created_at, expires_at, rotated_at, data, status_idx`

// CreateToken implements storage.TokenStore.
func (s *Store) CreateToken(ctx context.Context, t *storage.Token) error {
	_, err := s.execCount(ctx, `INSERT INTO tokens (`+tokenCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		string(t.Kind), t.Signature, t.RequestID, t.ClientID, t.Subject, boolInt(t.Active),
		ts(t.CreatedAt), ts(t.ExpiresAt), ts(t.RotatedAt), t.Data, t.StatusIndex)
	return err
}

// GetToken implements storage.TokenStore.
func (s *Store) GetToken(ctx context.Context, kind storage.TokenKind, signature string) (*storage.Token, error) {
	var t storage.Token
	var k string
	var created, expires, rotated sql.NullInt64
	err := s.rq(ctx).QueryRowContext(ctx, `SELECT `+tokenCols+` FROM tokens WHERE kind = ? AND signature = ?`, string(kind), signature).
		Scan(&k, &t.Signature, &t.RequestID, &t.ClientID, &t.Subject, &t.Active, &created, &expires, &rotated, &t.Data, &t.StatusIndex)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, storage.ErrNotFound
	}
	if err != nil {
		return nil, mapErr(err)
	}
	t.Kind = storage.TokenKind(k)
	t.CreatedAt, t.ExpiresAt, t.RotatedAt = untime(created), untime(expires), untime(rotated)
	return &t, nil
}

// GetTokenWithPerson implements storage.TokenPersonReader in one
// statement: the token's row and, by primary key, the three columns of its
// subject's users row that say whether the person is active.
func (s *Store) GetTokenWithPerson(ctx context.Context, kind storage.TokenKind, signature string) (*storage.Token, storage.PersonStatus, error) {
	var t storage.Token
	var k string
	var created, expires, rotated sql.NullInt64
	var ps storage.PersonStatus
	err := s.rq(ctx).QueryRowContext(ctx, `SELECT t.kind, t.signature, t.request_id, t.client_id, t.subject, t.active,
			t.created_at, t.expires_at, t.rotated_at, t.data, t.status_idx,
			u.subject IS NOT NULL, COALESCE(u.upstream, ''), COALESCE(u.disabled, 0)
		FROM tokens t LEFT JOIN users u ON t.subject <> '' AND u.subject = t.subject
		WHERE t.kind = ? AND t.signature = ?`, string(kind), signature).
		Scan(&k, &t.Signature, &t.RequestID, &t.ClientID, &t.Subject, &t.Active, &created, &expires, &rotated, &t.Data, &t.StatusIndex,
			&ps.Recorded, &ps.Upstream, &ps.Disabled)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, storage.PersonStatus{}, storage.ErrNotFound
	}
	if err != nil {
		return nil, storage.PersonStatus{}, mapErr(err)
	}
	t.Kind = storage.TokenKind(k)
	t.CreatedAt, t.ExpiresAt, t.RotatedAt = untime(created), untime(expires), untime(rotated)
	return &t, ps, nil
}

// inactiveOrMissing tells why a conditional UPDATE changed no row.
func (s *Store) inactiveOrMissing(ctx context.Context, kind storage.TokenKind, signature string) error {
	var n int
	err := s.rq(ctx).QueryRowContext(ctx, `SELECT count(*) FROM tokens WHERE kind = ? AND signature = ?`, string(kind), signature).Scan(&n)
	if err != nil {
		return mapErr(err)
	}
	if n == 0 {
		return storage.ErrNotFound
	}
	return storage.ErrInactive
}

// DeactivateToken implements storage.TokenStore with one conditional UPDATE.
func (s *Store) DeactivateToken(ctx context.Context, kind storage.TokenKind, signature string) error {
	n, err := s.execCount(ctx, `UPDATE tokens SET active = 0 WHERE kind = ? AND signature = ? AND active`, string(kind), signature)
	if err != nil {
		return err
	}
	if n == 0 {
		return s.inactiveOrMissing(ctx, kind, signature)
	}
	return nil
}

// RotateToken implements storage.TokenStore with one conditional UPDATE: an
// active token never rotated, or (grace > 0) rotated at or after now-grace;
// the first rotation time is kept.
func (s *Store) RotateToken(ctx context.Context, kind storage.TokenKind, signature string, now time.Time, grace time.Duration) error {
	n, err := s.execCount(ctx, `UPDATE tokens SET rotated_at = COALESCE(rotated_at, ?3)
		WHERE kind = ?1 AND signature = ?2 AND active
		AND (rotated_at IS NULL OR (?4 AND rotated_at >= ?5))`,
		string(kind), signature, now.UnixNano(), boolInt(grace > 0), now.Add(-grace).UnixNano())
	if err != nil {
		return err
	}
	if n == 0 {
		return s.inactiveOrMissing(ctx, kind, signature)
	}
	return nil
}

// RevokeTokens implements storage.TokenStore.
// The statuses are recorded by a statement of their own, before the
// tokens are deactivated, so a failure in between leaves the tokens
// refused by resource servers rather than accepted.
func (s *Store) RevokeTokens(ctx context.Context, kind storage.TokenKind, requestID string) error {
	if _, err := s.execCount(ctx, `INSERT INTO token_status (idx, status, expires_at)
		SELECT status_idx, 1, MAX(expires_at) FROM tokens WHERE kind = ? AND request_id = ? AND active AND status_idx > 0 GROUP BY status_idx
		ON CONFLICT (idx) DO UPDATE SET expires_at = MAX(COALESCE(expires_at, 0), COALESCE(excluded.expires_at, 0))`,
		string(kind), requestID); err != nil {
		return err
	}
	_, err := s.execCount(ctx, `UPDATE tokens SET active = 0 WHERE kind = ? AND request_id = ? AND active`, string(kind), requestID)
	return err
}

// DeleteToken implements storage.TokenStore.
func (s *Store) DeleteToken(ctx context.Context, kind storage.TokenKind, signature string) error {
	return s.execOne(ctx, `DELETE FROM tokens WHERE kind = ? AND signature = ?`, string(kind), signature)
}

// DeleteExpiredTokens implements storage.TokenStore. A limit <= 0 deletes
// nothing.
func (s *Store) DeleteExpiredTokens(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	return s.execCount(ctx, `DELETE FROM tokens WHERE rowid IN (
		SELECT rowid FROM tokens WHERE expires_at < ? LIMIT ?)`, before.UnixNano(), limit)
}

const consentCols = `subject, client_id, resource, scopes, redirect_uris, granted_at, expires_at`

func scanConsents(rows *sql.Rows, err error) ([]storage.Consent, error) {
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []storage.Consent
	for rows.Next() {
		var c storage.Consent
		var scopes, redirects string
		var granted, expires sql.NullInt64
		if err := rows.Scan(&c.Subject, &c.ClientID, &c.Resource, &scopes, &redirects, &granted, &expires); err != nil {
			return nil, mapErr(err)
		}
		if c.Scopes, err = unlist(scopes); err != nil {
			return nil, err
		}
		if c.RedirectURIs, err = unlist(redirects); err != nil {
			return nil, err
		}
		c.GrantedAt, c.ExpiresAt = untime(granted), untime(expires)
		out = append(out, c)
	}
	return out, mapErr(rows.Err())
}

// GetConsent implements storage.ConsentStore.
func (s *Store) GetConsent(ctx context.Context, subject, clientID, resource string) (*storage.Consent, error) {
	cs, err := scanConsents(s.rq(ctx).QueryContext(ctx, `SELECT `+consentCols+` FROM consents
		WHERE subject = ? AND client_id = ? AND resource = ?`, subject, clientID, resource))
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, storage.ErrNotFound
	}
	return &cs[0], nil
}

// PutConsent implements storage.ConsentStore.
func (s *Store) PutConsent(ctx context.Context, c *storage.Consent) error {
	if err := checkLists(c.Scopes, c.RedirectURIs); err != nil {
		return err
	}
	_, err := s.execCount(ctx, `INSERT INTO consents (`+consentCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (subject, client_id, resource) DO UPDATE
		SET scopes = excluded.scopes, redirect_uris = excluded.redirect_uris,
			granted_at = excluded.granted_at, expires_at = excluded.expires_at`,
		c.Subject, c.ClientID, c.Resource, list(c.Scopes), list(c.RedirectURIs), ts(c.GrantedAt), ts(c.ExpiresAt))
	return err
}

// DeleteConsents implements storage.ConsentStore.
func (s *Store) DeleteConsents(ctx context.Context, subject, clientID string) error {
	_, err := s.execCount(ctx, `DELETE FROM consents WHERE subject = ?1 AND (?2 = '' OR client_id = ?2)`, subject, clientID)
	return err
}

// ListConsents implements storage.ConsentStore, ordered by client id then
// resource.
func (s *Store) ListConsents(ctx context.Context, subject string) ([]storage.Consent, error) {
	return scanConsents(s.rq(ctx).QueryContext(ctx, `SELECT `+consentCols+` FROM consents
		WHERE subject = ? ORDER BY client_id, resource`, subject))
}

// DeleteExpiredConsents implements storage.ConsentStore. A limit <= 0
// deletes nothing.
func (s *Store) DeleteExpiredConsents(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	return s.execCount(ctx, `DELETE FROM consents WHERE rowid IN (
		SELECT rowid FROM consents WHERE expires_at < ? LIMIT ?)`, before.UnixNano(), limit)
}

// ListKeys implements storage.KeyStore: newest CreatedAt first, ties by ID
// descending.
func (s *Store) ListKeys(ctx context.Context) ([]storage.SigningKey, error) {
	rows, err := s.rq(ctx).QueryContext(ctx, `SELECT id, algorithm, public_jwk, private_sealed, created_at, retired_at
		FROM signing_keys ORDER BY created_at DESC, id DESC`)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	out := []storage.SigningKey{}
	for rows.Next() {
		var k storage.SigningKey
		var created, retired sql.NullInt64
		if err := rows.Scan(&k.ID, &k.Algorithm, &k.PublicJWK, &k.PrivateSealed, &created, &retired); err != nil {
			return nil, mapErr(err)
		}
		k.CreatedAt, k.RetiredAt = untime(created), untime(retired)
		out = append(out, k)
	}
	return out, mapErr(rows.Err())
}

// CreateKey implements storage.KeyStore.
func (s *Store) CreateKey(ctx context.Context, k *storage.SigningKey) error {
	_, err := s.execCount(ctx, `INSERT INTO signing_keys (id, algorithm, public_jwk, private_sealed, created_at, retired_at)
		VALUES (?, ?, ?, ?, ?, ?)`, k.ID, k.Algorithm, k.PublicJWK, k.PrivateSealed, ts(k.CreatedAt), ts(k.RetiredAt))
	return err
}

// RetireKeys implements storage.KeyStore.
func (s *Store) RetireKeys(ctx context.Context, keepID string, at time.Time) error {
	_, err := s.execCount(ctx, `UPDATE signing_keys SET retired_at = ? WHERE id <> ? AND retired_at IS NULL`, ts(at), keepID)
	return err
}

// DeleteKey implements storage.KeyStore.
func (s *Store) DeleteKey(ctx context.Context, id string) error {
	return s.execOne(ctx, `DELETE FROM signing_keys WHERE id = ?`, id)
}

// UseJTI implements storage.JTIStore with one upsert that replaces only an
// expired record.
func (s *Store) UseJTI(ctx context.Context, id string, expiresAt time.Time) error {
	n, err := s.execCount(ctx, `INSERT INTO jtis (id, expires_at) VALUES (?1, ?2)
		ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at WHERE jtis.expires_at <= ?3`,
		id, nanos(expiresAt), time.Now().UnixNano())
	if err != nil {
		return err
	}
	if n == 0 {
		return storage.ErrAlreadyUsed
	}
	return nil
}

// DeleteExpiredJTIs implements storage.JTIStore. A limit <= 0 deletes nothing.
func (s *Store) DeleteExpiredJTIs(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	return s.execCount(ctx, `DELETE FROM jtis WHERE rowid IN (
		SELECT rowid FROM jtis WHERE expires_at < ? LIMIT ?)`, before.UnixNano(), limit)
}

// writeReq is one single write waiting for the group committer.
type writeReq struct {
	ctx   context.Context
	query string
	args  []any
	done  chan writeRes
}

type writeRes struct {
	n   int
	err error
}

var errClosed = fmt.Errorf("%w: sqlite: store closed", storage.ErrUnavailable)

// submit hands a write to the committer and waits for its durable result.
func (s *Store) submit(ctx context.Context, query string, args []any) (int, error) {
	req := &writeReq{ctx: ctx, query: query, args: args, done: make(chan writeRes, 1)}
	select {
	case <-s.stop:
		return 0, errClosed
	default:
	}
	select {
	case s.writes <- req:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-s.stop:
		return 0, errClosed
	}
	select {
	case r := <-req.done:
		return r.n, r.err
	case <-s.done:
		// The committer returned; it may have answered just before.
		select {
		case r := <-req.done:
			return r.n, r.err
		default:
			return 0, errClosed
		}
	}
}

// commitLoop runs batches of single writes until Close.
func (s *Store) commitLoop() {
	defer close(s.done)
	for {
		var batch []*writeReq
		select {
		case req := <-s.writes:
			batch = append(batch, req)
		case <-s.stop:
			return
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case req := <-s.writes:
				batch = append(batch, req)
			default:
				break drain
			}
		}
		s.runBatch(batch)
	}
}

// runBatch runs batch in one IMMEDIATE transaction. A statement that fails
// on a constraint fails alone (SQLite undoes just that statement); any other
// failure, or a failed COMMIT, fails the whole batch and rolls it back, so a
// caller is told success only for a write that is committed.
func (s *Store) runBatch(batch []*writeReq) {
	reply := func(reqs []*writeReq, err error) {
		for _, r := range reqs {
			r.done <- writeRes{err: err}
		}
	}
	ctx := context.Background() // not a caller's: the batch is shared
	conn, err := s.writer(ctx)
	if err != nil {
		reply(batch, mapErr(err))
		return
	}
	defer s.release(conn)
	if _, err := s.wexec(ctx, conn, "BEGIN IMMEDIATE"); err != nil {
		reply(batch, mapErr(err))
		return
	}
	results := make([]writeRes, len(batch))
	for i, req := range batch {
		if err := req.ctx.Err(); err != nil {
			results[i] = writeRes{err: err} // given up before it ran: not run
			continue
		}
		// Not req.ctx: interrupting a statement inside the shared
		// transaction could roll back the others' writes.
		res, err := s.wexec(ctx, conn, req.query, req.args...)
		if err != nil {
			if isConstraint(err) {
				results[i] = writeRes{err: mapErr(err)}
				continue
			}
			s.wexec(ctx, conn, "ROLLBACK")
			reply(batch, mapErr(err))
			return
		}
		n, err := res.RowsAffected()
		results[i] = writeRes{n: int(n), err: mapErr(err)}
	}
	if _, err := s.wexec(ctx, conn, "COMMIT"); err != nil {
		s.wexec(ctx, conn, "ROLLBACK")
		reply(batch, mapErr(err))
		return
	}
	for i, req := range batch {
		req.done <- results[i]
	}
}

func isConstraint(err error) bool {
	var se *sqlite3.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlitelib.SQLITE_CONSTRAINT
}

// UpdateCounters implements storage.CounterStore inside one BEGIN IMMEDIATE
// transaction, which every writer of the file (this process or another)
// waits for.
func (s *Store) UpdateCounters(ctx context.Context, keys []string, now time.Time, update func([]storage.Counter) ([]storage.Counter, error)) error {
	run := func(q querier) error {
		in := make([]storage.Counter, len(keys))
		for i, k := range keys {
			c := storage.Counter{Key: k}
			var until, expires sql.NullInt64
			err := q.QueryRowContext(ctx, `SELECT count, until, expires_at FROM counters WHERE key = ?`, k).Scan(&c.Count, &until, &expires)
			switch {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return mapErr(err)
			default:
				c.Until, c.ExpiresAt = untime(until), untime(expires)
				if !c.ExpiresAt.After(now) {
					c = storage.Counter{Key: k}
				}
			}
			in[i] = c
		}
		out, err := update(in)
		if err != nil {
			return err
		}
		if len(out) != len(keys) {
			return errors.New("sqlite: UpdateCounters: update returned the wrong number of counters")
		}
		for i, k := range keys {
			c := out[i]
			if c.ExpiresAt.IsZero() {
				_, err = q.ExecContext(ctx, `DELETE FROM counters WHERE key = ?`, k)
			} else {
				_, err = q.ExecContext(ctx, `INSERT INTO counters (key, count, until, expires_at) VALUES (?1, ?2, ?3, ?4)
					ON CONFLICT (key) DO UPDATE SET count = ?2, until = ?3, expires_at = ?4`, k, c.Count, ts(c.Until), ts(c.ExpiresAt))
			}
			if err != nil {
				return mapErr(err)
			}
		}
		return nil
	}
	if !utf8Strings(keys) {
		return errors.New("sqlite: counter key is not valid UTF-8")
	}
	if t := s.txFrom(ctx); t != nil {
		return run(t.conn)
	}
	t, err := s.begin(ctx)
	if err != nil {
		return err
	}
	err = run(t.conn)
	if eerr := t.end(err == nil); err == nil {
		err = eerr
	}
	return err
}

func utf8Strings(ss []string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// DeleteExpiredCounters implements storage.CounterStore. A limit <= 0
// deletes nothing.
func (s *Store) DeleteExpiredCounters(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	return s.execCount(ctx, `DELETE FROM counters WHERE key IN (
		SELECT key FROM counters WHERE expires_at IS NULL OR expires_at < ? LIMIT ?)`, before.UnixNano(), limit)
}

const sessionCols = `id, subject, created_at, last_seen_at, idle_expires_at, expires_at, user_agent, address`

func scanSessions(rows *sql.Rows, err error) ([]storage.Session, error) {
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []storage.Session
	for rows.Next() {
		var x storage.Session
		var created, seen, idle, expires sql.NullInt64
		if err := rows.Scan(&x.ID, &x.Subject, &created, &seen, &idle, &expires, &x.UserAgent, &x.Address); err != nil {
			return nil, mapErr(err)
		}
		x.CreatedAt, x.LastSeenAt, x.IdleExpiresAt, x.ExpiresAt = untime(created), untime(seen), untime(idle), untime(expires)
		out = append(out, x)
	}
	return out, mapErr(rows.Err())
}

// CreateSession implements storage.SessionStore.
func (s *Store) CreateSession(ctx context.Context, x *storage.Session) error {
	if !utf8Strings([]string{x.ID, x.Subject, x.UserAgent, x.Address}) {
		return errors.New("sqlite: session field is not valid UTF-8")
	}
	_, err := s.execCount(ctx, `INSERT INTO sessions (`+sessionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		x.ID, x.Subject, x.CreatedAt.UnixNano(), x.LastSeenAt.UnixNano(), x.IdleExpiresAt.UnixNano(), x.ExpiresAt.UnixNano(), x.UserAgent, x.Address)
	return err
}

// GetSession implements storage.SessionStore.
func (s *Store) GetSession(ctx context.Context, id string) (*storage.Session, error) {
	list, err := scanSessions(s.rq(ctx).QueryContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ?`, id))
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, storage.ErrNotFound
	}
	return &list[0], nil
}

// TouchSession implements storage.SessionStore.
func (s *Store) TouchSession(ctx context.Context, id string, lastSeen, idleExpiresAt time.Time) error {
	return s.execOne(ctx, `UPDATE sessions SET last_seen_at = ?, idle_expires_at = ? WHERE id = ?`, lastSeen.UnixNano(), idleExpiresAt.UnixNano(), id)
}

// ListSessions implements storage.SessionStore, newest first.
func (s *Store) ListSessions(ctx context.Context, subject string) ([]storage.Session, error) {
	return scanSessions(s.rq(ctx).QueryContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE subject = ? ORDER BY created_at DESC, id`, subject))
}

// DeleteSession implements storage.SessionStore.
func (s *Store) DeleteSession(ctx context.Context, subject, id string) error {
	_, err := s.execCount(ctx, `DELETE FROM sessions WHERE id = ?2 AND (?1 = '' OR subject = ?1)`, subject, id)
	return err
}

// DeleteExpiredSessions implements storage.SessionStore. A limit <= 0
// deletes nothing.
func (s *Store) DeleteExpiredSessions(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	return s.execCount(ctx, `DELETE FROM sessions WHERE id IN (
		SELECT id FROM sessions WHERE expires_at < ?1 OR idle_expires_at < ?1 LIMIT ?2)`, before.UnixNano(), limit)
}

const userCols = `subject, upstream, upstream_subject, name, email, groups, claims,
	first_seen, last_seen, disabled, upstream_refresh, checked_at`

func scanUser(row interface{ Scan(...any) error }) (*storage.User, error) {
	var u storage.User
	var groups, claims string
	var first, last, checked sql.NullInt64
	err := row.Scan(&u.Subject, &u.Upstream, &u.UpstreamSubject, &u.Name, &u.Email, &groups, &claims,
		&first, &last, &u.Disabled, &u.UpstreamRefresh, &checked)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, storage.ErrNotFound
	}
	if err != nil {
		return nil, mapErr(err)
	}
	u.FirstSeen, u.LastSeen, u.CheckedAt = untime(first), untime(last), untime(checked)
	if u.Groups, err = unlist(groups); err != nil {
		return nil, err
	}
	if u.Claims, err = unclaims(claims); err != nil {
		return nil, err
	}
	if len(u.UpstreamRefresh) == 0 {
		u.UpstreamRefresh = nil
	}
	return &u, nil
}

// claimsJSON encodes claims as a JSON object; it refuses what JSON cannot
// keep exactly.
func claimsJSON(claims map[string][]string) (string, error) {
	if claims == nil {
		return "{}", nil
	}
	for k, v := range claims {
		if err := checkLists([]string{k}, v); err != nil {
			return "", err
		}
	}
	b, err := json.Marshal(claims)
	return string(b), err
}

func unclaims(s string) (map[string][]string, error) {
	var out map[string][]string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("sqlite: corrupt claims column: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// blobOrNil stores an empty byte slice as NULL.
func blobOrNil(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// RecordLogin implements storage.UserStore: one upsert, then the stored
// record is read back (on the transaction in ctx, if any).
func (s *Store) RecordLogin(ctx context.Context, u *storage.User) (*storage.User, error) {
	if !utf8Strings([]string{u.Subject, u.Upstream, u.UpstreamSubject, u.Name, u.Email}) {
		return nil, ErrInvalidUTF8
	}
	if err := checkLists(u.Groups); err != nil {
		return nil, err
	}
	claims, err := claimsJSON(u.Claims)
	if err != nil {
		return nil, err
	}
	last := u.LastSeen
	if last.IsZero() {
		last = time.Now()
	}
	_, err = s.execCount(ctx, `INSERT INTO users (`+userCols+`) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, 0, ?9, ?10)
		ON CONFLICT (subject) DO UPDATE SET upstream = excluded.upstream, upstream_subject = excluded.upstream_subject,
			name = excluded.name, email = excluded.email, groups = excluded.groups, claims = excluded.claims,
			first_seen = COALESCE(users.first_seen, excluded.first_seen), last_seen = excluded.last_seen,
			upstream_refresh = COALESCE(excluded.upstream_refresh, users.upstream_refresh),
			checked_at = COALESCE(excluded.checked_at, users.checked_at)`,
		u.Subject, u.Upstream, u.UpstreamSubject, u.Name, u.Email, list(u.Groups), claims,
		last.UnixNano(), blobOrNil(u.UpstreamRefresh), ts(u.CheckedAt))
	if err != nil {
		return nil, err
	}
	return s.readUser(ctx, u.Subject)
}

// readUser reads one record: on the transaction in ctx, or on the read
// pool, whose next read transaction sees every write that has returned.
func (s *Store) readUser(ctx context.Context, subject string) (*storage.User, error) {
	return scanUser(s.rq(ctx).QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE subject = ?`, subject))
}

// GetUser implements storage.UserStore.
func (s *Store) GetUser(ctx context.Context, subject string) (*storage.User, error) {
	return s.readUser(ctx, subject)
}

// ListUsers implements storage.UserStore. Subjects compare bytewise (the
// BINARY collation).
func (s *Store) ListUsers(ctx context.Context, afterSubject string, limit int) ([]storage.User, error) {
	out := []storage.User{}
	if limit <= 0 {
		return out, nil
	}
	rows, err := s.rq(ctx).QueryContext(ctx, `SELECT `+userCols+` FROM users WHERE subject > ? ORDER BY subject LIMIT ?`, afterSubject, limit)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *u)
	}
	return out, mapErr(rows.Err())
}

// SetUserDisabled implements storage.UserStore.
func (s *Store) SetUserDisabled(ctx context.Context, subject string, disabled bool) error {
	if !utf8.ValidString(subject) {
		return ErrInvalidUTF8
	}
	_, err := s.execCount(ctx, `INSERT INTO users (subject, disabled) VALUES (?1, ?2)
		ON CONFLICT (subject) DO UPDATE SET disabled = excluded.disabled`, subject, boolInt(disabled))
	return err
}

// UpdateUpstreamSession implements storage.UserStore.
func (s *Store) UpdateUpstreamSession(ctx context.Context, subject string, sealedRefresh []byte, checkedAt time.Time, groups []string, claims map[string][]string) error {
	if err := checkLists(groups); err != nil {
		return err
	}
	c, err := claimsJSON(claims)
	if err != nil {
		return err
	}
	return s.execOne(ctx, `UPDATE users SET upstream_refresh = COALESCE(?2, upstream_refresh), checked_at = ?3,
		groups = ?4, claims = ?5 WHERE subject = ?1`, subject, blobOrNil(sealedRefresh), ts(checkedAt), list(groups), c)
}
