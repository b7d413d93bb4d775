package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

const consentCols = `subject, client_id, resource, scopes, redirect_uris, granted_at, expires_at`

func (s *Store) scanConsents(rows Rows, err error) ([]storage.Consent, error) {
	d := s.d
	return collect(s, nil, rows, err, func(r Row, c *storage.Consent) error {
		err := r.Scan(&c.Subject, &c.ClientID, &c.Resource, d.ScanList(&c.Scopes), d.ScanList(&c.RedirectURIs),
			d.ScanTime(&c.GrantedAt), d.ScanTime(&c.ExpiresAt))
		c.Scopes, c.RedirectURIs = emptyNil(c.Scopes), emptyNil(c.RedirectURIs)
		return err
	})
}

// GetConsent implements storage.ConsentStore.
func (s *Store) GetConsent(ctx context.Context, subject, clientID, resource string) (*storage.Consent, error) {
	if !s.storable(subject, clientID, resource) {
		return nil, storage.ErrNotFound
	}
	cs, err := s.scanConsents(s.d.Read(ctx).Query(ctx, `SELECT `+consentCols+` FROM consents
		WHERE subject = $1 AND client_id = $2 AND resource = $3`, subject, clientID, resource))
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
	if err := s.checkLists(c.Scopes, c.RedirectURIs); err != nil {
		return err
	}
	_, err := s.execCount(ctx, `INSERT INTO consents (`+consentCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (subject, client_id, resource) DO UPDATE
		SET scopes = excluded.scopes, redirect_uris = excluded.redirect_uris,
			granted_at = excluded.granted_at, expires_at = excluded.expires_at`,
		c.Subject, c.ClientID, c.Resource, s.d.List(c.Scopes), s.d.List(c.RedirectURIs), s.d.Time(c.GrantedAt), s.d.Time(c.ExpiresAt))
	return err
}

// DeleteConsents implements storage.ConsentStore.
func (s *Store) DeleteConsents(ctx context.Context, subject, clientID string) error {
	if !s.storable(subject, clientID) {
		return nil
	}
	_, err := s.execCount(ctx, `DELETE FROM consents WHERE subject = $1 AND ($2 = '' OR client_id = $2)`, subject, clientID)
	return err
}

// ListConsents implements storage.ConsentStore, ordered by client id then
// resource.
func (s *Store) ListConsents(ctx context.Context, subject string) ([]storage.Consent, error) {
	if !s.storable(subject) {
		return nil, nil
	}
	return s.scanConsents(s.d.Read(ctx).Query(ctx, `SELECT `+consentCols+` FROM consents
		WHERE subject = $1 ORDER BY client_id, resource`, subject))
}

// DeleteExpiredConsents implements storage.ConsentStore. A limit <= 0
// deletes nothing.
func (s *Store) DeleteExpiredConsents(ctx context.Context, before time.Time, limit int) (int, error) {
	return s.deleteBatch(ctx, "consents", "subject, client_id, resource", "expires_at < $1", before, limit)
}

// ListKeys implements storage.KeyStore: newest CreatedAt first, ties by ID
// descending.
func (s *Store) ListKeys(ctx context.Context) ([]storage.SigningKey, error) {
	rows, err := s.d.Read(ctx).Query(ctx, `SELECT id, algorithm, public_jwk, private_sealed, created_at, retired_at
		FROM signing_keys ORDER BY created_at DESC NULLS LAST, id DESC`)
	return collect(s, []storage.SigningKey{}, rows, err, func(r Row, k *storage.SigningKey) error {
		return r.Scan(&k.ID, &k.Algorithm, &k.PublicJWK, &k.PrivateSealed, s.d.ScanTime(&k.CreatedAt), s.d.ScanTime(&k.RetiredAt))
	})
}

// CreateKey implements storage.KeyStore.
func (s *Store) CreateKey(ctx context.Context, k *storage.SigningKey) error {
	_, err := s.execCount(ctx, `INSERT INTO signing_keys (id, algorithm, public_jwk, private_sealed, created_at, retired_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, k.ID, k.Algorithm, k.PublicJWK, k.PrivateSealed, s.d.Time(k.CreatedAt), s.d.Time(k.RetiredAt))
	return err
}

// RetireKeys implements storage.KeyStore.
func (s *Store) RetireKeys(ctx context.Context, keepID string, at time.Time) error {
	_, err := s.execCount(ctx, `UPDATE signing_keys SET retired_at = $2 WHERE id <> $1 AND retired_at IS NULL`, keepID, s.d.Time(at))
	return err
}

// DeleteKey implements storage.KeyStore.
func (s *Store) DeleteKey(ctx context.Context, id string) error {
	if !s.storable(id) {
		return storage.ErrNotFound
	}
	return s.execOne(ctx, `DELETE FROM signing_keys WHERE id = $1`, id)
}

// UseJTI implements storage.JTIStore (RFC 7523 §3) with one upsert that
// replaces only an expired record (by this process's clock). An expiry
// later than Syntax.MaxTime is stored as MaxTime.
func (s *Store) UseJTI(ctx context.Context, id string, expiresAt time.Time) error {
	if expiresAt.After(s.syn.MaxTime) {
		expiresAt = s.syn.MaxTime
	}
	n, err := s.execCount(ctx, `INSERT INTO jtis (id, expires_at) VALUES ($1, $2)
		ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at WHERE jtis.expires_at <= $3`,
		s.d.JTIKey(id), s.d.Time(expiresAt), s.d.Time(time.Now()))
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
	return s.deleteBatch(ctx, "jtis", "id", "expires_at < $1", before, limit)
}

// UpdateCounters implements storage.CounterStore in one transaction: the
// counters are read locked (Syntax.LockCounters, Syntax.ReadCounters; in
// key order, so that two callers never wait on each other in a cycle),
// update runs, and they are written back or deleted.
func (s *Store) UpdateCounters(ctx context.Context, keys []string, now time.Time, update func([]storage.Counter) ([]storage.Counter, error)) error {
	if err := s.checkText(keys...); err != nil {
		return err
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	return s.d.InTx(ctx, func(q Querier) error {
		if s.syn.LockCounters != "" {
			if _, err := q.Exec(ctx, s.syn.LockCounters, s.d.List(sorted)); err != nil {
				return s.fail(err)
			}
		}
		got := map[string]storage.Counter{}
		rows, err := q.Query(ctx, s.syn.ReadCounters, s.d.List(sorted))
		err = s.scanAll(rows, err, func(r Rows) error {
			var c storage.Counter
			if err := r.Scan(&c.Key, &c.Count, s.d.ScanTime(&c.Until), s.d.ScanTime(&c.ExpiresAt)); err != nil {
				return err
			}
			if !c.ExpiresAt.After(now) {
				c = storage.Counter{Key: c.Key}
			}
			got[c.Key] = c
			return nil
		})
		if err != nil {
			return err
		}
		in := make([]storage.Counter, len(keys))
		for i, k := range keys {
			in[i] = got[k]
			in[i].Key = k
		}
		out, err := update(in)
		if err != nil {
			return err
		}
		if len(out) != len(keys) {
			return fmt.Errorf("%s: UpdateCounters: update returned the wrong number of counters", s.syn.Name)
		}
		for i, k := range keys {
			c := out[i]
			if c.ExpiresAt.IsZero() {
				_, err = q.Exec(ctx, `DELETE FROM counters WHERE key = $1`, k)
			} else {
				_, err = q.Exec(ctx, `INSERT INTO counters (key, count, until, expires_at) VALUES ($1, $2, $3, $4)
					ON CONFLICT (key) DO UPDATE SET count = excluded.count, until = excluded.until, expires_at = excluded.expires_at`,
					k, c.Count, s.d.Time(c.Until), s.d.Time(c.ExpiresAt))
			}
			if err != nil {
				return s.fail(err)
			}
		}
		return nil
	})
}

// DeleteExpiredCounters implements storage.CounterStore. A limit <= 0
// deletes nothing.
func (s *Store) DeleteExpiredCounters(ctx context.Context, before time.Time, limit int) (int, error) {
	return s.deleteBatch(ctx, "counters", "key", "expires_at IS NULL OR expires_at < $1", before, limit)
}

const sessionCols = `id, subject, created_at, last_seen_at, idle_expires_at, expires_at, user_agent, address`

func (s *Store) scanSessions(rows Rows, err error) ([]storage.Session, error) {
	d := s.d
	return collect(s, nil, rows, err, func(r Row, x *storage.Session) error {
		return r.Scan(&x.ID, &x.Subject, d.ScanTime(&x.CreatedAt), d.ScanTime(&x.LastSeenAt),
			d.ScanTime(&x.IdleExpiresAt), d.ScanTime(&x.ExpiresAt), &x.UserAgent, &x.Address)
	})
}

// CreateSession implements storage.SessionStore.
func (s *Store) CreateSession(ctx context.Context, x *storage.Session) error {
	if err := s.checkText(x.ID, x.Subject, x.UserAgent, x.Address); err != nil {
		return err
	}
	d := s.d
	_, err := s.execCount(ctx, `INSERT INTO sessions (`+sessionCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		x.ID, x.Subject, d.Time(x.CreatedAt), d.Time(x.LastSeenAt), d.Time(x.IdleExpiresAt), d.Time(x.ExpiresAt), x.UserAgent, x.Address)
	return err
}

// GetSession implements storage.SessionStore.
func (s *Store) GetSession(ctx context.Context, id string) (*storage.Session, error) {
	if !s.storable(id) {
		return nil, storage.ErrNotFound
	}
	list, err := s.scanSessions(s.d.Read(ctx).Query(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = $1`, id))
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
	if !s.storable(id) {
		return storage.ErrNotFound
	}
	return s.execOne(ctx, `UPDATE sessions SET last_seen_at = $2, idle_expires_at = $3 WHERE id = $1`,
		id, s.d.Time(lastSeen), s.d.Time(idleExpiresAt))
}

// ListSessions implements storage.SessionStore, newest first.
func (s *Store) ListSessions(ctx context.Context, subject string) ([]storage.Session, error) {
	if !s.storable(subject) {
		return nil, nil
	}
	return s.scanSessions(s.d.Read(ctx).Query(ctx, `SELECT `+sessionCols+` FROM sessions WHERE subject = $1
		ORDER BY created_at DESC, id`, subject))
}

// DeleteSession implements storage.SessionStore.
func (s *Store) DeleteSession(ctx context.Context, subject, id string) error {
	if !s.storable(subject, id) {
		return nil
	}
	_, err := s.execCount(ctx, `DELETE FROM sessions WHERE id = $2 AND ($1 = '' OR subject = $1)`, subject, id)
	return err
}

// DeleteExpiredSessions implements storage.SessionStore. A limit <= 0
// deletes nothing.
func (s *Store) DeleteExpiredSessions(ctx context.Context, before time.Time, limit int) (int, error) {
	return s.deleteBatch(ctx, "sessions", "id", "expires_at < $1 OR idle_expires_at < $1", before, limit)
}

const userCols = `subject, upstream, upstream_subject, name, email, groups, claims,
	first_seen, last_seen, disabled, upstream_refresh, checked_at`

// scanUser scans a row of userCols into u.
func (s *Store) scanUser(row Row, u *storage.User) error {
	d := s.d
	var claims []byte
	err := row.Scan(&u.Subject, &u.Upstream, &u.UpstreamSubject, &u.Name, &u.Email, d.ScanList(&u.Groups), &claims,
		d.ScanTime(&u.FirstSeen), d.ScanTime(&u.LastSeen), &u.Disabled, &u.UpstreamRefresh, d.ScanTime(&u.CheckedAt))
	if err != nil {
		return err
	}
	return s.finishUser(u, claims)
}

// finishUser sets what a users row leaves for Go to decide: the claims,
// and nil for empty lists and bytes.
func (s *Store) finishUser(u *storage.User, claims []byte) error {
	var err error
	if u.Claims, err = s.decodeClaims(claims); err != nil {
		return err
	}
	u.Groups = emptyNil(u.Groups)
	if len(u.UpstreamRefresh) == 0 {
		u.UpstreamRefresh = nil
	}
	return nil
}

// claimsJSON encodes claims as a JSON object, refusing what the database
// cannot keep exactly (Dialect.CheckText).
func (s *Store) claimsJSON(claims map[string][]string) (string, error) {
	if claims == nil {
		return "{}", nil
	}
	for k, v := range claims {
		if err := s.checkText(k); err != nil {
			return "", err
		}
		if err := s.checkText(v...); err != nil {
			return "", err
		}
	}
	b, err := json.Marshal(claims)
	return string(b), err
}

// RecordLogin implements storage.UserStore in one upsert that returns the
// stored row.
func (s *Store) RecordLogin(ctx context.Context, u *storage.User) (*storage.User, error) {
	if err := s.checkText(u.Subject, u.Upstream, u.UpstreamSubject, u.Name, u.Email); err != nil {
		return nil, err
	}
	if err := s.checkText(u.Groups...); err != nil {
		return nil, err
	}
	claims, err := s.claimsJSON(u.Claims)
	if err != nil {
		return nil, err
	}
	last := u.LastSeen
	if last.IsZero() {
		last = time.Now()
	}
	var out storage.User
	var rowClaims []byte
	d := s.d
	err = d.WriteRow(ctx, []any{&out.Subject, &out.Upstream, &out.UpstreamSubject, &out.Name, &out.Email,
		d.ScanList(&out.Groups), &rowClaims, d.ScanTime(&out.FirstSeen), d.ScanTime(&out.LastSeen), &out.Disabled,
		&out.UpstreamRefresh, d.ScanTime(&out.CheckedAt)}, // userCols, as scanUser
		`INSERT INTO users (`+userCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, false, $9, $10)
		ON CONFLICT (subject) DO UPDATE SET upstream = excluded.upstream, upstream_subject = excluded.upstream_subject,
			name = excluded.name, email = excluded.email, groups = excluded.groups, claims = excluded.claims,
			first_seen = COALESCE(users.first_seen, excluded.first_seen), last_seen = excluded.last_seen,
			upstream_refresh = COALESCE(excluded.upstream_refresh, users.upstream_refresh),
			checked_at = COALESCE(excluded.checked_at, users.checked_at)
		RETURNING `+userCols,
		u.Subject, u.Upstream, u.UpstreamSubject, u.Name, u.Email, d.List(u.Groups), claims,
		d.Time(last), bytesOrNil(u.UpstreamRefresh), d.Time(u.CheckedAt))
	if err != nil {
		return nil, s.fail(err)
	}
	if err := s.finishUser(&out, rowClaims); err != nil {
		return nil, s.d.MapErr(err)
	}
	return &out, nil
}

// GetUser implements storage.UserStore.
func (s *Store) GetUser(ctx context.Context, subject string) (*storage.User, error) {
	if !s.storable(subject) {
		return nil, storage.ErrNotFound
	}
	return one(s, s.d.Read(ctx).QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE subject = $1`, subject), s.scanUser)
}

// ListUsers implements storage.UserStore. Subjects compare bytewise (the
// column's collation), as in the other backends.
func (s *Store) ListUsers(ctx context.Context, afterSubject string, limit int) ([]storage.User, error) {
	if limit <= 0 {
		return []storage.User{}, nil
	}
	if !s.storable(afterSubject) {
		return nil, s.checkText(afterSubject)
	}
	rows, err := s.d.Read(ctx).Query(ctx, `SELECT `+userCols+` FROM users WHERE subject > $1 ORDER BY subject LIMIT $2`, afterSubject, limit)
	return collect(s, []storage.User{}, rows, err, s.scanUser)
}

// SetUserDisabled implements storage.UserStore.
func (s *Store) SetUserDisabled(ctx context.Context, subject string, disabled bool) error {
	if err := s.checkText(subject); err != nil {
		return err
	}
	_, err := s.execCount(ctx, `INSERT INTO users (subject, disabled) VALUES ($1, $2)
		ON CONFLICT (subject) DO UPDATE SET disabled = excluded.disabled`, subject, disabled)
	return err
}

// UpdateUpstreamSession implements storage.UserStore.
func (s *Store) UpdateUpstreamSession(ctx context.Context, subject string, sealedRefresh []byte, checkedAt time.Time, groups []string, claims map[string][]string) error {
	if !s.storable(subject) {
		return storage.ErrNotFound
	}
	if err := s.checkText(groups...); err != nil {
		return err
	}
	c, err := s.claimsJSON(claims)
	if err != nil {
		return err
	}
	return s.execOne(ctx, `UPDATE users SET upstream_refresh = COALESCE($2, upstream_refresh), checked_at = $3,
		groups = $4, claims = $5 WHERE subject = $1`, subject, bytesOrNil(sealedRefresh), s.d.Time(checkedAt), s.d.List(groups), c)
}
