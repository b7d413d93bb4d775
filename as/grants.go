package as

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/as/policy"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/upstream"
)

// UserDirectory says whether a local account is configured and not
// disabled (policy.Directory).
type UserDirectory = policy.Directory

// GrantFilter selects grants: an authorization a person gave a client (or a
// client-credentials token), with every code and token issued under it.
// Fields that are set must all match.
type GrantFilter struct {
	User    string // the person (token sub); never matches client credentials when set
	Client  string // client_id
	GrantID string // Grant.ID
}

// Grant is one grant as ListGrants and RevokeGrants report it.
type Grant struct {
	ID     string `json:"id"`
	User   string `json:"user,omitempty"` // "" for client credentials
	Client string `json:"client_id"`
	// CreatedAt is when it was granted; LastUsedAt when a token was last
	// issued under it (a refresh); ExpiresAt when its last token expires.
	CreatedAt  time.Time `json:"created_at"`
	LastUsedAt time.Time `json:"last_used_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	// StatusIndex is its index in the Token Status List (StatusListURI).
	StatusIndex int64 `json:"status_index,omitempty"`
	// Orphaned: its user is no longer configured (or is disabled), or its
	// client no longer exists. Such a grant is refused at the token
	// endpoint already; revoking it also makes resource servers refuse its
	// access tokens (through the status list) before they expire.
	Orphaned bool `json:"orphaned,omitempty"`
	// OrphanedBecause says why: "user" or "client".
	OrphanedBecause string `json:"orphaned_because,omitempty"`
}

// ErrEmptyFilter is returned by RevokeGrants for a GrantFilter with no
// field set: revoking everything is never what an operator meant.
var ErrEmptyFilter = errors.New("as: revoking grants needs a user, a client or a grant id")

// maxGrantList caps ListGrants when no limit is given.
const maxGrantList = 10000

// ListGrants returns the grants matching f that still have an active,
// unexpired access or refresh token, most recently used first, at most
// limit of them (limit <= 0: up to 10000). Each is marked Orphaned when
// its user is no longer configured or disabled (see Config.Users) or its
// client no longer exists.
func (s *Server) ListGrants(ctx context.Context, f GrantFilter, limit int) ([]Grant, error) {
	if limit <= 0 {
		limit = maxGrantList
	}
	gs, err := s.cfg.Store.ListGrants(ctx, f.storage(), s.now(), limit)
	if err != nil {
		return nil, err
	}
	out := make([]Grant, 0, len(gs))
	clients, users := map[string]bool{}, map[string]bool{}
	for _, g := range gs {
		out = append(out, s.describeGrant(ctx, g, clients, users))
	}
	return out, nil
}

func (s *Server) describeGrant(ctx context.Context, g storage.Grant, clients, users map[string]bool) Grant {
	out := Grant{
		ID: g.RequestID, User: g.Subject, Client: g.ClientID,
		CreatedAt: g.CreatedAt, LastUsedAt: g.LastUsedAt, ExpiresAt: g.ExpiresAt, StatusIndex: g.StatusIndex,
	}
	exists, seen := clients[g.ClientID]
	if !seen {
		exists = s.clientExists(ctx, g.ClientID)
		clients[g.ClientID] = exists
	}
	active, seen := users[g.Subject]
	if !seen {
		// A storage error counts as active: an outage must not make
		// grants look orphaned.
		var err error
		active, err = s.personActive(ctx, g.Subject, s.federatedSubject(g.Subject))
		active = active || err != nil
		users[g.Subject] = active
	}
	switch {
	case !active:
		out.Orphaned, out.OrphanedBecause = true, "user"
	case !exists:
		out.Orphaned, out.OrphanedBecause = true, "client"
	}
	return out
}

// clientExists reports whether id is a configured client, the client of a
// workload rule, or one in storage (registered or CIMD). A storage error
// counts as existing: an outage must not make grants look orphaned.
func (s *Server) clientExists(ctx context.Context, id string) bool {
	if _, ok := s.clients.static[id]; ok {
		return true
	}
	if _, ok := s.clients.workload[id]; ok {
		return true
	}
	_, err := s.cfg.Store.GetClient(ctx, id)
	return !errors.Is(err, storage.ErrNotFound)
}

// RevokeGrants revokes every grant matching f, the one place every
// revocation of grants as a whole goes through (the /consents page, the
// admin API and CLI; deleting a client does the same inside storage):
//
//   - every code and refresh token of the grant is refused from now on,
//     and every access token answers active:false at introspection;
//   - the grant's bit in the Token Status List is set, so resource servers
//     that check the list (rsmiddleware.Verifier) refuse its access tokens
//     within their staleness bound;
//   - remembered consents go too: with User and Client, that person's
//     consent for that client; with Client alone, every consent for that
//     client; with User alone, every consent of that person; with GrantID,
//     none (one grant is not the consent).
//
// It returns the grants that were live just before (as ListGrants reports
// them; a grant issued concurrently may be revoked without being listed)
// and writes one audit event, "grants.revoked". An empty filter is refused
// with ErrEmptyFilter; a storage outage is returned (wrapping
// storage.ErrUnavailable) and may have revoked nothing or everything.
func (s *Server) RevokeGrants(ctx context.Context, f GrantFilter) ([]Grant, error) {
	if f == (GrantFilter{}) {
		return nil, ErrEmptyFilter
	}
	listed, err := s.ListGrants(ctx, f, 0)
	if err != nil {
		return nil, err
	}
	if err := s.revoker.revoke(ctx, f); err != nil {
		return nil, err
	}
	return listed, nil
}

// GrantRevoker revokes grants in storage for the server and for the login
// pages' /consents page (loginui.Config.Revoker), which need it before the
// server exists: build it first (NewGrantRevoker) and give it to both
// (Config.Revoker), so neither has to be told of the other afterwards.
// Every revocation makes the server's Token Status List be built again.
type GrantRevoker struct {
	store       storage.Store
	log         logger
	revocations atomic.Uint64
}

// NewGrantRevoker returns the revoker of grants in store, writing its
// audit events to log (nil discards); give the server the same store.
func NewGrantRevoker(store storage.Store, log *slog.Logger) *GrantRevoker {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &GrantRevoker{store: store, log: logger{log}}
}

// RevokeConsent is what the /consents page calls when a person revokes a
// client (loginui.GrantRevoker): every grant of that person to that client
// and their remembered consent, as RevokeGrants does.
func (g *GrantRevoker) RevokeConsent(ctx context.Context, subject, clientID string) error {
	return g.revoke(ctx, GrantFilter{User: subject, Client: clientID})
}

// revoke revokes every grant matching f in storage, has the status list
// built again, and writes the "grants.revoked" audit event.
func (g *GrantRevoker) revoke(ctx context.Context, f GrantFilter) error {
	n, err := g.store.RevokeGrants(ctx, f.storage())
	g.revocations.Add(1)
	if err != nil {
		return fmt.Errorf("as: revoking grants: %w", err)
	}
	g.log.audit(ctx, "grants.revoked", "sub", f.User, "client_id", f.Client, "grant", f.GrantID, "count", n)
	return nil
}

func (f GrantFilter) storage() storage.GrantFilter {
	return storage.GrantFilter{Subject: f.User, ClientID: f.Client, RequestID: f.GrantID}
}

// personActive reports whether the person subject of a grant may still
// use it, the one rule the token endpoint, token exchange, introspection
// and ListGrants apply (policy.People.Active): no subject (client
// credentials) and a federated one (an assertion's "<iss>#<sub>",
// session.Federated), which is no local account, always may. What the
// rule reads of the person's record (recorded, upstream, disabled) is read
// with the grant's token in this request when the backend reads both in one
// statement (storage.TokenPersonReader), else the record is read by primary
// key. A storage error is returned, never taken for an answer.
func (s *Server) personActive(ctx context.Context, subject string, federated bool) (bool, error) {
	if subject == "" || federated {
		return true, nil
	}
	if ps, ok := rememberedPerson(ctx, subject); ok {
		if !ps.Recorded {
			return s.people.Active(subject, nil), nil
		}
		rec := storage.User{Subject: subject, Upstream: ps.Upstream, Disabled: ps.Disabled}
		return s.people.Active(subject, &rec), nil
	}
	rec, err := s.people.Record(ctx, subject)
	if err != nil {
		return false, err
	}
	return s.people.Active(subject, rec), nil
}

// localPersonActive reports whether subject is an active local account
// (policy.People.LocalActive): the only account an ID-JAG is linked to by
// its email.
func (s *Server) localPersonActive(ctx context.Context, subject string) (bool, error) {
	rec, err := s.people.Record(ctx, subject)
	if err != nil {
		return false, err
	}
	return s.people.LocalActive(subject, rec), nil
}

// personCap returns the scopes the person subject may be granted on the
// resource with canonical URI aud and whether anything caps them
// (policy.People.CapOn: their claims, the reserved scopes of the
// resource). No subject (client credentials) and a federated one (an
// assertion's subject, no person of ours) are not capped.
func (s *Server) personCap(ctx context.Context, subject string, federated bool, aud string) ([]string, bool, error) {
	if subject == "" || federated {
		return nil, false, nil
	}
	var scopes []string
	if res := s.resourceByURI(aud); res != nil {
		scopes = res.Scopes
	}
	return s.people.CapOn(ctx, subject, aud, scopes)
}

// userLookupErr is the token endpoint's answer when the person's record
// cannot be read: temporarily_unavailable for an unreachable store,
// server_error otherwise (RFC 6749 §5.2); never a grant.
func userLookupErr(err error) error {
	if isUnavailable(err) {
		return fosite.ErrTemporarilyUnavailable.WithWrap(err)
	}
	return fosite.ErrServerError.WithWrap(err)
}

// federatedSubject reports whether subject has the form the jwt-bearer
// grant gives a trusted issuer's subject, "<iss>#<sub>" with iss a
// configured enterprise IdP or workload issuer: what can be told from a
// stored grant's subject alone.
func (s *Server) federatedSubject(subject string) bool {
	iss, _, ok := strings.Cut(subject, "#")
	if !ok {
		return false
	}
	for _, d := range s.cfg.EnterpriseIdPs {
		if d.Issuer == iss {
			return true
		}
	}
	for _, w := range s.cfg.WorkloadIssuers {
		if w.Issuer == iss {
			return true
		}
	}
	return false
}

// userGate runs after the grant handlers have loaded the grant of a code
// or refresh request: a grant whose person is no longer configured, or is
// disabled, is refused with invalid_grant (RFC 6749 §5.2). At a refresh it
// then asks Config.Recheck, when set, and caps the scopes by the person's
// claims (capRefresh). Token exchange checks the person of the subject token
// itself (verifySubject, personCap); client-credentials grants have no person.
type userGate struct{ s *Server }

var _ fosite.TokenEndpointHandler = (*userGate)(nil)

func (g *userGate) CanHandleTokenEndpointRequest(_ context.Context, r fosite.AccessRequester) bool {
	gt := r.GetGrantTypes()
	return gt.ExactOne("authorization_code") || gt.ExactOne("refresh_token")
}

func (g *userGate) CanSkipClientAuth(context.Context, fosite.AccessRequester) bool { return false }

func (g *userGate) HandleTokenEndpointRequest(ctx context.Context, r fosite.AccessRequester) error {
	sub, federated := "", false
	if sess, ok := r.GetSession().(*session); ok && sess != nil {
		sub, federated = sess.Subject, sess.Federated != ""
	}
	active, err := g.s.personActive(ctx, sub, federated)
	if err != nil {
		return userLookupErr(err)
	}
	if !active {
		g.s.log.audit(ctx, "grant.user_inactive", "client_id", r.GetClient().GetID(), "sub", sub, "grant", r.GetID())
		return fosite.ErrInvalidGrant.WithHint("The person who granted this access can no longer sign in.")
	}
	if sub == "" || federated || !r.GetGrantTypes().ExactOne("refresh_token") {
		return nil
	}
	if g.s.cfg.Recheck != nil {
		if err := g.recheck(ctx, r, sub); err != nil {
			return err
		}
	}
	return g.capRefresh(ctx, r, sub)
}

// capRefresh bounds the scopes of a person's refresh by their claims
// (policy.CapRefresh), as the recheck, if any, left them in the person's record:
// a scope the refresh names beyond them is invalid_scope; the grant's other
// scopes beyond them are left out of the new tokens; a grant left with none
// of its resource's scopes is invalid_grant (RFC 6749 §5.2), for the person
// to sign in again. The new tokens' scopes are narrowed in the request's
// GrantedScope, which only a *fosite.AccessRequest lets be replaced: any
// other request whose grant holds a scope beyond the cap is refused with
// invalid_grant, never let through uncapped.
func (g *userGate) capRefresh(ctx context.Context, r fosite.AccessRequester, sub string) error {
	aud := ""
	if a := r.GetGrantedAudience(); len(a) == 1 {
		aud = a[0]
	}
	allowed, capped, err := g.s.personCap(ctx, sub, false, aud)
	if err != nil {
		return userLookupErr(err)
	}
	if !capped {
		return nil
	}
	ar, ok := r.(*fosite.AccessRequest)
	granted := []string(r.GetGrantedScopes())
	requested := fosite.RemoveEmpty(splitSpace(r.GetRequestForm().Get("scope")))
	kept, err := policy.CapRefresh(requested, granted, allowed, ok)
	if err != nil {
		// The scopes refused: those the refresh names (its grant is
		// narrowed to them) or, naming none, the grant's, beyond the cap.
		g.s.log.audit(ctx, "grant.scope_not_permitted", "client_id", r.GetClient().GetID(), "sub", sub, "grant", r.GetID(),
			"scope", strings.Join(policy.Beyond(granted, allowed), " "))
		switch {
		case errors.Is(err, policy.ErrNoneLeft):
			return fosite.ErrInvalidGrant.WithHint("The person's organisation no longer permits any scope of this grant; sign in again.")
		case errors.Is(err, policy.ErrNotAllLeft):
			return fosite.ErrInvalidGrant.WithHint("The person's organisation no longer permits every scope of this grant; sign in again.")
		}
		return scopeError(err, "")
	}
	if ok {
		ar.GrantedScope = fosite.Arguments(kept)
	}
	return nil
}

// recheck asks Config.Recheck whether the person's provider still confirms
// them (UpstreamRecheck).
func (g *userGate) recheck(ctx context.Context, r fosite.AccessRequester, sub string) error {
	var scopes []string
	if sess, ok := r.GetSession().(*session); ok && sess != nil {
		scopes = sess.Scopes
	}
	ok, err := g.s.cfg.Recheck.Recheck(ctx, sub, scopes)
	if ok {
		return nil
	}
	var refusal *upstream.Refusal
	if err == nil || errors.As(err, &refusal) {
		reason := "refused"
		if refusal != nil {
			reason = refusal.Reason
		}
		g.s.log.audit(ctx, "grant.upstream_refused", "client_id", r.GetClient().GetID(), "sub", sub, "grant", r.GetID(), "reason", reason)
		return fosite.ErrInvalidGrant.WithHint("The person's sign-in provider no longer confirms this access; sign in again.")
	}
	g.s.log.error(ctx, "upstream recheck", "sub", sub, "err", err)
	return fosite.ErrTemporarilyUnavailable.WithHint("The person's sign-in provider cannot be reached; try again later.")
}

// UpstreamRecheck confirms at refresh that a person who signed in through
// an upstream provider may still hold the grant (*upstream.Rechecker).
type UpstreamRecheck interface {
	// Recheck returns true to let the refresh go on; false with a nil
	// error or an *upstream.Refusal to refuse it; false with any other
	// error when it cannot tell.
	Recheck(ctx context.Context, subject string, scopes []string) (bool, error)
}

func (g *userGate) PopulateTokenEndpointResponse(context.Context, fosite.AccessRequester, fosite.AccessResponder) error {
	return nil
}
