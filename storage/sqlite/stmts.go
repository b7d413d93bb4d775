package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync"

	"github.com/mcpauth/mcpauth/storage/internal/sqlstore"
)

// Writes run on the writer connection taken as a *sql.Conn (for the length
// of a transaction or of a group-commit batch), and database/sql prepares
// nothing for a *sql.Conn's ExecContext: modernc.org/sqlite would compile
// every statement, BEGIN IMMEDIATE and COMMIT included, anew on every call.
// stmtCache keeps each write's compiled statement for the driver
// connection it was prepared on, so a statement is compiled once per
// connection. Arguments are converted exactly as database/sql converts
// them for a driver without a NamedValueChecker
// (driver.DefaultParameterConverter), so what is written is unchanged.
type stmtCache struct {
	mu    sync.Mutex
	conn  any // the driver connection the statements belong to
	stmts map[string]driver.Stmt
}

// writer takes the writer connection.
func (s *Store) writer(ctx context.Context) (*sql.Conn, error) {
	conn, err := s.w.Conn(ctx)
	if err == nil {
		s.held.Add(1)
	}
	return conn, err
}

// release gives the writer connection back. When the pool will close the
// connection rather than keep it (the store is closed, or the driver no
// longer holds it valid), its statements are finalized first: SQLite
// closes a connection with statements left only once they are finalized,
// so it and the database file would stay open for good.
func (s *Store) release(conn *sql.Conn) {
	conn.Raw(func(dc any) error {
		v, ok := dc.(driver.Validator)
		select {
		case <-s.stop:
		default:
			if !ok || v.IsValid() {
				return nil
			}
		}
		s.stmts.drop(dc)
		return nil
	})
	conn.Close()
	s.held.Add(-1)
}

// wexec runs a write on conn, the writer connection, with the statement
// cached for it.
func (s *Store) wexec(ctx context.Context, conn *sql.Conn, query string, args ...any) (sql.Result, error) {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return conn.ExecContext(ctx, query, args...) // database/sql reports it
		}
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	var res sql.Result
	err := conn.Raw(func(dc any) error {
		st, err := s.stmts.get(ctx, dc, query)
		if err != nil {
			return err
		}
		r, err := st.(driver.StmtExecContext).ExecContext(ctx, nv)
		if err != nil {
			return err
		}
		res = r
		return nil
	})
	return res, err
}

// get returns the statement for query prepared on dc, preparing it once.
// Statements of a connection the pool has since replaced are dropped.
func (c *stmtCache) get(ctx context.Context, dc any, query string) (driver.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != dc {
		c.conn, c.stmts = dc, map[string]driver.Stmt{}
	}
	if st := c.stmts[query]; st != nil {
		return st, nil
	}
	st, err := dc.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.stmts[query] = st
	return st, nil
}

// close finalizes the statements prepared on conn's driver connection.
func (c *stmtCache) close(conn *sql.Conn) {
	conn.Raw(func(dc any) error {
		c.drop(dc)
		return nil
	})
}

// drop finalizes the statements prepared on dc, if the cache holds dc's.
func (c *stmtCache) drop(dc any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != dc {
		return
	}
	for _, st := range c.stmts {
		st.Close()
	}
	c.conn, c.stmts = nil, nil
}

// readPool is the read pool as a querier whose statements are prepared
// once: a *sql.Stmt of the pool, which database/sql prepares on each
// connection the first time it runs there and keeps. The statements are
// the store's own, a bounded set.
type readPool struct{ s *Store }

func (p readPool) stmt(ctx context.Context, query string) *sql.Stmt {
	if st, ok := p.s.reads.Load(query); ok {
		return st.(*sql.Stmt)
	}
	st, err := p.s.r.PrepareContext(ctx, query)
	if err != nil {
		return nil // the plain call reports it
	}
	if prev, loaded := p.s.reads.LoadOrStore(query, st); loaded {
		st.Close()
		return prev.(*sql.Stmt)
	}
	return st
}

func (p readPool) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return affected(p.s.r.ExecContext(ctx, query, args...))
}

func (p readPool) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	if st := p.stmt(ctx, query); st != nil {
		return rows(st.QueryContext(ctx, args...))
	}
	return rows(p.s.r.QueryContext(ctx, query, args...))
}

func (p readPool) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	if st := p.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.s.r.QueryRowContext(ctx, query, args...)
}

// closeReads closes the read pool's statements.
func (s *Store) closeReads() {
	s.reads.Range(func(k, v any) bool {
		v.(*sql.Stmt).Close()
		s.reads.Delete(k)
		return true
	})
}
