// Package migrations holds the versioned SQL schema of each SQL backend,
// embedded in the binary, and a small runner that applies it.
//
// Files are named NNNN_description.sql under a directory per dialect
// (postgres/, sqlite/). Versions are applied in order, each in its own
// transaction together with its row in schema_migrations, so a failed
// migration leaves the database at the previous version.
//
// On PostgreSQL the runner holds a session advisory lock for the current
// schema while it works, so several authserver instances starting at once
// against one database apply each version exactly once. On SQLite every
// version runs under BEGIN IMMEDIATE, which serialises writers.
//
// The package depends on database/sql only; backends hand it a *sql.DB
// (pgx's stdlib adapter for PostgreSQL, modernc.org/sqlite for SQLite).
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Dialect names a SQL backend.
type Dialect string

// Supported dialects; each is a directory of this package.
const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

// Migration is one versioned SQL file.
type Migration struct {
	Version int
	Name    string // file name without directory
	SQL     string
}

// Load returns the dialect's migrations in version order.
func Load(d Dialect) ([]Migration, error) {
	if d != Postgres && d != SQLite {
		return nil, fmt.Errorf("migrations: unknown dialect %q", d)
	}
	entries, err := fs.ReadDir(files, string(d))
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("migrations: badly named file %s/%s", d, name)
		}
		b, err := files.ReadFile(path.Join(string(d), name))
		if err != nil {
			return nil, fmt.Errorf("migrations: %w", err)
		}
		if len(out) > 0 && out[len(out)-1].Version == v {
			return nil, fmt.Errorf("migrations: version %d appears twice in %s", v, d)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(b)})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	return out, nil
}

// Status is what Runner.Status reports.
type Status struct {
	Applied []int // versions recorded in schema_migrations, ascending
	Pending []int // known versions not applied yet, ascending
	// Unknown are applied versions this binary does not know: the database
	// was migrated by a newer release.
	Unknown []int
}

// Current is the highest applied version, 0 when none.
func (s Status) Current() int {
	if len(s.Applied) == 0 {
		return 0
	}
	return s.Applied[len(s.Applied)-1]
}

// Runner applies one dialect's migrations to one database.
type Runner struct {
	db      *sql.DB
	dialect Dialect
	all     []Migration
}

// New returns a runner for db. For PostgreSQL the migrations go to the
// connection's current schema (the first of search_path).
func New(db *sql.DB, d Dialect) (*Runner, error) {
	all, err := Load(d)
	if err != nil {
		return nil, err
	}
	return &Runner{db: db, dialect: d, all: all}, nil
}

const createTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at text NOT NULL
)`

// Up applies every pending migration and returns the versions it applied.
func (r *Runner) Up(ctx context.Context) ([]int, error) {
	conn, err := r.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: connect: %w", err)
	}
	defer conn.Close()

	if r.dialect == Postgres {
		// Session-level lock keyed by the schema, released below (and by the
		// server if this connection dies).
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(hashtext('mcpauth.migrations.' || current_schema()))`); err != nil {
			return nil, fmt.Errorf("migrations: advisory lock: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext('mcpauth.migrations.' || current_schema()))`)
	}
	if _, err := conn.ExecContext(ctx, createTable); err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}

	var done []int
	for _, m := range r.all {
		applied, err := r.apply(ctx, conn, m)
		if err != nil {
			return done, err
		}
		if applied {
			done = append(done, m.Version)
		}
	}
	return done, nil
}

// connectWait bounds how long Up keeps retrying a SQLite connection that
// opens busy.
const connectWait = 10 * time.Second

// connect takes a connection. Opening a fresh SQLite file switches it to WAL,
// which needs the exclusive lock; when two processes do that at once SQLite
// answers SQLITE_BUSY at once rather than calling the busy handler (it would
// deadlock otherwise), so the open is retried with a short pause until
// connectWait or ctx ends.
func (r *Runner) connect(ctx context.Context) (*sql.Conn, error) {
	deadline := time.Now().Add(connectWait)
	pause := time.Millisecond
	for {
		conn, err := r.db.Conn(ctx)
		if err == nil || r.dialect != SQLite || !sqliteBusy(err) || time.Now().After(deadline) {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(pause):
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// sqliteBusy reports whether err is SQLite's SQLITE_BUSY (primary code 5),
// as the driver's error type reports it through Code.
func sqliteBusy(err error) bool {
	var c interface{ Code() int }
	return errors.As(err, &c) && c.Code()&0xff == 5
}

// apply runs m in one transaction unless it is recorded already.
func (r *Runner) apply(ctx context.Context, conn *sql.Conn, m Migration) (applied bool, err error) {
	begin, insert := "BEGIN", `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, CURRENT_TIMESTAMP)`
	if r.dialect == SQLite {
		begin = "BEGIN IMMEDIATE"
		insert = `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, CURRENT_TIMESTAMP)`
	}
	if _, err := conn.ExecContext(ctx, begin); err != nil {
		return false, fmt.Errorf("migrations: begin: %w", err)
	}
	defer func() {
		if err != nil {
			conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	var n int
	q := `SELECT count(*) FROM schema_migrations WHERE version = $1`
	if r.dialect == SQLite {
		q = `SELECT count(*) FROM schema_migrations WHERE version = ?`
	}
	if err := conn.QueryRowContext(ctx, q, m.Version).Scan(&n); err != nil {
		return false, fmt.Errorf("migrations: %w", err)
	}
	if n > 0 {
		_, err := conn.ExecContext(ctx, "COMMIT")
		return false, err
	}
	if _, err := conn.ExecContext(ctx, m.SQL); err != nil {
		return false, fmt.Errorf("migrations: %s/%s: %w", r.dialect, m.Name, err)
	}
	if _, err := conn.ExecContext(ctx, insert, m.Version, m.Name); err != nil {
		return false, fmt.Errorf("migrations: record %d: %w", m.Version, err)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return false, fmt.Errorf("migrations: commit %d: %w", m.Version, err)
	}
	return true, nil
}

// Status reports applied and pending versions without changing anything.
func (r *Runner) Status(ctx context.Context) (Status, error) {
	var exists bool
	var err error
	if r.dialect == Postgres {
		err = r.db.QueryRowContext(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists)
	} else {
		var n int
		err = r.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&n)
		exists = n > 0
	}
	if err != nil {
		return Status{}, fmt.Errorf("migrations: status: %w", err)
	}
	applied := map[int]bool{}
	var st Status
	if exists {
		rows, err := r.db.QueryContext(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
		if err != nil {
			return Status{}, fmt.Errorf("migrations: status: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				return Status{}, fmt.Errorf("migrations: status: %w", err)
			}
			applied[v] = true
			st.Applied = append(st.Applied, v)
		}
		if err := rows.Err(); err != nil {
			return Status{}, fmt.Errorf("migrations: status: %w", err)
		}
	}
	known := map[int]bool{}
	for _, m := range r.all {
		known[m.Version] = true
		if !applied[m.Version] {
			st.Pending = append(st.Pending, m.Version)
		}
	}
	for _, v := range st.Applied {
		if !known[v] {
			st.Unknown = append(st.Unknown, v)
		}
	}
	return st, nil
}
