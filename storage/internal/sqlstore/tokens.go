package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// TokenCols are the columns of a tokens row, in the order of TokenArgs.
const TokenCols = `kind, signature, request_id, client_id, subject, active, created_at, expires_at, rotated_at, data, status_idx`

// InsertToken writes one token, with TokenArgs.
const InsertToken = `INSERT INTO tokens (` + TokenCols + `) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)`

// TokenArgs are the arguments of InsertToken for t.
func TokenArgs(d Dialect, t *storage.Token) []any {
	return []any{string(t.Kind), t.Signature, t.RequestID, t.ClientID, t.Subject, t.Active,
		d.Time(t.CreatedAt), d.Time(t.ExpiresAt), d.Time(t.RotatedAt), t.Data, t.StatusIndex}
}

// tokenDest are the scan destinations of TokenCols into t; kind receives
// the kind.
func (s *Store) tokenDest(t *storage.Token, kind *string) []any {
	d := s.d
	return []any{kind, &t.Signature, &t.RequestID, &t.ClientID, &t.Subject, &t.Active,
		d.ScanTime(&t.CreatedAt), d.ScanTime(&t.ExpiresAt), d.ScanTime(&t.RotatedAt), &t.Data, &t.StatusIndex}
}

// CreateToken implements storage.TokenStore.
func (s *Store) CreateToken(ctx context.Context, t *storage.Token) error {
	_, err := s.execCount(ctx, InsertToken, TokenArgs(s.d, t)...)
	return err
}

// GetToken implements storage.TokenStore.
func (s *Store) GetToken(ctx context.Context, kind storage.TokenKind, signature string) (*storage.Token, error) {
	if !s.storable(string(kind), signature) {
		return nil, storage.ErrNotFound
	}
	var t storage.Token
	var k string
	err := s.d.Read(ctx).QueryRow(ctx, `SELECT `+TokenCols+` FROM tokens WHERE kind = $1 AND signature = $2`,
		string(kind), signature).Scan(s.tokenDest(&t, &k)...)
	if err != nil {
		return nil, s.fail(err)
	}
	t.Kind = storage.TokenKind(k)
	return &t, nil
}

// tokenWithPersonSQL reads a token's row and, by primary key, the three
// columns of its subject's users row that say whether the person is
// active, coalesced so that a token without a person scans into plain
// values. New appends the join's collation and the WHERE clause.
const tokenWithPersonSQL = `SELECT t.kind, t.signature, t.request_id, t.client_id, t.subject, t.active,
			t.created_at, t.expires_at, t.rotated_at, t.data, t.status_idx,
			u.subject IS NOT NULL, COALESCE(u.upstream, ''), COALESCE(u.disabled, false)
		FROM tokens t LEFT JOIN users u ON t.subject <> '' AND u.subject = t.subject`

// GetTokenWithPerson implements storage.TokenPersonReader in one
// statement.
func (s *Store) GetTokenWithPerson(ctx context.Context, kind storage.TokenKind, signature string) (*storage.Token, storage.PersonStatus, error) {
	var ps storage.PersonStatus
	if !s.storable(string(kind), signature) {
		return nil, ps, storage.ErrNotFound
	}
	var t storage.Token
	var k string
	dest := append(s.tokenDest(&t, &k), &ps.Recorded, &ps.Upstream, &ps.Disabled)
	if err := s.d.Read(ctx).QueryRow(ctx, s.tokenWithPerson, string(kind), signature).Scan(dest...); err != nil {
		return nil, storage.PersonStatus{}, s.fail(err)
	}
	t.Kind = storage.TokenKind(k)
	return &t, ps, nil
}

