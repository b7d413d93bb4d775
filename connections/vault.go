package connections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/mcpauth/mcpauth/internal/seal"
	"github.com/mcpauth/mcpauth/storage"
)

// Errors of Vault.Token.
var (
	// ErrNotConnected: the person has not connected this account.
	ErrNotConnected = errors.New("connections: not connected")
	// ErrReconnect: the provider refused to refresh the person's token;
	// they must connect again.
	ErrReconnect = errors.New("connections: must reconnect")
	// ErrUnknown: no such connection is configured.
	ErrUnknown = errors.New("connections: unknown connection")
)

// refreshEarly is how long before its expiry an access token is refreshed
// rather than handed out.
const refreshEarly = 30 * time.Second

// Audit records an event without secrets (as/loginui's audit log).
type Audit func(ctx context.Context, event string, kv ...any)

// VaultConfig configures a Vault.
type VaultConfig struct {
	Providers []*Provider
	Store     storage.ConnectionStore
	// Secret is the server secret (at least 32 bytes) the sealing key is
	// derived from.
	Secret []byte
	Now    func() time.Time
	Logger *slog.Logger
	// Audit records connection events; nil: none.
	Audit Audit
}

// Vault keeps people's provider tokens sealed in storage, and hands out
// current ones. It is safe for concurrent use.
type Vault struct {
	providers []*Provider
	store     storage.ConnectionStore
	sealer    *seal.Sealer
	now       func() time.Time
	log       *slog.Logger
	audit     Audit

	mu      sync.Mutex
	flights map[string]*flight
}

// flight is one refresh in progress: callers for the same person and
// connection wait for it rather than spending the refresh token twice.
type flight struct {
	done chan struct{}
	tok  *Token
	err  error
}

