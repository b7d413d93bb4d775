package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A transaction of this store (storage.Transactional) costs as few round
// trips as its statements allow. It holds a connection of the pool from
// BeginTX to Commit or Rollback and sends, in one pipeline ending with one
// Sync (PostgreSQL's extended query protocol, §55.2.4 "Pipelining"):
//
//   - BEGIN together with the transaction's first statement (pgx
//     Batch.BeginTx), instead of on its own;
//   - statements whose only result is their error (token inserts, queue)
//     together with the next statement that returns something, or with
//     COMMIT.
//
// A code redemption (UPDATE of the code, INSERT of the access and the
// refresh token) is then two round trips, [BEGIN, UPDATE] and [INSERT,
// INSERT, COMMIT], instead of five. The statements run in the order they
// were called, so the transaction reads its own writes, and the first
// error of a pipeline is returned by the call that sent it (PostgreSQL
// skips the rest of the pipeline and aborts the transaction); the caller
// then rolls back, as after any failed statement. Statements are prepared
// once per connection by pgx's statement cache.

type txKey struct{}

// queued is a statement waiting to be sent.
type queued struct {
	sql  string
	args []any
}

type pgTx struct {
	s       *Store
	conn    *pgxpool.Conn
	tx      pgx.Tx // nil until BEGIN has been sent
	pending []queued
	done    bool
}

func (s *Store) txFrom(ctx context.Context) *pgTx {
	t, _ := ctx.Value(txKey{}).(*pgTx)
	if t == nil || t.s != s || t.done {
		return nil
	}
	return t
}

// q returns the transaction in ctx, or the pool.
func (s *Store) q(ctx context.Context) querier {
	if t := s.txFrom(ctx); t != nil {
		return t
	}
	return s.pool
}

// BeginTX implements storage.Transactional. A context that already carries a
// transaction of this store is returned unchanged (no nesting). It takes a
// connection from the pool; BEGIN is sent with the first statement.
func (s *Store) BeginTX(ctx context.Context) (context.Context, error) {
	if s.txFrom(ctx) != nil {
		return ctx, nil
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return ctx, mapErr(err)
	}
	return context.WithValue(ctx, txKey{}, &pgTx{s: s, conn: conn}), nil
}

// ErrNoTransaction is returned by Commit and Rollback when ctx carries no open
// transaction of this store.
var ErrNoTransaction = errors.New("postgres: no open transaction in context")

// Commit implements storage.Transactional: the queued statements and COMMIT
// in one round trip. A transaction that sent nothing has nothing to commit.
func (s *Store) Commit(ctx context.Context) error {
	t := s.txFrom(ctx)
	if t == nil {
		return ErrNoTransaction
	}
	defer t.release()
	ctx = context.WithoutCancel(ctx)
	if t.tx == nil && len(t.pending) == 0 {
		return nil
	}
	br, err := t.send(ctx, "COMMIT")
	if err == nil {
		var tag pgconn.CommandTag
		tag, err = br.Exec()
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err == nil && tag.String() == "ROLLBACK" {
			// COMMIT of a transaction an earlier statement aborted.
			err = pgx.ErrTxCommitRollback
		}
	}
	if err != nil {
		t.abort(ctx)
	}
	return mapErr(err)
}

// Rollback implements storage.Transactional. The queued statements are
// dropped unsent.
func (s *Store) Rollback(ctx context.Context) error {
	t := s.txFrom(ctx)
	if t == nil {
		return ErrNoTransaction
	}
	defer t.release()
	t.pending = nil
	if t.tx == nil {
		return nil
	}
	err := t.tx.Rollback(context.WithoutCancel(ctx))
	if errors.Is(err, pgx.ErrTxClosed) {
		// The pipeline that was to begin it failed: nothing was begun.
		return nil
	}
	return mapErr(err)
}

// abort leaves the connection outside a transaction after a failed COMMIT
// pipeline (the pool would otherwise close it).
func (t *pgTx) abort(ctx context.Context) {
	if pc := t.conn.Conn().PgConn(); !pc.IsClosed() && pc.TxStatus() != 'I' {
		_, _ = t.conn.Exec(ctx, "ROLLBACK")
	}
}

func (t *pgTx) release() {
	t.done = true
	t.pending = nil
	t.conn.Release()
}

// queue adds a statement whose only result is its error; it is sent with
// the next statement or with COMMIT.
func (t *pgTx) queue(sql string, args ...any) {
	t.pending = append(t.pending, queued{sql, args})
}

// send pipelines BEGIN when it has not been sent, the queued statements and
// sql, and reads the results before sql's. It returns the first error, or
// the batch positioned on sql's result, which the caller must Close.
func (t *pgTx) send(ctx context.Context, sql string, args ...any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	begin := t.tx == nil
	if begin {
		b.BeginTx(pgx.TxOptions{})
	}
	for _, q := range t.pending {
		b.Queue(q.sql, q.args...)
	}
	n := len(t.pending)
	t.pending = nil
	b.Queue(sql, args...)
	var br pgx.BatchResults
	if begin {
		br = t.conn.SendBatch(ctx, b)
		t.tx = br.Tx()
	} else {
		br = t.tx.SendBatch(ctx, b)
	}
	if begin {
		n++
	}
	for range n {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, err
		}
	}
	return br, nil
}

// Exec implements querier.
func (t *pgTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.tx != nil && len(t.pending) == 0 {
		return t.tx.Exec(ctx, sql, args...)
	}
	br, err := t.send(ctx, sql, args...)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query implements querier.
func (t *pgTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.tx != nil && len(t.pending) == 0 {
		return t.tx.Query(ctx, sql, args...)
	}
	br, err := t.send(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow implements querier.
func (t *pgTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.tx != nil && len(t.pending) == 0 {
		return t.tx.QueryRow(ctx, sql, args...)
	}
	rows, err := t.Query(ctx, sql, args...)
	return batchRow{rows: rows, err: err}
}

// Begin implements querier: a savepoint, after what is queued.
func (t *pgTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if t.tx == nil || len(t.pending) > 0 {
		if _, err := t.Exec(ctx, "SELECT 1"); err != nil {
			return nil, err
		}
	}
	return t.tx.Begin(ctx)
}

// batchRows are the rows of a pipeline's last statement; the pipeline is
// closed with them.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) finish() {
	if !r.closed {
		r.closed = true
		r.Rows.Close()
		r.err = r.br.Close()
	}
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.finish()
	return false
}

func (r *batchRows) Close() { r.finish() }

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// batchRow is QueryRow's answer over batchRows.
type batchRow struct {
	rows pgx.Rows
	err  error
}

func (r batchRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
