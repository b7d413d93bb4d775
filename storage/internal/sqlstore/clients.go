package sqlstore

import (
	"context"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

const clientCols = `id, secret_hash, secret_expires_at, public, name, redirect_uris, grant_types,
	response_types, scopes, resources, token_endpoint_auth_method, jwks, jwks_uri,
	application_type, metadata, registration_token_hash, source, created_at, updated_at, last_used_at`

const selectClient = `SELECT ` + clientCols + ` FROM clients WHERE id = $1`

func (s *Store) clientArgs(c *storage.Client) []any {
	d := s.d
	return []any{c.ID, c.SecretHash, d.Time(c.SecretExpiresAt), c.Public, c.Name, d.List(c.RedirectURIs),
		d.List(c.GrantTypes), d.List(c.ResponseTypes), d.List(c.Scopes), d.List(c.Resources),
		c.TokenEndpointAuthMethod, c.JWKS, c.JWKSURI, c.ApplicationType, c.Metadata,
		c.RegistrationTokenHash, c.Source, d.Time(c.CreatedAt), d.Time(c.UpdatedAt), d.Time(c.LastUsedAt)}
}

func (s *Store) checkClient(c *storage.Client) error {
	return s.checkLists(c.RedirectURIs, c.GrantTypes, c.ResponseTypes, c.Scopes, c.Resources)
}

func (s *Store) scanClient(row Row, c *storage.Client) error {
	d := s.d
	err := row.Scan(&c.ID, &c.SecretHash, d.ScanTime(&c.SecretExpiresAt), &c.Public, &c.Name,
		d.ScanList(&c.RedirectURIs), d.ScanList(&c.GrantTypes), d.ScanList(&c.ResponseTypes),
		d.ScanList(&c.Scopes), d.ScanList(&c.Resources), &c.TokenEndpointAuthMethod,
		&c.JWKS, &c.JWKSURI, &c.ApplicationType, &c.Metadata, &c.RegistrationTokenHash,
		&c.Source, d.ScanTime(&c.CreatedAt), d.ScanTime(&c.UpdatedAt), d.ScanTime(&c.LastUsedAt))
	c.RedirectURIs, c.GrantTypes, c.ResponseTypes = emptyNil(c.RedirectURIs), emptyNil(c.GrantTypes), emptyNil(c.ResponseTypes)
	c.Scopes, c.Resources = emptyNil(c.Scopes), emptyNil(c.Resources)
	return err
}

// GetClient implements storage.ClientStore.
func (s *Store) GetClient(ctx context.Context, id string) (*storage.Client, error) {
	if !s.storable(id) {
		return nil, storage.ErrNotFound
	}
	return one(s, s.d.Read(ctx).QueryRow(ctx, selectClient, id), s.scanClient)
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
	if err := s.checkClient(&n); err != nil {
		return err
	}
	_, err := s.execCount(ctx, `INSERT INTO clients (`+clientCols+`) VALUES
		($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20)`, s.clientArgs(&n)...)
	return err
}

// UpdateClient implements storage.ClientStore: read, update and write in
// one transaction (or the caller's), the row locked (Syntax.ForUpdate)
// while update runs.
func (s *Store) UpdateClient(ctx context.Context, id string, update func(storage.Client) (storage.Client, error)) error {
	if !s.storable(id) {
		return storage.ErrNotFound
	}
	return s.d.InTx(ctx, func(q Querier) error {
		old, err := one(s, q.QueryRow(ctx, s.clientForUpdate, id), s.scanClient)
		if err != nil {
			return err
		}
		n, err := update(*old)
		if err != nil {
			return err // unchanged, as storage.ClientStore promises
		}
		n.ID = id
		if err := s.checkClient(&n); err != nil {
			return err
		}
		_, err = q.Exec(ctx, `UPDATE clients SET secret_hash=$2, secret_expires_at=$3, public=$4, name=$5,
			redirect_uris=$6, grant_types=$7, response_types=$8, scopes=$9, resources=$10,
			token_endpoint_auth_method=$11, jwks=$12, jwks_uri=$13, application_type=$14, metadata=$15,
			registration_token_hash=$16, source=$17, created_at=$18, updated_at=$19, last_used_at=$20
			WHERE id = $1`, s.clientArgs(&n)...)
		return s.fail(err)
	})
}

// DeleteClient implements storage.ClientStore: the client and, in the same
// transaction, its grants.
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	if !s.storable(id) {
		return storage.ErrNotFound
	}
	return s.d.InTx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `DELETE FROM clients WHERE id = $1`, id)
		if err != nil {
			return s.fail(err)
		}
		if n == 0 {
			return storage.ErrNotFound
		}
		_, err = s.revoke(ctx, q, storage.GrantFilter{ClientID: id})
		return err
	})
}

// CountClients implements storage.ClientStore.
func (s *Store) CountClients(ctx context.Context, source string) (int, error) {
	if !s.storable(source) {
		return 0, nil
	}
	var n int
	err := s.d.Read(ctx).QueryRow(ctx, `SELECT count(*) FROM clients WHERE $1 = '' OR source = $1`, source).Scan(&n)
	return n, s.fail(err)
}

// ListClients implements storage.ClientStore. IDs compare bytewise
// (Syntax.Collate), as in the other backends.
func (s *Store) ListClients(ctx context.Context, afterID string, limit int) ([]storage.Client, error) {
	if limit <= 0 {
		return []storage.Client{}, nil
	}
	rows, err := s.d.Read(ctx).Query(ctx, s.listClients, afterID, limit)
	return collect(s, []storage.Client{}, rows, err, s.scanClient)
}

// ReapClients implements storage.ClientStore: registered clients never
// used since neverUsedBefore or idle since idleBefore are deleted with
// their grants, in one transaction. Rows another reaper holds are passed
// over (Syntax.SkipLocked). A limit <= 0 deletes nothing.
func (s *Store) ReapClients(ctx context.Context, neverUsedBefore, idleBefore time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	var n int
	err := s.d.InTx(ctx, func(q Querier) error {
		ids, err := ScanStrings(q.Query(ctx, `DELETE FROM clients WHERE id IN (
			SELECT id FROM clients WHERE source IN ('dcr', 'cimd')
			AND ((last_used_at IS NULL AND created_at < $1) OR last_used_at < $2)
			ORDER BY id LIMIT $3`+s.syn.SkipLocked+`) RETURNING id`, s.d.Time(neverUsedBefore), s.d.Time(idleBefore), limit))
		if err != nil {
			return s.fail(err)
		}
		for _, id := range ids {
			if _, err := s.revoke(ctx, q, storage.GrantFilter{ClientID: id}); err != nil {
				return err
			}
		}
		n = len(ids)
		return nil
	})
	return n, err
}
