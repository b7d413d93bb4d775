package ops

import (
	"context"
	"time"

	"github.com/mcpauth/mcpauth/connections"
)

// ConnectionVault is what Ops needs of the connected accounts
// (*connections.Vault): their records without tokens, and disconnecting,
// which revokes at the provider where it can.
type ConnectionVault interface {
	List(ctx context.Context, subject string) ([]connections.Status, error)
	Disconnect(ctx context.Context, subject, id string) (bool, error)
}

// Connection is a person's connected account as an operator sees it. It
// never holds the provider's tokens.
type Connection struct {
	Subject    string   `json:"subject"`
	Connection string   `json:"connection"`
	Scopes     []string `json:"scopes"`
	// ExpiresAt is when the current access token expires (a release
	// refreshes it).
	ExpiresAt      *time.Time `json:"expires_at,omitempty"`
	NeedsReconnect bool       `json:"needs_reconnect"`
	// Configured is false for a connection no longer in the configuration
	// file: its tokens are released no more.
	Configured bool       `json:"configured"`
	CreatedAt  *time.Time `json:"created_at,omitempty"`
	UpdatedAt  *time.Time `json:"updated_at,omitempty"`
}

func connectionView(s connections.Status) Connection {
	return Connection{Subject: s.Subject, Connection: s.ConnectionID, Scopes: nonNil(s.Scopes), ExpiresAt: timePtr(s.ExpiresAt),
		NeedsReconnect: s.NeedsReconnect, Configured: s.Configured, CreatedAt: timePtr(s.CreatedAt), UpdatedAt: timePtr(s.UpdatedAt)}
}

// ListConnections lists the connected accounts, of one person when user
// is set, in subject then connection order.
func (o *Ops) ListConnections(ctx context.Context, user string) ([]Connection, error) {
	ss, err := o.Connections.List(ctx, user)
	if err != nil {
		return nil, err
	}
	out := make([]Connection, 0, len(ss))
	for _, s := range ss {
		out = append(out, connectionView(s))
	}
	return out, nil
}

// RevokeConnections disconnects user's account at connection (every
// connection of theirs when it is ""): the records go, so no token of
// theirs is released any more, and the provider is asked to revoke the
// tokens where it can (RFC 7009). It returns what was revoked.
func (o *Ops) RevokeConnections(ctx context.Context, actor, user, connection string) ([]Connection, error) {
	if user == "" {
		return nil, invalidf("name the user whose connections to revoke")
	}
	ss, err := o.Connections.List(ctx, user)
	if err != nil {
		return nil, err
	}
	out := []Connection{}
	for _, s := range ss {
		if connection != "" && s.ConnectionID != connection {
			continue
		}
		ok, err := o.Connections.Disconnect(ctx, user, s.ConnectionID)
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, connectionView(s))
			o.audit(ctx, actor, "admin.connections.revoked", "sub", user, "connection", s.ConnectionID)
		}
	}
	if connection != "" && len(out) == 0 {
		return nil, ErrNotFound
	}
	return out, nil
}