// inactiveOrMissing tells why a conditional UPDATE changed no row.
func (s *Store) inactiveOrMissing(ctx context.Context, kind storage.TokenKind, signature string) error {
	var exists bool
	err := s.d.Read(ctx).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tokens WHERE kind = $1 AND signature = $2)`,
		string(kind), signature).Scan(&exists)
	if err != nil {
		return s.fail(err)
	}
	if !exists {
		return storage.ErrNotFound
	}
	return storage.ErrInactive
}

// DeactivateToken implements storage.TokenStore with one conditional
// UPDATE (RFC 6749 §4.1.2: a code is used once).
func (s *Store) DeactivateToken(ctx context.Context, kind storage.TokenKind, signature string) error {
	if !s.storable(string(kind), signature) {
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

// RotateToken implements storage.TokenStore with one conditional UPDATE
// (RFC 9700 §4.14.2): it matches an active token never rotated, or
// (grace > 0) rotated at or after now-grace; the first rotation time is
// kept.
func (s *Store) RotateToken(ctx context.Context, kind storage.TokenKind, signature string, now time.Time, grace time.Duration) error {
	if !s.storable(string(kind), signature) {
		return storage.ErrNotFound
	}
	n, err := s.execCount(ctx, `UPDATE tokens SET rotated_at = COALESCE(rotated_at, $3)
		WHERE kind = $1 AND signature = $2 AND active
		AND (rotated_at IS NULL OR ($4 AND rotated_at >= $5))`,
		string(kind), signature, s.d.Time(now), grace > 0, s.d.Time(now.Add(-grace)))
	if err != nil {
		return err
	}
	if n == 0 {
		return s.inactiveOrMissing(ctx, kind, signature)
	}
	return nil
}

// DeleteToken implements storage.TokenStore.
func (s *Store) DeleteToken(ctx context.Context, kind storage.TokenKind, signature string) error {
	if !s.storable(string(kind), signature) {
		return storage.ErrNotFound
	}
	return s.execOne(ctx, `DELETE FROM tokens WHERE kind = $1 AND signature = $2`, string(kind), signature)
}

// DeleteExpiredTokens implements storage.TokenStore: one short statement
// per batch. A limit <= 0 deletes nothing.
func (s *Store) DeleteExpiredTokens(ctx context.Context, before time.Time, limit int) (int, error) {
	return s.deleteBatch(ctx, "tokens", "kind, signature", "expires_at < $1", before, limit)
}

// grantWhere is the condition on tokens rows that f matches, with
// placeholders numbered from $1, and its arguments.
func grantWhere(f storage.GrantFilter) (string, []any) {
	var conds []string
	var args []any
	for _, c := range []struct{ col, v string }{{"client_id", f.ClientID}, {"subject", f.Subject}, {"request_id", f.RequestID}} {
		if c.v != "" {
			args = append(args, c.v)
			conds = append(conds, c.col+" = $"+strconv.Itoa(len(args)))
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

// revoke revokes the grants f matches in the transaction q.
func (s *Store) revoke(ctx context.Context, q Querier, f storage.GrantFilter) (int, error) {
	where, args := grantWhere(f)
	return s.d.RevokeGrants(ctx, q, grantRows(where), args)
}

// ListGrants implements storage.GrantStore.
func (s *Store) ListGrants(ctx context.Context, f storage.GrantFilter, now time.Time, limit int) ([]storage.Grant, error) {
	if !s.storable(f.Subject, f.ClientID, f.RequestID) {
		return nil, nil
	}
	where, args := grantWhere(f)
	args = append(args, s.d.Time(now))
	query := `SELECT request_id, max(subject), max(client_id), min(created_at), max(created_at),
		max(expires_at), max(status_idx) FROM tokens WHERE ` + where + ` GROUP BY request_id
		HAVING count(*) FILTER (WHERE active AND kind IN ('access', 'refresh') AND expires_at > $` + strconv.Itoa(len(args)) + `) > 0
		ORDER BY max(created_at) DESC, request_id`
	if limit > 0 {
		args = append(args, limit)
		query += ` LIMIT $` + strconv.Itoa(len(args))
	}
	rows, err := s.d.Read(ctx).Query(ctx, query, args...)
	d := s.d
	return collect(s, nil, rows, err, func(r Row, g *storage.Grant) error {
		return r.Scan(&g.RequestID, &g.Subject, &g.ClientID, d.ScanTime(&g.CreatedAt), d.ScanTime(&g.LastUsedAt),
			d.ScanTime(&g.ExpiresAt), &g.StatusIndex)
	})
}

// RevokeGrants implements storage.GrantStore in one transaction: the
// grants, and the consents of the subject or client (RFC 7009 §2.1: a
// revoked grant is not silently granted again).
func (s *Store) RevokeGrants(ctx context.Context, f storage.GrantFilter) (int, error) {
	if f.IsZero() {
		return 0, storage.ErrInvalidFilter
	}
	if !s.storable(f.Subject, f.ClientID, f.RequestID) {
		return 0, nil
	}
	var n int
	err := s.d.InTx(ctx, func(q Querier) error {
		var err error
		if n, err = s.revoke(ctx, q, f); err != nil {
			return err
		}
		if f.RequestID != "" {
			return nil
		}
		where, args := grantWhere(storage.GrantFilter{Subject: f.Subject, ClientID: f.ClientID})
		_, err = q.Exec(ctx, `DELETE FROM consents WHERE `+where, args...)
		return s.fail(err)
	})
	return n, err
}

// AllocateStatusIndices implements storage.StatusStore with one UPDATE,
// which serialises concurrent callers on the counter row.
func (s *Store) AllocateStatusIndices(ctx context.Context, n int) (int64, error) {
	if n < 1 {
		return 0, errors.New(s.syn.Name + ": AllocateStatusIndices needs n >= 1")
	}
	var last int64
	err := s.d.WriteRow(ctx, []any{&last}, `UPDATE status_counter SET last = last + $1 WHERE id = 1 RETURNING last`, n)
	if err != nil {
		return 0, s.fail(err)
	}
	return last - int64(n) + 1, nil
}

// StatusList implements storage.StatusStore in one statement: the counter
// first, then the invalid indices in order.
func (s *Store) StatusList(ctx context.Context, now time.Time) (int64, []int64, error) {
	var last int64
	var invalid []int64
	rows, err := s.d.Read(ctx).Query(ctx, `SELECT 0, last FROM status_counter WHERE id = 1
		UNION ALL
		SELECT 1, idx FROM token_status WHERE status = 1 AND (expires_at IS NULL OR expires_at >= $1)
		ORDER BY 1, 2`, s.d.Time(now))
	err = s.scanAll(rows, err, func(r Rows) error {
		var part, v int64
		if err := r.Scan(&part, &v); err != nil {
			return err
		}
		if part == 0 {
			last = v
		} else {
			invalid = append(invalid, v)
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return last, invalid, nil
}

// DeleteExpiredStatuses implements storage.StatusStore. A limit <= 0
// deletes nothing.
func (s *Store) DeleteExpiredStatuses(ctx context.Context, before time.Time, limit int) (int, error) {
	return s.deleteBatch(ctx, "token_status", "idx", "expires_at < $1", before, limit)
}

// decodeClaims reads a claims column (a JSON object; NULL or {} for none).
// Its error is to be mapped (Dialect.MapErr names the backend).
func (s *Store) decodeClaims(b []byte) (map[string][]string, error) {
	if len(b) == 0 || string(b) == "{}" {
		return nil, nil
	}
	var out map[string][]string
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("corrupt claims column: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