// NewVault returns a Vault over providers and store.
func NewVault(cfg VaultConfig) (*Vault, error) {
	s, err := seal.New(cfg.Secret, "mcpauth connection token")
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, p := range cfg.Providers {
		if ids[p.ID()] {
			return nil, fmt.Errorf("connections: duplicate connection %q", p.ID())
		}
		ids[p.ID()] = true
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Audit == nil {
		cfg.Audit = func(context.Context, string, ...any) {}
	}
	return &Vault{providers: slices.Clone(cfg.Providers), store: cfg.Store, sealer: s, now: cfg.Now, log: cfg.Logger,
		audit: cfg.Audit, flights: map[string]*flight{}}, nil
}

// Providers returns the configured connections, in configuration order.
func (v *Vault) Providers() []*Provider { return slices.Clone(v.providers) }

// Provider returns the connection id, or nil.
func (v *Vault) Provider(id string) *Provider {
	for _, p := range v.providers {
		if p.ID() == id {
			return p
		}
	}
	return nil
}

// ForResource returns the connection whose Resource is uri (canonical),
// or nil.
func (v *Vault) ForResource(uri string) *Provider {
	for _, p := range v.providers {
		if p.Resource() == uri {
			return p
		}
	}
	return nil
}

// ad binds a sealed token to its person, connection and kind.
func ad(subject, id, kind string) []byte { return []byte(subject + "\x00" + id + "\x00" + kind) }

// record seals tok into the record of subject's connection id.
func (v *Vault) record(subject, id string, tok *Token, now time.Time) *storage.Connection {
	c := &storage.Connection{
		Subject: subject, ConnectionID: id,
		AccessToken: v.sealer.Seal([]byte(tok.AccessToken), ad(subject, id, "access")),
		TokenType:   tok.TokenType, ExpiresAt: tok.ExpiresAt, Scopes: tok.Scopes,
		CreatedAt: now, UpdatedAt: now,
	}
	if tok.RefreshToken != "" {
		c.RefreshToken = v.sealer.Seal([]byte(tok.RefreshToken), ad(subject, id, "refresh"))
	}
	return c
}

// open returns the tokens of a record.
func (v *Vault) open(c *storage.Connection) (*Token, error) {
	at, err := v.sealer.Open(c.AccessToken, ad(c.Subject, c.ConnectionID, "access"))
	if err != nil {
		return nil, fmt.Errorf("connections: opening the access token of %s/%s: %w", c.Subject, c.ConnectionID, err)
	}
	tok := &Token{AccessToken: string(at), TokenType: c.TokenType, ExpiresAt: c.ExpiresAt, Scopes: slices.Clone(c.Scopes)}
	if len(c.RefreshToken) > 0 {
		rt, err := v.sealer.Open(c.RefreshToken, ad(c.Subject, c.ConnectionID, "refresh"))
		if err != nil {
			return nil, fmt.Errorf("connections: opening the refresh token of %s/%s: %w", c.Subject, c.ConnectionID, err)
		}
		tok.RefreshToken = string(rt)
	}
	return tok, nil
}

// Save stores the tokens the provider of connection id just gave subject,
// replacing any earlier ones (which it revokes at the provider, when it
// can, in the background of the request: errors are logged).
func (v *Vault) Save(ctx context.Context, subject, id string, tok *Token) error {
	p := v.Provider(id)
	if p == nil {
		return ErrUnknown
	}
	old, err := v.store.GetConnection(ctx, subject, id)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if err := v.store.PutConnection(ctx, v.record(subject, id, tok, v.now())); err != nil {
		return err
	}
	if old != nil {
		v.revoke(ctx, p, old)
	}
	return nil
}

// Token returns subject's current access token for connection id,
// refreshing it first when it has expired or is about to. ErrNotConnected
// when there is no record, ErrReconnect when the provider refused the
// refresh (the record is marked) or there is nothing to refresh with.
func (v *Vault) Token(ctx context.Context, subject, id string) (*Token, error) {
	p := v.Provider(id)
	if p == nil {
		return nil, ErrUnknown
	}
	c, err := v.store.GetConnection(ctx, subject, id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, ErrNotConnected
	}
	if err != nil {
		return nil, err
	}
	if c.NeedsReconnect {
		return nil, ErrReconnect
	}
	tok, err := v.open(c)
	if err != nil {
		// Sealed under another secret, or altered: unusable either way.
		v.log.ErrorContext(ctx, "connections: stored token does not open", "connection", id, "err", err)
		return nil, ErrReconnect
	}
	if tok.ExpiresAt.IsZero() || v.now().Add(refreshEarly).Before(tok.ExpiresAt) {
		return withoutRefresh(tok), nil
	}
	return v.refresh(ctx, p, subject, tok)
}

func withoutRefresh(t *Token) *Token {
	n := *t
	n.RefreshToken = ""
	return &n
}

// refresh runs one refresh per person and connection at a time in this
// process; concurrent callers share its answer.
func (v *Vault) refresh(ctx context.Context, p *Provider, subject string, old *Token) (*Token, error) {
	key := subject + "\x00" + p.ID()
	v.mu.Lock()
	if f, ok := v.flights[key]; ok {
		v.mu.Unlock()
		select {
		case <-f.done:
			return f.tok, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f := &flight{done: make(chan struct{})}
	v.flights[key] = f
	v.mu.Unlock()
	// A caller that read the record before the previous refresh of this
	// process stored its answer arrives here after that refresh ended:
	// the stored tokens are new, and refreshing with its old refresh
	// token (rotated, RFC 9700 §4.14.2) would be refused.
	if cur := v.current(ctx, subject, p.ID()); cur != nil && cur.RefreshToken != old.RefreshToken {
		f.tok = withoutRefresh(cur)
	} else {
		f.tok, f.err = v.doRefresh(ctx, p, subject, old)
	}
	v.mu.Lock()
	delete(v.flights, key)
	v.mu.Unlock()
	close(f.done)
	return f.tok, f.err
}

func (v *Vault) doRefresh(ctx context.Context, p *Provider, subject string, old *Token) (*Token, error) {
	id := p.ID()
	if old.RefreshToken == "" {
		v.markReconnect(ctx, subject, id, "", "no_refresh_token")
		return nil, ErrReconnect
	}
	tok, err := p.Refresh(ctx, old.RefreshToken)
	if errors.Is(err, ErrRefused) {
		// Another instance sharing the store may have refreshed first with
		// the same refresh token, which the provider then rotated: its
		// tokens are the person's now.
		if cur := v.current(ctx, subject, id); cur != nil && cur.RefreshToken != old.RefreshToken {
			return withoutRefresh(cur), nil
		}
		v.markReconnect(ctx, subject, id, old.RefreshToken, "refresh_refused")
		return nil, ErrReconnect
	}
	if err != nil {
		return nil, err
	}
	if tok.RefreshToken == "" {
		tok.RefreshToken = old.RefreshToken
	}
	now := v.now()
	n := v.record(subject, id, tok, now)
	err = v.store.UpdateConnection(ctx, subject, id, func(c storage.Connection) (storage.Connection, error) {
		n.CreatedAt = c.CreatedAt
		return *n, nil
	})
	if errors.Is(err, storage.ErrNotFound) {
		// Disconnected meanwhile: the new tokens are not kept, and not
		// handed out.
		_ = p.Revoke(context.WithoutCancel(ctx), tok.RefreshToken, "refresh_token")
		return nil, ErrNotConnected
	}
	if err != nil {
		return nil, err
	}
	v.audit(ctx, "connection.refreshed", "sub", subject, "connection", id)
	return withoutRefresh(tok), nil
}

// current returns the stored, usable (not marked, not expiring) tokens of
// subject's connection id, or nil.
func (v *Vault) current(ctx context.Context, subject, id string) *Token {
	c, err := v.store.GetConnection(ctx, subject, id)
	if err != nil || c.NeedsReconnect {
		return nil
	}
	tok, err := v.open(c)
	if err != nil || !(tok.ExpiresAt.IsZero() || v.now().Add(refreshEarly).Before(tok.ExpiresAt)) {
		return nil
	}
	return tok
}

// errReplaced: the record no longer holds the refresh token that was
// refused; it is left as it is.
var errReplaced = errors.New("connections: record replaced meanwhile")

// markReconnect marks subject's connection id as needing reconnecting,
// unless its record no longer holds refreshToken (another instance
// refreshed it, or the person connected again, meanwhile).
func (v *Vault) markReconnect(ctx context.Context, subject, id, refreshToken, reason string) {
	err := v.store.UpdateConnection(ctx, subject, id, func(c storage.Connection) (storage.Connection, error) {
		if tok, err := v.open(&c); err == nil && tok.RefreshToken != refreshToken {
			return c, errReplaced
		}
		c.NeedsReconnect, c.UpdatedAt = true, v.now()
		return c, nil
	})
	if errors.Is(err, errReplaced) {
		return
	}
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		v.log.ErrorContext(ctx, "connections: marking a connection for reconnecting", "connection", id, "err", err)
	}
	v.audit(ctx, "connection.needs_reconnect", "sub", subject, "connection", id, "reason", reason)
}

// Disconnect deletes subject's record of connection id and revokes its
// tokens at the provider when it can (RFC 7009). It returns false when
// there was no record. A connection no longer configured is deleted
// without revocation.
func (v *Vault) Disconnect(ctx context.Context, subject, id string) (bool, error) {
	c, err := v.store.GetConnection(ctx, subject, id)
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := v.store.DeleteConnection(ctx, subject, id); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	if p := v.Provider(id); p != nil {
		v.revoke(ctx, p, c)
	}
	return true, nil
}

// revoke revokes the tokens of record c at p: the refresh token, which
// ends the grant (RFC 7009 §2.1), or else the access token. Failures are
// logged; the record is gone either way.
func (v *Vault) revoke(ctx context.Context, p *Provider, c *storage.Connection) {
	if !p.CanRevoke(ctx) {
		return
	}
	tok, err := v.open(c)
	if err != nil {
		return
	}
	t, hint := tok.AccessToken, "access_token"
	if tok.RefreshToken != "" {
		t, hint = tok.RefreshToken, "refresh_token"
	}
	if err := p.Revoke(context.WithoutCancel(ctx), t, hint); err != nil {
		v.log.WarnContext(ctx, "connections: revocation at the provider failed", "connection", p.ID(), "err", err)
	}
}

// Status describes one person's connection, without its tokens.
type Status struct {
	Subject, ConnectionID string
	Scopes                []string
	// ExpiresAt is the access token's expiry (zero: not said).
	ExpiresAt      time.Time
	NeedsReconnect bool
	// Configured is false for a record of a connection no longer in the
	// configuration: its tokens are released no more.
	Configured           bool
	CreatedAt, UpdatedAt time.Time
}

// List returns the connections of subject ("" for everyone's), without
// tokens.
func (v *Vault) List(ctx context.Context, subject string) ([]Status, error) {
	cs, err := v.store.ListConnections(ctx, subject)
	if err != nil {
		return nil, err
	}
	out := make([]Status, 0, len(cs))
	for _, c := range cs {
		out = append(out, Status{Subject: c.Subject, ConnectionID: c.ConnectionID, Scopes: c.Scopes, ExpiresAt: c.ExpiresAt,
			NeedsReconnect: c.NeedsReconnect, Configured: v.Provider(c.ConnectionID) != nil, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt})
	}
	return out, nil
}
