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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/mcpauth/mcpauth/migrations"
	"github.com/mcpauth/mcpauth/storage"
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

// Store is the PostgreSQL backend. It is safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	inserts tokenInserts
}

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

// untime turns NULL back into the zero time.
func untime(p *time.Time) time.Time {
	if p == nil {
		return time.Time{}
	}
	return p.UTC()
}

// arr keeps nil slices out of NOT NULL array columns.
func arr(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func emptyNil(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

const clientCols = `id, secret_hash, secret_expires_at, public, name, redirect_uris, grant_types,
	response_types, scopes, resources, token_endpoint_auth_method, jwks, jwks_uri,
	application_type, metadata, registration_token_hash, source, created_at, updated_at, last_used_at`

func clientArgs(c *storage.Client) []any {
	return []any{c.ID, c.SecretHash, ts(c.SecretExpiresAt), c.Public, c.Name, arr(c.RedirectURIs),
		arr(c.GrantTypes), arr(c.ResponseTypes), arr(c.Scopes), arr(c.Resources),
		c.TokenEndpointAuthMethod, c.JWKS, c.JWKSURI, c.ApplicationType, c.Metadata,
		c.RegistrationTokenHash, c.Source, c.CreatedAt, c.UpdatedAt, ts(c.LastUsedAt)}
}

func scanClient(row pgx.Row) (*storage.Client, error) {
	var c storage.Client
	var secretExp, created, updated, lastUsed *time.Time
	err := row.Scan(&c.ID, &c.SecretHash, &secretExp, &c.Public, &c.Name, &c.RedirectURIs,
		&c.GrantTypes, &c.ResponseTypes, &c.Scopes, &c.Resources, &c.TokenEndpointAuthMethod,
		&c.JWKS, &c.JWKSURI, &c.ApplicationType, &c.Metadata, &c.RegistrationTokenHash,
		&c.Source, &created, &updated, &lastUsed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, storage.ErrNotFound
	}
	if err != nil {
		return nil, mapErr(err)
	}
	c.SecretExpiresAt, c.CreatedAt, c.UpdatedAt, c.LastUsedAt = untime(secretExp), untime(created), untime(updated), untime(lastUsed)
	c.RedirectURIs, c.GrantTypes, c.ResponseTypes = emptyNil(c.RedirectURIs), emptyNil(c.GrantTypes), emptyNil(c.ResponseTypes)
	c.Scopes, c.Resources = emptyNil(c.Scopes), emptyNil(c.Resources)
	return &c, nil
}

// GetClient implements storage.ClientStore.
func (s *Store) GetClient(ctx context.Context, id string) (*storage.Client, error) {
	if !storable(id) {
		return nil, storage.ErrNotFound
	}
	return scanClient(s.q(ctx).QueryRow(ctx, `SELECT `+clientCols+` FROM clients WHERE id = $1`, id))
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
	_, err := s.q(ctx).Exec(ctx, `INSERT INTO clients (`+clientCols+`) VALUES
		($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20)`, clientArgs(&n)...)
	return mapErr(err)
}

// UpdateClient implements storage.ClientStore: the row is locked (SELECT ...
// FOR UPDATE) while update runs, in its own transaction or in a savepoint of
// the caller's.
func (s *Store) UpdateClient(ctx context.Context, id string, update func(storage.Client) (storage.Client, error)) error {
	if !storable(id) {
		return storage.ErrNotFound
	}
	err := pgx.BeginFunc(ctx, s.q(ctx), func(tx pgx.Tx) error {
		old, err := scanClient(tx.QueryRow(ctx, `SELECT `+clientCols+` FROM clients WHERE id = $1 FOR UPDATE`, id))
		if err != nil {
			return err
		}
		n, err := update(*old)
		if err != nil {
			return closureErr{err}
		}
		n.ID = id
		_, err = tx.Exec(ctx, `UPDATE clients SET secret_hash=$2, secret_expires_at=$3, public=$4, name=$5,
			redirect_uris=$6, grant_types=$7, response_types=$8, scopes=$9, resources=$10,
			token_endpoint_auth_method=$11, jwks=$12, jwks_uri=$13, application_type=$14, metadata=$15,
			registration_token_hash=$16, source=$17, created_at=$18, updated_at=$19, last_used_at=$20
			WHERE id = $1`, clientArgs(&n)...)
		return mapErr(err)
	})
	var ce closureErr
	if errors.As(err, &ce) {
		return ce.err // the closure's error, unchanged
	}
	return mapErr(err)
}

// closureErr marks an error returned by UpdateClient's closure.
type closureErr struct{ err error }

func (e closureErr) Error() string { return e.err.Error() }

// DeleteClient implements storage.ClientStore.
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	if !storable(id) {
		return storage.ErrNotFound
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM clients WHERE id = $1`, id)
		if err != nil {
			return mapErr(err)
		}
		if tag.RowsAffected() == 0 {
			return storage.ErrNotFound
		}
		_, err = revokeWhere(ctx, tx, storage.GrantFilter{ClientID: id})
		return err
	})
}

// inTx runs f in a transaction of its own, or in a savepoint of the one
// in ctx, committed when f succeeds. f's errors are returned unchanged.
func (s *Store) inTx(ctx context.Context, f func(tx pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, s.q(ctx), func(tx pgx.Tx) error {
		if err := f(tx); err != nil {
			return closureErr{err}
		}
		return nil
	})
	var ce closureErr
	if errors.As(err, &ce) {
		return ce.err
	}
	return mapErr(err)
}

// grantWhere is the WHERE clause selecting the tokens of the grants f
// matches, with placeholders numbered from $1, and its arguments.
func grantWhere(f storage.GrantFilter) (string, []any) {
	var conds []string
	var args []any
	for _, c := range []struct{ col, v string }{{"client_id", f.ClientID}, {"subject", f.Subject}, {"request_id", f.RequestID}} {
		if c.v != "" {
			args = append(args, c.v)
			conds = append(conds, fmt.Sprintf("%s = $%d", c.col, len(args)))
		}
	}
	if len(conds) == 0 {
		return "true", nil
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

// revokeWhere deactivates the active tokens of the grants f matches and
// records their status indices StatusInvalid, in one statement, and returns
// how many grants that touched. It runs the statement twice, for the
// reason RevokeRefreshToken in as/ gives: a refresh that committed while
// the first pass waited for its row issued tokens the first pass could not
// see. tx is a transaction.
func revokeWhere(ctx context.Context, tx pgx.Tx, f storage.GrantFilter) (int, error) {
	where, args := grantWhere(f)
	where = grantRows(where)
	grants := map[string]bool{}
	for range 2 {
		rows, err := tx.Query(ctx, `WITH r AS (
				UPDATE tokens SET active = false WHERE `+where+` AND active RETURNING request_id, status_idx, expires_at),
			st AS (
				INSERT INTO token_status (idx, status, expires_at)
				SELECT status_idx, 1, max(expires_at) FROM r WHERE status_idx > 0 GROUP BY status_idx
				ON CONFLICT (idx) DO UPDATE SET expires_at = GREATEST(token_status.expires_at, excluded.expires_at))
			SELECT DISTINCT request_id FROM r`, args...)
		if err != nil {
			return 0, mapErr(err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return 0, mapErr(err)
			}
			grants[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, mapErr(err)
		}
	}
	return len(grants), nil
}

// ListGrants implements storage.GrantStore.
func (s *Store) ListGrants(ctx context.Context, f storage.GrantFilter, now time.Time, limit int) ([]storage.Grant, error) {
	if !storable(f.Subject, f.ClientID, f.RequestID) {
		return nil, nil
	}
	where, args := grantWhere(f)
	args = append(args, now)
	nowArg := len(args)
	lim := ""
	if limit > 0 {
		args = append(args, limit)
		lim = fmt.Sprintf(" LIMIT $%d", len(args))
	}
	rows, err := s.q(ctx).Query(ctx, fmt.Sprintf(`SELECT request_id, max(subject), max(client_id), min(created_at), max(created_at),
		max(expires_at), max(status_idx) FROM tokens WHERE %s GROUP BY request_id
		HAVING bool_or(active AND kind IN ('access', 'refresh') AND expires_at > $%d)
		ORDER BY max(created_at) DESC, request_id`, where, nowArg)+lim, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []storage.Grant
	for rows.Next() {
		var g storage.Grant
		var created, last, exp *time.Time
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
	if !storable(f.Subject, f.ClientID, f.RequestID) {
		return 0, nil
	}
	var n int
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if n, err = revokeWhere(ctx, tx, f); err != nil {
			return err
		}
		if f.RequestID != "" {
			return nil
		}
		where, args := grantWhere(storage.GrantFilter{Subject: f.Subject, ClientID: f.ClientID})
		_, err = tx.Exec(ctx, `DELETE FROM consents WHERE `+where, args...)
		return mapErr(err)
	})
	return n, err
}

// AllocateStatusIndices implements storage.StatusStore with one UPDATE,
// which serialises concurrent callers on the counter row.
func (s *Store) AllocateStatusIndices(ctx context.Context, n int) (int64, error) {
	if n < 1 {
		return 0, errors.New("postgres: AllocateStatusIndices needs n >= 1")
	}
	var last int64
	err := s.q(ctx).QueryRow(ctx, `UPDATE status_counter SET last = last + $1 WHERE id = 1 RETURNING last`, n).Scan(&last)
	if err != nil {
		return 0, mapErr(err)
	}
	return last - int64(n) + 1, nil
}

// StatusList implements storage.StatusStore.
func (s *Store) StatusList(ctx context.Context, now time.Time) (int64, []int64, error) {
	var last int64
	var invalid []int64
	err := s.q(ctx).QueryRow(ctx, `SELECT (SELECT last FROM status_counter WHERE id = 1),
		COALESCE((SELECT array_agg(idx ORDER BY idx) FROM token_status
			WHERE status = 1 AND (expires_at IS NULL OR expires_at >= $1)), '{}')`, now).Scan(&last, &invalid)
	if err != nil {
		return 0, nil, mapErr(err)
	}
	return last, invalid, nil
}

// DeleteExpiredStatuses implements storage.StatusStore. A limit <= 0
// deletes nothing.
func (s *Store) DeleteExpiredStatuses(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	return s.execCount(ctx, `DELETE FROM token_status WHERE idx IN (
		SELECT idx FROM token_status WHERE expires_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, before, limit)
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

// execOne runs a statement that must affect one row, else ErrNotFound.
func (s *Store) execOne(ctx context.Context, sql string, args ...any) error {
	tag, err := s.q(ctx).Exec(ctx, sql, args...)
	if err != nil {
		return mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return storage.ErrNotFound
	}
	return nil
}

// execCount runs a statement and returns the rows it affected.
func (s *Store) execCount(ctx context.Context, sql string, args ...any) (int, error) {
	tag, err := s.q(ctx).Exec(ctx, sql, args...)
	if err != nil {
		return 0, mapErr(err)
	}
	return int(tag.RowsAffected()), nil
}

// CountClients implements storage.ClientStore.
func (s *Store) CountClients(ctx context.Context, source string) (int, error) {
	if !storable(source) {
		return 0, nil
	}
	var n int
	err := s.q(ctx).QueryRow(ctx, `SELECT count(*) FROM clients WHERE $1 = '' OR source = $1`, source).Scan(&n)
	return n, mapErr(err)
}

// ListClients implements storage.ClientStore. IDs compare bytewise
// (COLLATE "C"), as in the other backends.
func (s *Store) ListClients(ctx context.Context, afterID string, limit int) ([]storage.Client, error) {
	out := []storage.Client{}
	if limit <= 0 {
		return out, nil
	}
	rows, err := s.q(ctx).Query(ctx, `SELECT `+clientCols+` FROM clients WHERE id > $1 COLLATE "C" ORDER BY id COLLATE "C" LIMIT $2`, afterID, limit)
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

// ReapClients implements storage.ClientStore. Rows locked by another reaper
// are skipped, so concurrent reapers on several instances do not wait for
// each other. A limit <= 0 deletes nothing.
func (s *Store) ReapClients(ctx context.Context, neverUsedBefore, idleBefore time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	var n int
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `DELETE FROM clients WHERE id IN (
			SELECT id FROM clients WHERE source IN ('dcr', 'cimd')
			AND ((last_used_at IS NULL AND created_at < $1) OR last_used_at < $2)
			ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED) RETURNING id`, neverUsedBefore, idleBefore, limit)
		if err != nil {
			return mapErr(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return mapErr(err)
		}
		for _, id := range ids {
			if _, err := revokeWhere(ctx, tx, storage.GrantFilter{ClientID: id}); err != nil {
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
	if tx := s.txFrom(ctx); tx != nil {
		// Nothing in the transaction depends on this row's result but its
		// error: it is sent with the next statement or with COMMIT.
		tx.queue(insertTokenSQL,
			string(t.Kind), t.Signature, t.RequestID, t.ClientID, t.Subject, t.Active,
			ts(t.CreatedAt), ts(t.ExpiresAt), ts(t.RotatedAt), t.Data, t.StatusIndex)
		return nil
	}
	// Outside a transaction: group-committed with concurrent inserts
	// (batch.go).
	return s.insertToken(ctx, t)
}

// GetToken implements storage.TokenStore.
func (s *Store) GetToken(ctx context.Context, kind storage.TokenKind, signature string) (*storage.Token, error) {
	if !storable(string(kind), signature) {
		return nil, storage.ErrNotFound
	}
	var t storage.Token
	var k string
	var created, expires, rotated *time.Time
	err := s.q(ctx).QueryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE kind = $1 AND signature = $2`, string(kind), signature).
		Scan(&k, &t.Signature, &t.RequestID, &t.ClientID, &t.Subject, &t.Active, &created, &expires, &rotated, &t.Data, &t.StatusIndex)
	if errors.Is(err, pgx.ErrNoRows) {
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
	var ps storage.PersonStatus
	if !storable(string(kind), signature) {
		return nil, ps, storage.ErrNotFound
	}
	var t storage.Token
	var k string
	var created, expires, rotated *time.Time
	err := s.q(ctx).QueryRow(ctx, `SELECT t.kind, t.signature, t.request_id, t.client_id, t.subject, t.active, t.created_at,
			t.expires_at, t.rotated_at, t.data, t.status_idx,
			u.subject IS NOT NULL, COALESCE(u.upstream, ''), COALESCE(u.disabled, false)
		FROM tokens t LEFT JOIN users u ON t.subject <> '' AND u.subject = t.subject COLLATE "C"
		WHERE t.kind = $1 AND t.signature = $2`, string(kind), signature).
		Scan(&k, &t.Signature, &t.RequestID, &t.ClientID, &t.Subject, &t.Active, &created, &expires, &rotated, &t.Data, &t.StatusIndex,
			&ps.Recorded, &ps.Upstream, &ps.Disabled)
	if errors.Is(err, pgx.ErrNoRows) {
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
	var exists bool
	err := s.q(ctx).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tokens WHERE kind = $1 AND signature = $2)`, string(kind), signature).Scan(&exists)
	if err != nil {
		return mapErr(err)
	}
	if !exists {
		return storage.ErrNotFound
	}
	return storage.ErrInactive
}

// DeactivateToken implements storage.TokenStore with one conditional UPDATE.
func (s *Store) DeactivateToken(ctx context.Context, kind storage.TokenKind, signature string) error {
	if !storable(string(kind), signature) {
		return storage.ErrNotFound
	}
	n, err := s.execCount(ctx, `UPDATE tokens SET active = false WHERE kind = $1 AND signature = $2 AND active`, string(kind), signature)
	if err != nil {
		return err
	}
	if n == 0 {
		return s.inactiveOrMissing(ctx, kind, signature)
	}
	return nil
}

// RotateToken implements storage.TokenStore with one conditional UPDATE: it
// matches an active token never rotated, or (grace > 0) rotated at or after
// now-grace; the first rotation time is kept.
func (s *Store) RotateToken(ctx context.Context, kind storage.TokenKind, signature string, now time.Time, grace time.Duration) error {
	if !storable(string(kind), signature) {
		return storage.ErrNotFound
	}
	n, err := s.execCount(ctx, `UPDATE tokens SET rotated_at = COALESCE(rotated_at, $3)
		WHERE kind = $1 AND signature = $2 AND active
		AND (rotated_at IS NULL OR ($4 AND rotated_at >= $5))`,
		string(kind), signature, now, grace > 0, now.Add(-grace))
	if err != nil {
		return err
	}
	if n == 0 {
		return s.inactiveOrMissing(ctx, kind, signature)
	}
	return nil
}

// RevokeTokens implements storage.TokenStore.
func (s *Store) RevokeTokens(ctx context.Context, kind storage.TokenKind, requestID string) error {
	if !storable(string(kind), requestID) {
		return nil
	}
	_, err := s.execCount(ctx, `WITH r AS (
			UPDATE tokens SET active = false WHERE kind = $1 AND request_id = $2 AND active RETURNING status_idx, expires_at)
		INSERT INTO token_status (idx, status, expires_at)
		SELECT status_idx, 1, max(expires_at) FROM r WHERE status_idx > 0 GROUP BY status_idx
		ON CONFLICT (idx) DO UPDATE SET expires_at = GREATEST(token_status.expires_at, excluded.expires_at)`, string(kind), requestID)
	return err
}

// DeleteToken implements storage.TokenStore.
func (s *Store) DeleteToken(ctx context.Context, kind storage.TokenKind, signature string) error {
	if !storable(string(kind), signature) {
		return storage.ErrNotFound
	}
	return s.execOne(ctx, `DELETE FROM tokens WHERE kind = $1 AND signature = $2`, string(kind), signature)
}

// DeleteExpiredTokens implements storage.TokenStore: one short statement per
// batch, skipping rows other transactions hold. A limit <= 0 deletes nothing.
func (s *Store) DeleteExpiredTokens(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	return s.execCount(ctx, `DELETE FROM tokens WHERE (kind, signature) IN (
		SELECT kind, signature FROM tokens WHERE expires_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, before, limit)
}

// GetConsent implements storage.ConsentStore.
func (s *Store) GetConsent(ctx context.Context, subject, clientID, resource string) (*storage.Consent, error) {
	if !storable(subject, clientID, resource) {
		return nil, storage.ErrNotFound
	}
	rows, err := s.q(ctx).Query(ctx, `SELECT `+consentCols+`
		FROM consents WHERE subject = $1 AND client_id = $2 AND resource = $3`, subject, clientID, resource)
	if err != nil {
		return nil, mapErr(err)
	}
	cs, err := scanConsents(rows)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, storage.ErrNotFound
	}
	return &cs[0], nil
}

const consentCols = `subject, client_id, resource, scopes, redirect_uris, granted_at, expires_at`

func scanConsents(rows pgx.Rows) ([]storage.Consent, error) {
	defer rows.Close()
	var out []storage.Consent
	for rows.Next() {
		var c storage.Consent
		var granted, expires *time.Time
		if err := rows.Scan(&c.Subject, &c.ClientID, &c.Resource, &c.Scopes, &c.RedirectURIs, &granted, &expires); err != nil {
			return nil, mapErr(err)
		}
		c.Scopes = emptyNil(c.Scopes)
		c.RedirectURIs = emptyNil(c.RedirectURIs)
		c.GrantedAt, c.ExpiresAt = untime(granted), untime(expires)
		out = append(out, c)
	}
	return out, mapErr(rows.Err())
}

// PutConsent implements storage.ConsentStore.
func (s *Store) PutConsent(ctx context.Context, c *storage.Consent) error {
	_, err := s.q(ctx).Exec(ctx, `INSERT INTO consents (`+consentCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (subject, client_id, resource) DO UPDATE
		SET scopes = EXCLUDED.scopes, redirect_uris = EXCLUDED.redirect_uris,
			granted_at = EXCLUDED.granted_at, expires_at = EXCLUDED.expires_at`,
		c.Subject, c.ClientID, c.Resource, arr(c.Scopes), arr(c.RedirectURIs), ts(c.GrantedAt), ts(c.ExpiresAt))
	return mapErr(err)
}

// DeleteConsents implements storage.ConsentStore.
func (s *Store) DeleteConsents(ctx context.Context, subject, clientID string) error {
	if !storable(subject, clientID) {
		return nil
	}
	_, err := s.execCount(ctx, `DELETE FROM consents WHERE subject = $1 AND ($2 = '' OR client_id = $2)`, subject, clientID)
	return err
}

// ListConsents implements storage.ConsentStore, ordered by client id then
// resource.
func (s *Store) ListConsents(ctx context.Context, subject string) ([]storage.Consent, error) {
	if !storable(subject) {
		return nil, nil
	}
	rows, err := s.q(ctx).Query(ctx, `SELECT `+consentCols+`
		FROM consents WHERE subject = $1 ORDER BY client_id, resource`, subject)
	if err != nil {
		return nil, mapErr(err)
	}
	return scanConsents(rows)
}

// DeleteExpiredConsents implements storage.ConsentStore. A limit <= 0
// deletes nothing.
func (s *Store) DeleteExpiredConsents(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	return s.execCount(ctx, `DELETE FROM consents WHERE (subject, client_id, resource) IN (
		SELECT subject, client_id, resource FROM consents WHERE expires_at < $1
		LIMIT $2 FOR UPDATE SKIP LOCKED)`, before, limit)
}

// ListKeys implements storage.KeyStore: newest CreatedAt first, ties by ID
// descending.
func (s *Store) ListKeys(ctx context.Context) ([]storage.SigningKey, error) {
	rows, err := s.q(ctx).Query(ctx, `SELECT id, algorithm, public_jwk, private_sealed, created_at, retired_at
		FROM signing_keys ORDER BY created_at DESC NULLS LAST, id DESC`)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	out := []storage.SigningKey{}
	for rows.Next() {
		var k storage.SigningKey
		var created, retired *time.Time
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
	_, err := s.q(ctx).Exec(ctx, `INSERT INTO signing_keys (id, algorithm, public_jwk, private_sealed, created_at, retired_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, k.ID, k.Algorithm, k.PublicJWK, k.PrivateSealed, ts(k.CreatedAt), ts(k.RetiredAt))
	return mapErr(err)
}

// RetireKeys implements storage.KeyStore.
func (s *Store) RetireKeys(ctx context.Context, keepID string, at time.Time) error {
	_, err := s.execCount(ctx, `UPDATE signing_keys SET retired_at = $2 WHERE id <> $1 AND retired_at IS NULL`, keepID, at)
	return err
}

// DeleteKey implements storage.KeyStore.
func (s *Store) DeleteKey(ctx context.Context, id string) error {
	if !storable(id) {
		return storage.ErrNotFound
	}
	return s.execOne(ctx, `DELETE FROM signing_keys WHERE id = $1`, id)
}

// maxTime bounds the expiries stored from claims, which may lie further
// ahead than timestamptz can hold (294276 AD): beyond it the insert fails.
var maxTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// clampTime is t, or maxTime when t is later.
func clampTime(t time.Time) time.Time {
	if t.After(maxTime) {
		return maxTime
	}
	return t
}

// UseJTI implements storage.JTIStore with one INSERT ... ON CONFLICT that
// replaces only an expired record (by this process's clock). Ids are bytea,
// so any byte string (a jti may hold "\u0000") is accepted.
func (s *Store) UseJTI(ctx context.Context, id string, expiresAt time.Time) error {
	n, err := s.execCount(ctx, `INSERT INTO jtis (id, expires_at) VALUES ($1, $2)
		ON CONFLICT (id) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE jtis.expires_at <= $3`,
		[]byte(id), clampTime(expiresAt), time.Now())
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
	return s.execCount(ctx, `DELETE FROM jtis WHERE id IN (
		SELECT id FROM jtis WHERE expires_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, before, limit)
}

// UpdateCounters implements storage.CounterStore in one transaction: a row
// is inserted for every key that has none, then the rows are locked (FOR
// UPDATE, in key order so that two callers never wait on each other in a
// cycle), update runs, and the rows are written back or deleted.
func (s *Store) UpdateCounters(ctx context.Context, keys []string, now time.Time, update func([]storage.Counter) ([]storage.Counter, error)) error {
	if !storable(keys...) {
		return fmt.Errorf("postgres: counter key is not valid UTF-8 text")
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	err := pgx.BeginFunc(ctx, s.q(ctx), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO counters (key) SELECT unnest($1::text[]) ORDER BY 1 ON CONFLICT (key) DO NOTHING`, sorted); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT key, count, until, expires_at FROM counters WHERE key = ANY($1) ORDER BY key FOR UPDATE`, sorted)
		if err != nil {
			return err
		}
		got := map[string]storage.Counter{}
		for rows.Next() {
			var c storage.Counter
			var until, expires *time.Time
			if err := rows.Scan(&c.Key, &c.Count, &until, &expires); err != nil {
				rows.Close()
				return err
			}
			c.Until, c.ExpiresAt = untime(until), untime(expires)
			if !c.ExpiresAt.After(now) {
				c = storage.Counter{Key: c.Key}
			}
			got[c.Key] = c
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		in := make([]storage.Counter, len(keys))
		for i, k := range keys {
			in[i] = got[k]
			in[i].Key = k
		}
		out, err := update(in)
		if err != nil {
			return closureErr{err}
		}
		if len(out) != len(keys) {
			return errors.New("postgres: UpdateCounters: update returned the wrong number of counters")
		}
		for i, k := range keys {
			c := out[i]
			if c.ExpiresAt.IsZero() {
				_, err = tx.Exec(ctx, `DELETE FROM counters WHERE key = $1`, k)
			} else {
				_, err = tx.Exec(ctx, `UPDATE counters SET count = $2, until = $3, expires_at = $4 WHERE key = $1`,
					k, c.Count, ts(c.Until), c.ExpiresAt)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	var ce closureErr
	if errors.As(err, &ce) {
		return ce.err
	}
	return mapErr(err)
}

// DeleteExpiredCounters implements storage.CounterStore. A limit <= 0
// deletes nothing.
func (s *Store) DeleteExpiredCounters(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	return s.execCount(ctx, `DELETE FROM counters WHERE key IN (
		SELECT key FROM counters WHERE expires_at IS NULL OR expires_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, before, limit)
}

const sessionCols = `id, subject, created_at, last_seen_at, idle_expires_at, expires_at, user_agent, address`

func scanSessions(rows pgx.Rows, err error) ([]storage.Session, error) {
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []storage.Session
	for rows.Next() {
		var x storage.Session
		if err := rows.Scan(&x.ID, &x.Subject, &x.CreatedAt, &x.LastSeenAt, &x.IdleExpiresAt, &x.ExpiresAt, &x.UserAgent, &x.Address); err != nil {
			return nil, mapErr(err)
		}
		x.CreatedAt, x.LastSeenAt, x.IdleExpiresAt, x.ExpiresAt = x.CreatedAt.UTC(), x.LastSeenAt.UTC(), x.IdleExpiresAt.UTC(), x.ExpiresAt.UTC()
		out = append(out, x)
	}
	return out, mapErr(rows.Err())
}

// CreateSession implements storage.SessionStore.
func (s *Store) CreateSession(ctx context.Context, x *storage.Session) error {
	_, err := s.q(ctx).Exec(ctx, `INSERT INTO sessions (`+sessionCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		x.ID, x.Subject, x.CreatedAt, x.LastSeenAt, x.IdleExpiresAt, x.ExpiresAt, x.UserAgent, x.Address)
	return mapErr(err)
}

// GetSession implements storage.SessionStore.
func (s *Store) GetSession(ctx context.Context, id string) (*storage.Session, error) {
	if !storable(id) {
		return nil, storage.ErrNotFound
	}
	rows, err := s.q(ctx).Query(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = $1`, id)
	list, err := scanSessions(rows, err)
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
	if !storable(id) {
		return storage.ErrNotFound
	}
	return s.execOne(ctx, `UPDATE sessions SET last_seen_at = $2, idle_expires_at = $3 WHERE id = $1`, id, lastSeen, idleExpiresAt)
}

// ListSessions implements storage.SessionStore, newest first.
func (s *Store) ListSessions(ctx context.Context, subject string) ([]storage.Session, error) {
	if !storable(subject) {
		return nil, nil
	}
	rows, err := s.q(ctx).Query(ctx, `SELECT `+sessionCols+` FROM sessions WHERE subject = $1 ORDER BY created_at DESC, id`, subject)
	return scanSessions(rows, err)
}

// DeleteSession implements storage.SessionStore.
func (s *Store) DeleteSession(ctx context.Context, subject, id string) error {
	if !storable(subject, id) {
		return nil
	}
	_, err := s.execCount(ctx, `DELETE FROM sessions WHERE id = $2 AND ($1 = '' OR subject = $1)`, subject, id)
	return err
}

// DeleteExpiredSessions implements storage.SessionStore. A limit <= 0
// deletes nothing.
func (s *Store) DeleteExpiredSessions(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	return s.execCount(ctx, `DELETE FROM sessions WHERE id IN (
		SELECT id FROM sessions WHERE expires_at < $1 OR idle_expires_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, before, limit)
}

// ErrUnstorable is returned for a user field that PostgreSQL text cannot
// hold exactly (invalid UTF-8 or NUL).
var ErrUnstorable = errors.New("postgres: value is not valid UTF-8 or contains NUL")

const userCols = `subject, upstream, upstream_subject, name, email, groups, claims,
	first_seen, last_seen, disabled, upstream_refresh, checked_at`

func scanUser(row pgx.Row) (*storage.User, error) {
	var u storage.User
	var claims []byte
	var first, last, checked *time.Time
	err := row.Scan(&u.Subject, &u.Upstream, &u.UpstreamSubject, &u.Name, &u.Email, &u.Groups, &claims,
		&first, &last, &u.Disabled, &u.UpstreamRefresh, &checked)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, storage.ErrNotFound
	}
	if err != nil {
		return nil, mapErr(err)
	}
	u.FirstSeen, u.LastSeen, u.CheckedAt = untime(first), untime(last), untime(checked)
	u.Groups = emptyNil(u.Groups)
	if err := json.Unmarshal(claims, &u.Claims); err != nil {
		return nil, fmt.Errorf("postgres: corrupt claims column: %w", err)
	}
	if len(u.Claims) == 0 {
		u.Claims = nil
	}
	if len(u.UpstreamRefresh) == 0 {
		u.UpstreamRefresh = nil
	}
	return &u, nil
}

// claimsJSON encodes claims as a JSON object, refusing strings that
// PostgreSQL cannot store.
func claimsJSON(claims map[string][]string) (string, error) {
	if claims == nil {
		return "{}", nil
	}
	for k, v := range claims {
		if !storable(k) || !storable(v...) {
			return "", ErrUnstorable
		}
	}
	b, err := json.Marshal(claims)
	return string(b), err
}

// byteaOrNil stores an empty byte slice as NULL.
func byteaOrNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// RecordLogin implements storage.UserStore in one upsert that returns the
// stored row.
func (s *Store) RecordLogin(ctx context.Context, u *storage.User) (*storage.User, error) {
	if !storable(u.Subject, u.Upstream, u.UpstreamSubject, u.Name, u.Email) || !storable(u.Groups...) {
		return nil, ErrUnstorable
	}
	claims, err := claimsJSON(u.Claims)
	if err != nil {
		return nil, err
	}
	last := u.LastSeen
	if last.IsZero() {
		last = time.Now()
	}
	return scanUser(s.q(ctx).QueryRow(ctx, `INSERT INTO users (`+userCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $8, false, $9, $10)
		ON CONFLICT (subject) DO UPDATE SET upstream = excluded.upstream, upstream_subject = excluded.upstream_subject,
			name = excluded.name, email = excluded.email, groups = excluded.groups, claims = excluded.claims,
			first_seen = COALESCE(users.first_seen, excluded.first_seen), last_seen = excluded.last_seen,
			upstream_refresh = COALESCE(excluded.upstream_refresh, users.upstream_refresh),
			checked_at = COALESCE(excluded.checked_at, users.checked_at)
		RETURNING `+userCols,
		u.Subject, u.Upstream, u.UpstreamSubject, u.Name, u.Email, arr(u.Groups), claims,
		last, byteaOrNil(u.UpstreamRefresh), ts(u.CheckedAt)))
}

// GetUser implements storage.UserStore.
func (s *Store) GetUser(ctx context.Context, subject string) (*storage.User, error) {
	if !storable(subject) {
		return nil, storage.ErrNotFound
	}
	return scanUser(s.q(ctx).QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE subject = $1`, subject))
}

// ListUsers implements storage.UserStore. Subjects compare bytewise (the
// column is COLLATE "C"), as in the other backends.
func (s *Store) ListUsers(ctx context.Context, afterSubject string, limit int) ([]storage.User, error) {
	out := []storage.User{}
	if limit <= 0 {
		return out, nil
	}
	if !storable(afterSubject) {
		return nil, ErrUnstorable
	}
	rows, err := s.q(ctx).Query(ctx, `SELECT `+userCols+` FROM users WHERE subject > $1 ORDER BY subject LIMIT $2`, afterSubject, limit)
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
	if !storable(subject) {
		return ErrUnstorable
	}
	_, err := s.q(ctx).Exec(ctx, `INSERT INTO users (subject, disabled) VALUES ($1, $2)
		ON CONFLICT (subject) DO UPDATE SET disabled = excluded.disabled`, subject, disabled)
	return mapErr(err)
}

// UpdateUpstreamSession implements storage.UserStore.
func (s *Store) UpdateUpstreamSession(ctx context.Context, subject string, sealedRefresh []byte, checkedAt time.Time, groups []string, claims map[string][]string) error {
	if !storable(subject) {
		return storage.ErrNotFound
	}
	if !storable(groups...) {
		return ErrUnstorable
	}
	c, err := claimsJSON(claims)
	if err != nil {
		return err
	}
	return s.execOne(ctx, `UPDATE users SET upstream_refresh = COALESCE($2, upstream_refresh), checked_at = $3,
		groups = $4, claims = $5::jsonb WHERE subject = $1`, subject, byteaOrNil(sealedRefresh), ts(checkedAt), arr(groups), c)
}
