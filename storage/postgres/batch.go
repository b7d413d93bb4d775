package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/internal/sqlstore"
)

// Token inserts outside a transaction (a client-credentials token, a token
// exchange's token) are group-committed. A CreateToken that finds fewer
// than insertFlushers inserts under way sends its row at once, as one
// statement in its own implicit transaction. One that arrives while they
// are all busy waits in a queue; when an insert returns, the first waiting
// caller takes the whole queue (at most maxInsertBatch rows) and sends it
// as one INSERT ... SELECT FROM unnest(...): one statement, one commit and
// one WAL flush for every row, instead of one each. The answer comes back
// after that commit, so a token acknowledged is durable, and no caller
// waits for a timer: a batch is whatever queued while the inserts ahead of
// it ran. When the queue holds a full batch (fullInsertBatch rows) and
// fewer than maxInsertFlushers inserts are under way, the caller that
// fills it sends it at once: where the disk's flush is slow, rows then do
// not wait for the inserts ahead of them, and PostgreSQL still shares one
// WAL flush among the commits that meet.
//
// A batch whose statement fails on a row's data (a duplicate signature, a
// string PostgreSQL cannot hold) is sent again row by row, so that each
// caller gets its own row's answer; any other failure (the database gone)
// is every caller's. A caller whose context ends while it waits in the
// queue leaves it and its row is not written; once taken into a batch its
// row is sent, and the batch's statement is cancelled only when every
// caller in it has given up.
const (
	insertFlushers    = 2
	fullInsertBatch   = 8
	maxInsertFlushers = 8
	maxInsertBatch    = 64
)

type tokenInserts struct {
	mu      sync.Mutex
	running int // inserts under way, at most maxInsertFlushers
	queue   []*tokenInsert
}

type tokenInsert struct {
	ctx  context.Context
	t    *storage.Token
	done chan insertResult // buffered: the sender never waits
}

// insertResult is a row's outcome, or (lead non-nil) the batch its
// receiver is to send, itself included.
type insertResult struct {
	err  error
	lead []*tokenInsert
}

const insertTokensSQL = `INSERT INTO tokens (` + sqlstore.TokenCols + `)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::boolean[],
		$7::timestamptz[], $8::timestamptz[], $9::timestamptz[], $10::bytea[], $11::bigint[])`

// insertToken writes t outside a transaction, grouped with the inserts
// that wait beside it.
func (s *Store) insertToken(ctx context.Context, t *storage.Token) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	me := &tokenInsert{ctx: ctx, t: t, done: make(chan insertResult, 1)}
	b := &s.inserts
	b.mu.Lock()
	if b.running < insertFlushers {
		b.running++
		b.mu.Unlock()
		return s.flushTokens([]*tokenInsert{me}, me)
	}
	if len(b.queue)+1 >= fullInsertBatch && b.running < maxInsertFlushers {
		// Enough rows wait for a batch of their own: send them now
		// rather than after the inserts under way.
		b.running++
		n := min(len(b.queue), maxInsertBatch-1)
		batch := append([]*tokenInsert{me}, b.queue[:n]...)
		b.queue = slices.Delete(b.queue, 0, n)
		b.mu.Unlock()
		return s.flushTokens(batch, me)
	}
	b.queue = append(b.queue, me)
	b.mu.Unlock()
	var r insertResult
	select {
	case r = <-me.done:
	case <-ctx.Done():
		b.mu.Lock()
		if i := slices.Index(b.queue, me); i >= 0 {
			b.queue = slices.Delete(b.queue, i, i+1)
			b.mu.Unlock()
			return ctx.Err()
		}
		b.mu.Unlock()
		r = <-me.done // taken into a batch: its answer follows
	}
	if r.lead != nil {
		return s.flushTokens(r.lead, me)
	}
	return r.err
}

// flushTokens sends batch, hands the queue (if any) to its first caller,
// answers the others and returns me's answer.
func (s *Store) flushTokens(batch []*tokenInsert, me *tokenInsert) error {
	errs := s.sendTokens(batch)
	b := &s.inserts
	b.mu.Lock()
	var next []*tokenInsert
	if len(b.queue) > 0 {
		n := min(len(b.queue), maxInsertBatch)
		next = slices.Clone(b.queue[:n])
		b.queue = slices.Delete(b.queue, 0, n)
	} else {
		b.running--
	}
	b.mu.Unlock()
	if next != nil {
		next[0].done <- insertResult{lead: next}
	}
	var mine error
	for i, m := range batch {
		if m == me {
			mine = errs[i]
		} else {
			m.done <- insertResult{err: errs[i]}
		}
	}
	return mine
}

// sendTokens writes the rows of batch whose callers still wait and returns
// each row's error.
func (s *Store) sendTokens(batch []*tokenInsert) []error {
	errs := make([]error, len(batch))
	live := make([]int, 0, len(batch))
	for i, m := range batch {
		if err := m.ctx.Err(); err != nil {
			errs[i] = err // given up before it was sent: not written
			continue
		}
		live = append(live, i)
	}
	if len(live) == 1 {
		errs[live[0]] = s.insertOne(batch[live[0]])
		return errs
	}
	if len(live) == 0 {
		return errs
	}
	members := make([]*tokenInsert, len(live))
	toks := make([]*storage.Token, len(live))
	for j, i := range live {
		members[j], toks[j] = batch[i], batch[i].t
	}
	ctx, stop := whileAnyWaits(members)
	_, err := s.pool.Exec(ctx, insertTokensSQL, tokenArrays(toks)...)
	stop()
	if err != nil && rowsFault(err) {
		for _, i := range live {
			errs[i] = s.insertOne(batch[i])
		}
		return errs
	}
	err = mapErr(err)
	for _, i := range live {
		errs[i] = err
	}
	return errs
}

// tokenArrays are the arguments of insertTokensSQL for toks: one array per
// column, a zero time as NULL (as ts does for one row).
func tokenArrays(toks []*storage.Token) []any {
	n := len(toks)
	kind, sig, req, client, subject := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	active := make([]bool, n)
	created, expires, rotated := make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
	data := make([][]byte, n)
	status := make([]int64, n)
	for j, t := range toks {
		kind[j], sig[j], req[j], client[j], subject[j] = string(t.Kind), t.Signature, t.RequestID, t.ClientID, t.Subject
		active[j] = t.Active
		created[j] = pgtype.Timestamptz{Time: t.CreatedAt, Valid: !t.CreatedAt.IsZero()}
		expires[j] = pgtype.Timestamptz{Time: t.ExpiresAt, Valid: !t.ExpiresAt.IsZero()}
		rotated[j] = pgtype.Timestamptz{Time: t.RotatedAt, Valid: !t.RotatedAt.IsZero()}
		data[j] = t.Data
		status[j] = t.StatusIndex
	}
	return []any{kind, sig, req, client, subject, active, created, expires, rotated, data, status}
}

func (s *Store) insertOne(m *tokenInsert) error {
	_, err := s.pool.Exec(m.ctx, sqlstore.InsertToken, sqlstore.TokenArgs(dialect{s}, m.t)...)
	return mapErr(err)
}

// rowsFault reports whether err is about the rows sent (SQLSTATE class 22,
// data exception, or 23, integrity constraint violation) rather than the
// connection or the database.
func rowsFault(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23"))
}

// whileAnyWaits returns a context that ends when every member's context
// has ended, and the function that releases it.
func whileAnyWaits(members []*tokenInsert) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(members[0].ctx))
	var left atomic.Int64
	left.Store(int64(len(members)))
	stops := make([]func() bool, len(members))
	for i, m := range members {
		stops[i] = context.AfterFunc(m.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
