package sqlstore

import (
	"context"

	"github.com/mcpauth/mcpauth/storage"
)

const connectionCols = `subject, connection_id, access_token, refresh_token, token_type, expires_at, scopes,
	needs_reconnect, created_at, updated_at`

func (s *Store) scanConnection(r Row, c *storage.Connection) error {
	d := s.d
	err := r.Scan(&c.Subject, &c.ConnectionID, &c.AccessToken, &c.RefreshToken, &c.TokenType, d.ScanTime(&c.ExpiresAt),
		d.ScanList(&c.Scopes), &c.NeedsReconnect, d.ScanTime(&c.CreatedAt), d.ScanTime(&c.UpdatedAt))
	c.Scopes = emptyNil(c.Scopes)
	if len(c.RefreshToken) == 0 {
		c.RefreshToken = nil
	}
	return err
}

func (s *Store) connectionArgs(c *storage.Connection) []any {
	d := s.d
	return []any{c.Subject, c.ConnectionID, c.AccessToken, bytesOrNil(c.RefreshToken), c.TokenType, d.Time(c.ExpiresAt),
		d.List(c.Scopes), c.NeedsReconnect, d.Time(c.CreatedAt), d.Time(c.UpdatedAt)}
}

func (s *Store) checkConnection(c *storage.Connection) error {
	if err := s.checkText(c.Subject, c.ConnectionID, c.TokenType); err != nil {
		return err
	}
	return s.checkLists(c.Scopes)
}

// GetConnection implements storage.ConnectionStore.
func (s *Store) GetConnection(ctx context.Context, subject, connectionID string) (*storage.Connection, error) {
	if !s.storable(subject, connectionID) {
		return nil, storage.ErrNotFound
	}
	return one(s, s.d.Read(ctx).QueryRow(ctx, `SELECT `+connectionCols+` FROM connections
		WHERE subject = $1 AND connection_id = $2`, subject, connectionID), s.scanConnection)
}

// PutConnection implements storage.ConnectionStore.
func (s *Store) PutConnection(ctx context.Context, c *storage.Connection) error {
	if err := s.checkConnection(c); err != nil {
		return err
	}
	_, err := s.execCount(ctx, `INSERT INTO connections (`+connectionCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (subject, connection_id) DO UPDATE
		SET access_token = excluded.access_token, refresh_token = excluded.refresh_token,
			token_type = excluded.token_type, expires_at = excluded.expires_at, scopes = excluded.scopes,
			needs_reconnect = excluded.needs_reconnect, updated_at = excluded.updated_at`,
		s.connectionArgs(c)...)
	return err
}

// UpdateConnection implements storage.ConnectionStore.
func (s *Store) UpdateConnection(ctx context.Context, subject, connectionID string, update func(storage.Connection) (storage.Connection, error)) error {
	if !s.storable(subject, connectionID) {
		return storage.ErrNotFound
	}
	return s.d.InTx(ctx, func(q Querier) error {
		old, err := one(s, q.QueryRow(ctx, `SELECT `+connectionCols+` FROM connections
			WHERE subject = $1 AND connection_id = $2`+s.syn.ForUpdate, subject, connectionID), s.scanConnection)
		if err != nil {
			return err
		}
		n, err := update(*old)
		if err != nil {
			return err
		}
		n.Subject, n.ConnectionID = subject, connectionID
		if err := s.checkConnection(&n); err != nil {
			return err
		}
		_, err = q.Exec(ctx, `UPDATE connections SET access_token = $3, refresh_token = $4, token_type = $5,
			expires_at = $6, scopes = $7, needs_reconnect = $8, created_at = $9, updated_at = $10
			WHERE subject = $1 AND connection_id = $2`, s.connectionArgs(&n)...)
		return s.fail(err)
	})
}

// DeleteConnection implements storage.ConnectionStore.
func (s *Store) DeleteConnection(ctx context.Context, subject, connectionID string) error {
	if !s.storable(subject, connectionID) {
		return storage.ErrNotFound
	}
	return s.execOne(ctx, `DELETE FROM connections WHERE subject = $1 AND connection_id = $2`, subject, connectionID)
}

// ListConnections implements storage.ConnectionStore.
func (s *Store) ListConnections(ctx context.Context, subject string) ([]storage.Connection, error) {
	if !s.storable(subject) {
		return nil, nil
	}
	rows, err := s.d.Read(ctx).Query(ctx, `SELECT `+connectionCols+` FROM connections
		WHERE $1 = '' OR subject = $1 ORDER BY subject`+s.syn.Collate+`, connection_id`+s.syn.Collate, subject)
	return collect(s, nil, rows, err, s.scanConnection)
}
