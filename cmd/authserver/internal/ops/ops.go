// Package ops holds what an operator does to a running deployment's state:
// list, create and delete clients, list and retire signing keys, list and
// revoke consents and grants, list, disable and enable users, list and
// revoke connected accounts. The `authserver` subcommands and the admin HTTP API both
// call it, so the two cannot drift apart; it works on the configured storage
// and never needs a running server.
//
// Every change writes an audit event (message "audit", event "admin.*")
// naming who made it: the admin client for the admin API, "cli" for the
// command line.
package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/dcr"
	"github.com/mcpauth/mcpauth/storage"
)

// Errors an operation returns besides storage errors. Callers map them to
// exit statuses and HTTP statuses.
var (
	// ErrNotFound: no client (key, consent) with that id.
	ErrNotFound = errors.New("not found")
	// ErrConfigured: the client is defined in the configuration file, so
	// only editing that file changes it.
	ErrConfigured = errors.New("defined in the configuration file; edit it (and reload with SIGHUP) to change the client")
	// ErrInvalid: the request itself is wrong (a missing or bad field).
	ErrInvalid = errors.New("invalid request")
)

// invalidf is an ErrInvalid with a message.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Ops performs operator actions on one deployment.
type Ops struct {
	// Store is the configured storage.
	Store storage.Store
	// Configured are the clients of the configuration file (read-only).
	Configured []Client
	// Users are the local users of the configuration file.
	Users []LocalUser
	// Upstreams are the ids of the configured upstream identity providers
	// (upstreams[].id): a person recorded from another one is not active.
	Upstreams []string
	// Registrar creates clients under the registration policy.
	Registrar *dcr.Handler
	// Secret is the server secret (to tell which keys it unseals).
	Secret []byte
	// SigningAlg is the algorithm of keys made by a retirement.
	SigningAlg string
	// KeyRetention is how long a retired key stays published.
	KeyRetention time.Duration
	// Log receives the audit events. Nil discards.
	Log *slog.Logger
	// Grants lists and revokes grants (the running *as.Server). Nil: the
	// grant operations answer ErrNoGrants, and revoking a consent only
	// forgets it.
	Grants GrantAdmin
	// Connections are the people's connected accounts. Required by the
	// connection operations.
	Connections ConnectionVault
}

// GrantAdmin is what Ops needs of the authorization server to list and
// revoke grants; *as.Server implements it.
type GrantAdmin interface {
	ListGrants(ctx context.Context, f as.GrantFilter, limit int) ([]as.Grant, error)
	RevokeGrants(ctx context.Context, f as.GrantFilter) ([]as.Grant, error)
}

// ErrNoGrants: this Ops was built without an authorization server.
var ErrNoGrants = errors.New("grant operations need the authorization server")

// ListGrants lists the live grants, of one user and/or one client when set,
// each marked orphaned when its user or client is gone.
func (o *Ops) ListGrants(ctx context.Context, user, clientID string) ([]as.Grant, error) {
	if o.Grants == nil {
		return nil, ErrNoGrants
	}
	gs, err := o.Grants.ListGrants(ctx, as.GrantFilter{User: user, Client: clientID}, 0)
	if gs == nil && err == nil {
		gs = []as.Grant{}
	}
	return gs, err
}

// RevokeGrants revokes every grant matching f (as.Server.RevokeGrants):
// refresh tokens refused at once, access tokens inactive at introspection
// and flagged in the status list, remembered consents gone. An empty
// filter is refused. It returns the grants that were revoked.
func (o *Ops) RevokeGrants(ctx context.Context, actor string, f as.GrantFilter) ([]as.Grant, error) {
	if o.Grants == nil {
		return nil, ErrNoGrants
	}
	if f == (as.GrantFilter{}) {
		return nil, invalidf("name a user, a client or a grant to revoke")
	}
	gs, err := o.Grants.RevokeGrants(ctx, f)
	if err != nil {
		return nil, err
	}
	if gs == nil {
		gs = []as.Grant{}
	}
	sub, client := f.User, f.Client
	if f.GrantID != "" && len(gs) == 1 {
		// One grant named by id: its person and client, so the event is
		// found by them.
		sub, client = gs[0].User, gs[0].Client
	}
	o.audit(ctx, actor, "admin.grants.revoked", "sub", sub, "client_id", client, "grant", f.GrantID, "count", len(gs))
	return gs, nil
}

