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
// and sealed data as blobs. The statements and the record-to-row code are
// shared with the PostgreSQL backend (storage/internal/sqlstore); what is
// SQLite's own (encoding, error mapping, the statements it writes
// otherwise) is in dialect.go.
//
// The single-use rules it enforces are those of RFC 6749 §4.1.2 (codes),
// RFC 9700 §4.14.2 (refresh rotation and reuse detection) and RFC 7523 §3
// (jti of client assertions).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sqlite3 "modernc.org/sqlite"
	sqlitelib "modernc.org/sqlite/lib"

	"github.com/mcpauth/mcpauth/migrations"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/internal/sqlstore"
)

// Store is the SQLite backend. It is safe for concurrent use. Its storage
// methods are those of the SQL backends' shared implementation
// (storage/internal/sqlstore), run through this package's dialect
// (dialect.go); TouchClient and RevokeTokens are its own.
type Store struct {
	*core

	w *sql.DB // one connection: every write
	r *sql.DB // reads outside transactions

	writes chan *writeReq // single writes, for the group committer
	stop   chan struct{}  // closed by Close
	done   chan struct{}  // closed when the committer has returned

	stmts stmtCache    // the writer connection's prepared statements
	held  atomic.Int32 // writer connections taken and not yet given back
	reads sync.Map     // query -> *sql.Stmt of the read pool
}

// core is the shared implementation, embedded under a name of this
// package so that it adds no exported field.
type core = sqlstore.Store

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
	s.core = sqlstore.New(dialect{s}, syntax)
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

// inTx runs f on the transaction in ctx, or else in a transaction of its
// own (BEGIN IMMEDIATE on the writer), committed when f succeeds.
func (s *Store) inTx(ctx context.Context, f func(q sqlstore.Querier) error) error {
	if t := s.txFrom(ctx); t != nil {
		return f((*txQ)(t))
	}
	t, err := s.begin(ctx)
	if err != nil {
		return err
	}
	err = f((*txQ)(t))
	if eerr := t.end(err == nil); err == nil {
		err = eerr
	}
	return err
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