// Client is a client as an operator sees it. It never holds a secret or a
// secret's hash.
type Client struct {
	ID                      string     `json:"client_id"`
	Name                    string     `json:"client_name,omitempty"`
	Source                  string     `json:"source"`
	Public                  bool       `json:"public"`
	TokenEndpointAuthMethod string     `json:"token_endpoint_auth_method,omitempty"`
	RedirectURIs            []string   `json:"redirect_uris"`
	GrantTypes              []string   `json:"grant_types"`
	Scopes                  []string   `json:"scopes"`
	Resources               []string   `json:"resources"`
	CreatedAt               *time.Time `json:"created_at,omitempty"`
	LastUsedAt              *time.Time `json:"last_used_at,omitempty"`
}

func clientView(c *storage.Client) Client {
	v := Client{
		ID: c.ID, Name: c.Name, Source: c.Source, Public: c.Public,
		TokenEndpointAuthMethod: c.TokenEndpointAuthMethod,
		RedirectURIs:            nonNil(c.RedirectURIs), GrantTypes: nonNil(c.GrantTypes),
		Scopes: nonNil(c.Scopes), Resources: nonNil(c.Resources),
	}
	if !c.CreatedAt.IsZero() {
		t := c.CreatedAt.UTC()
		v.CreatedAt = &t
	}
	if !c.LastUsedAt.IsZero() {
		t := c.LastUsedAt.UTC()
		v.LastUsedAt = &t
	}
	return v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (o *Ops) audit(ctx context.Context, actor, event string, args ...any) {
	if o.Log == nil {
		return
	}
	head := []any{"event", event, "admin_client", actor}
	if sub := AdminSubject(ctx); sub != "" {
		head = append(head, "admin_subject", sub)
	}
	o.Log.InfoContext(ctx, "audit", append(head, args...)...)
}

type adminSubjectKey struct{}

// WithAdminSubject returns ctx naming the person on whose behalf the
// operations called with it act (the console's signed-in person): their
// audit events carry admin_subject besides admin_client.
func WithAdminSubject(ctx context.Context, subject string) context.Context {
	return context.WithValue(ctx, adminSubjectKey{}, subject)
}

// AdminSubject is the person WithAdminSubject put into ctx, "" for none.
func AdminSubject(ctx context.Context) string {
	s, _ := ctx.Value(adminSubjectKey{}).(string)
	return s
}

// pageSize is how many clients one storage call returns.
const pageSize = 500

// ListClients returns the configured clients, then every stored client
// (registered, CIMD, created by an operator) in ID order.
func (o *Ops) ListClients(ctx context.Context) ([]Client, error) {
	out := append(make([]Client, 0, len(o.Configured)), o.Configured...) // [] rather than null when there are none
	after := ""
	for {
		page, err := o.Store.ListClients(ctx, after, pageSize)
		if err != nil {
			return nil, err
		}
		for i := range page {
			if o.configured(page[i].ID) == nil {
				out = append(out, clientView(&page[i]))
			}
		}
		if len(page) < pageSize {
			return out, nil
		}
		after = page[len(page)-1].ID
	}
}

// ListClientsPage returns up to limit clients whose id sorts after after
// (byte order), in id order: the configured clients merged with the stored
// ones, each once. next is the id to pass as after for the following
// page, "" after the last one. A limit <= 0 or above pageSize means
// pageSize.
func (o *Ops) ListClientsPage(ctx context.Context, after string, limit int) (clients []Client, next string, err error) {
	if limit <= 0 || limit > pageSize {
		limit = pageSize
	}
	stored, err := o.Store.ListClients(ctx, after, limit+1)
	if err != nil {
		return nil, "", err
	}
	var conf []Client
	for _, c := range o.Configured {
		if c.ID > after {
			conf = append(conf, c)
		}
	}
	slices.SortFunc(conf, func(a, b Client) int { return strings.Compare(a.ID, b.ID) })
	out := []Client{}
	i, j := 0, 0
	for len(out) < limit+1 && (i < len(stored) || j < len(conf)) {
		switch {
		case j == len(conf) || i < len(stored) && stored[i].ID < conf[j].ID:
			out = append(out, clientView(&stored[i]))
			i++
		case i == len(stored) || conf[j].ID < stored[i].ID:
			out = append(out, conf[j])
			j++
		default: // configured wins over a stored record of the same id
			out = append(out, conf[j])
			i, j = i+1, j+1
		}
	}
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].ID
	}
	return out, next, nil
}

// CountClients counts the clients by source: "config" (the configured
// ones), and the stored "dcr", "cimd" and "admin" clients.
func (o *Ops) CountClients(ctx context.Context) (map[string]int, error) {
	out := map[string]int{"config": len(o.Configured)}
	for _, src := range []string{"dcr", "cimd", "admin"} {
		n, err := o.Store.CountClients(ctx, src)
		if err != nil {
			return nil, err
		}
		out[src] = n
	}
	return out, nil
}

func (o *Ops) configured(id string) *Client {
	for i := range o.Configured {
		if o.Configured[i].ID == id {
			return &o.Configured[i]
		}
	}
	return nil
}

// GetClient returns one client; ErrNotFound when there is none.
func (o *Ops) GetClient(ctx context.Context, id string) (*Client, error) {
	if c := o.configured(id); c != nil {
		v := *c
		return &v, nil
	}
	c, err := o.Store.GetClient(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("client %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	v := clientView(c)
	return &v, nil
}

// NewClient is what CreateClient needs.
type NewClient struct {
	Name         string   `json:"client_name"`
	RedirectURIs []string `json:"redirect_uris"`
	// Public makes a client without a secret (token_endpoint_auth_method
	// none, PKCE only); otherwise it gets a generated secret.
	Public bool `json:"public"`
}

// CreatedClient is a new client and, for a confidential one, its secret,
// which is not stored in clear and shown only this once.
type CreatedClient struct {
	Client
	Secret string `json:"client_secret,omitempty"`
}

// CreateClient stores a new client for the authorization code grant, with
// the registration policy's checks (RFC 7591 §2 metadata, exact redirect
// URIs). actor names who asks, for the audit event.
func (o *Ops) CreateClient(ctx context.Context, actor string, nc NewClient) (*CreatedClient, error) {
	if strings.TrimSpace(nc.Name) == "" {
		return nil, invalidf("client_name is required")
	}
	if len(nc.RedirectURIs) == 0 {
		return nil, invalidf("at least one redirect URI is required")
	}
	md := dcr.ClientMetadata{ClientName: nc.Name, RedirectURIs: nc.RedirectURIs, TokenEndpointAuthMethod: dcr.AuthClientSecretBasic}
	if nc.Public {
		md.TokenEndpointAuthMethod = dcr.AuthNone
	}
	info, err := o.Registrar.Create(ctx, md)
	var merr *dcr.MetadataError
	if errors.As(err, &merr) {
		return nil, invalidf("%s", merr.Description)
	}
	if err != nil {
		return nil, err
	}
	c, err := o.GetClient(ctx, info.ClientID)
	if err != nil {
		return nil, err
	}
	o.audit(ctx, actor, "admin.client.created", "client_id", c.ID, "client_name", c.Name, "public", c.Public)
	return &CreatedClient{Client: *c, Secret: info.ClientSecret}, nil
}

// DeleteClient deletes a stored client. Configured clients are refused with
// ErrConfigured.
func (o *Ops) DeleteClient(ctx context.Context, actor, id string) error {
	if o.configured(id) != nil {
		return fmt.Errorf("client %q: %w", id, ErrConfigured)
	}
	err := o.Store.DeleteClient(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("client %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return err
	}
	o.audit(ctx, actor, "admin.client.deleted", "client_id", id)
	return nil
}

// ListKeys describes the stored signing keys, newest first.
func (o *Ops) ListKeys(ctx context.Context) ([]as.KeyInfo, error) {
	return as.ListKeys(ctx, o.Store, o.Secret)
}

// RetireKey retires key kid (see as.RetireKey) and returns the key that
// signs afterwards.
func (o *Ops) RetireKey(ctx context.Context, actor, kid string) (string, error) {
	signing, err := as.RetireKey(ctx, o.Store, o.Secret, kid, o.SigningAlg)
	if errors.Is(err, storage.ErrNotFound) {
		return "", fmt.Errorf("signing key %q: %w", kid, ErrNotFound)
	}
	if err != nil {
		return "", err
	}
	o.audit(ctx, actor, "admin.key.retired", "kid", kid, "signing_kid", signing)
	return signing, nil
}

// RotateKey adds a signing key and retires the others (as.RotateKey).
func (o *Ops) RotateKey(ctx context.Context, actor string) (string, error) {
	kid, err := as.RotateKey(ctx, o.Store, o.Secret, o.SigningAlg)
	if err != nil {
		return "", err
	}
	o.audit(ctx, actor, "admin.key.rotated", "kid", kid)
	return kid, nil
}

// PruneKeys deletes keys retired longer than the retention and, with
// unloadable, keys the secret does not unseal (as.PruneKeys).
func (o *Ops) PruneKeys(ctx context.Context, actor string, unloadable bool) ([]string, error) {
	deleted, err := as.PruneKeys(ctx, o.Store, o.Secret, o.KeyRetention, unloadable)
	if len(deleted) > 0 {
		o.audit(ctx, actor, "admin.key.pruned", "kids", strings.Join(deleted, " "), "unloadable", unloadable)
	}
	return deleted, err
}

// Consent is a remembered consent.
type Consent struct {
	User      string     `json:"user"`
	ClientID  string     `json:"client_id"`
	Resource  string     `json:"resource"`
	Scopes    []string   `json:"scopes"`
	GrantedAt time.Time  `json:"granted_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// ListConsents returns the consents user has given.
func (o *Ops) ListConsents(ctx context.Context, user string) ([]Consent, error) {
	if user == "" {
		return nil, invalidf("user is required")
	}
	cs, err := o.Store.ListConsents(ctx, user)
	if err != nil {
		return nil, err
	}
	out := make([]Consent, 0, len(cs))
	for _, c := range cs {
		v := Consent{User: c.Subject, ClientID: c.ClientID, Resource: c.Resource, Scopes: nonNil(c.Scopes), GrantedAt: c.GrantedAt.UTC()}
		if !c.ExpiresAt.IsZero() {
			t := c.ExpiresAt.UTC()
			v.ExpiresAt = &t
		}
		out = append(out, v)
	}
	return out, nil
}

// RevokeConsents revokes user's consents to clientID (every client when
// clientID is ""): the grants they gave are revoked as by RevokeGrants and
// the next authorization asks again.
func (o *Ops) RevokeConsents(ctx context.Context, actor, user, clientID string) error {
	if user == "" {
		return invalidf("user is required")
	}
	if o.Grants != nil {
		if _, err := o.Grants.RevokeGrants(ctx, as.GrantFilter{User: user, Client: clientID}); err != nil {
			return err
		}
	}
	if err := o.Store.DeleteConsents(ctx, user, clientID); err != nil {
		return err
	}
	o.audit(ctx, actor, "admin.consent.revoked", "sub", user, "client_id", clientID)
	return nil
}
