package as

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/as/policy"
	"github.com/mcpauth/mcpauth/metadata"
	"github.com/mcpauth/mcpauth/storage"
)

// GrantTypeTokenExchange is the RFC 8693 §2.1 grant type.
const GrantTypeTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"

// Token type identifiers (RFC 8693 §3) this server understands.
const (
	// TokenTypeAccessToken is the type of every token this server issues by
	// exchange (issued_token_type) and of the subject tokens it accepts.
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	// TokenTypeJWT is accepted as a subject_token_type too: this server's
	// access tokens are JWTs, and some clients label them so. The token must
	// still be one of this server's RFC 9068 access tokens.
	TokenTypeJWT = "urn:ietf:params:oauth:token-type:jwt"
)

// maxSubjectToken bounds the subject_token parameter; this server's access
// tokens are far smaller, even with a long delegation chain in act.
const maxSubjectToken = 8 << 10

// ExchangeRule allows RFC 8693 token exchange: an authenticated, confidential
// client presents an access token this server issued for resource From (the
// subject token) and receives one for resource To, for the same subject, with
// an "act" claim naming the client (RFC 8693 §4.1).
//
// Scopes of the issued token are the requested scopes (all of them when the
// request names none) intersected with Scopes, with To's scopes and with the
// scopes the client may have, and, for a person who signed in through an
// upstream provider with claim_scopes, with the scopes their claims map to:
// a requested scope beyond that mapping is invalid_scope (RFC 8693 §2.2.2). The subject token's own scopes belong to From
// and are not copied across resources; a rule that should only apply to
// subject tokens carrying certain scopes names them in SubjectScopes.
type ExchangeRule struct {
	// From is the resource URI the subject token must be issued for (its
	// "aud"), canonicalised with metadata.CanonicalResource. Required; a
	// configured Resource.
	From string
	// To is the resource the new token is for (RFC 8693 §2.1 "resource" or
	// "audience"). Required; a configured Resource different from From.
	To string
	// Scopes are the scopes of To that an exchanged token may carry, at
	// most. At least one is required.
	Scopes []string
	// SubjectScopes are scopes the subject token must carry, every one of
	// them, for the rule to apply. Empty: none required.
	SubjectScopes []string
	// Clients are the client IDs that may use the rule. Empty: every
	// client whose GrantTypes include GrantTypeTokenExchange. The client
	// must in any case be confidential, have that grant type, and be
	// allowed the resource To (Client.Resources) and the scopes
	// (Client.Scopes).
	Clients []string
}

// exchangeRule is a validated ExchangeRule with canonical URIs.
type exchangeRule struct {
	from, to                       string
	scopes, subjectScopes, clients []string
}

func (r *exchangeRule) allowsClient(id string) bool {
	return len(r.clients) == 0 || slices.Contains(r.clients, id)
}

// compileExchangePolicy checks the rules against the configured resources
// and returns them with canonical URIs. New refuses a Config it rejects.
func compileExchangePolicy(rules []ExchangeRule, resources []Resource) ([]exchangeRule, error) {
	scopesOf := map[string][]string{}
	for _, r := range resources {
		if c, err := metadata.CanonicalResource(r.URI); err == nil {
			scopesOf[c] = r.Scopes
		}
	}
	out := make([]exchangeRule, 0, len(rules))
	for i, r := range rules {
		p := fmt.Sprintf("as: ExchangePolicy[%d]", i)
		from, err := metadata.CanonicalResource(r.From)
		if _, ok := scopesOf[from]; err != nil || !ok {
			return nil, fmt.Errorf("%s.From %q is not a configured resource", p, r.From)
		}
		to, err := metadata.CanonicalResource(r.To)
		if _, ok := scopesOf[to]; err != nil || !ok {
			return nil, fmt.Errorf("%s.To %q is not a configured resource", p, r.To)
		}
		if from == to {
			return nil, fmt.Errorf("%s: From and To are the same resource", p)
		}
		if len(r.Scopes) == 0 {
			return nil, fmt.Errorf("%s.Scopes: at least one scope is required", p)
		}
		for _, s := range r.Scopes {
			if !slices.Contains(scopesOf[to], s) {
				return nil, fmt.Errorf("%s.Scopes: %q is not a scope of %s", p, s, to)
			}
		}
		for _, s := range r.SubjectScopes {
			if !slices.Contains(scopesOf[from], s) {
				return nil, fmt.Errorf("%s.SubjectScopes: %q is not a scope of %s", p, s, from)
			}
		}
		for _, id := range r.Clients {
			if id == "" {
				return nil, fmt.Errorf("%s.Clients: empty client ID", p)
			}
		}
		out = append(out, exchangeRule{from: from, to: to,
			scopes: slices.Clone(r.Scopes), subjectScopes: slices.Clone(r.SubjectScopes), clients: slices.Clone(r.Clients)})
	}
	return out, nil
}

func init() {
	registerGrant(grantExtension{grantType: GrantTypeTokenExchange, handler: newExchangeHandler})
}

// exchangeHandler is the token endpoint handler of RFC 8693 token exchange.
//
// Errors: a target that is unknown, not allowed to the client, or not
// reachable by any rule for this client is invalid_target (RFC 8693 §2.2.2,
// RFC 8707 §2). A subject token that is not an active access token issued
// by this server, or whose audience no applicable rule starts from, is
// invalid_grant (RFC 8693 §2.2.2 suggests invalid_request; invalid_grant
// is RFC 6749 §5.2's word for an invalid grant, and the subject token is
// this grant's). Unsupported token types and actor tokens
// are invalid_request. A public client is invalid_client (it cannot
// authenticate); a client without the grant type is unauthorized_client.
//
// Exchanges are not single-use: the same subject token may be exchanged
// again (a resource server's cache expires, several instances run); each
// answer is a new token with its own jti.
//
// The issued token joins the subject token's grant (the same request ID),
// so everything that revokes that grant (revocation of the user's refresh
// or access token, refresh token reuse, code replay) revokes the exchanged
// tokens too, and revoking an exchanged token revokes the grant it came
// from.
type exchangeHandler struct {
	s     *Server
	rules []exchangeRule
}

var _ fosite.TokenEndpointHandler = (*exchangeHandler)(nil)

func newExchangeHandler(s *Server) fosite.TokenEndpointHandler {
	// New has validated the policy already (Config.validate).
	rules, _ := compileExchangePolicy(s.cfg.ExchangePolicy, s.cfg.Resources)
	return &exchangeHandler{s: s, rules: rules}
}

func (h *exchangeHandler) CanHandleTokenEndpointRequest(_ context.Context, r fosite.AccessRequester) bool {
	return r.GetGrantTypes().ExactOne(GrantTypeTokenExchange)
}

func (h *exchangeHandler) CanSkipClientAuth(context.Context, fosite.AccessRequester) bool {
	return false
}

// exchangeParams are the RFC 8693 §2.1 request parameters this server uses.
type exchangeParams struct {
	subjectToken string
	// target is the one canonical resource URI named by resource and/or
	// audience.
	target string
}

// exchangeSingleParams may appear at most once (RFC 6749 §3.2; RFC 8693
// §2.1 allows only resource and audience to repeat).
var exchangeSingleParams = []string{"subject_token", "subject_token_type", "requested_token_type",
	"actor_token", "actor_token_type", "scope"}

// parseExchangeForm checks the RFC 8693 §2.1 parameters of form. It returns
// invalid_request for missing, repeated or unsupported parameters and
// invalid_target for a target that is not one absolute URI.
func parseExchangeForm(form url.Values) (*exchangeParams, error) {
	for _, p := range exchangeSingleParams {
		if len(form[p]) > 1 {
			return nil, fosite.ErrInvalidRequest.WithHintf("The parameter %q is repeated.", p)
		}
	}
	if form.Get("actor_token") != "" || form.Get("actor_token_type") != "" {
		return nil, fosite.ErrInvalidRequest.WithHint("actor_token is not supported: the authenticated client is the actor, named in the issued token's act claim.")
	}
	p := &exchangeParams{subjectToken: form.Get("subject_token")}
	if p.subjectToken == "" {
		return nil, fosite.ErrInvalidRequest.WithHint("The subject_token parameter is missing.")
	}
	switch form.Get("subject_token_type") {
	case TokenTypeAccessToken, TokenTypeJWT:
	case "":
		return nil, fosite.ErrInvalidRequest.WithHint("The subject_token_type parameter is missing.")
	default:
		return nil, fosite.ErrInvalidRequest.WithHint("The subject_token_type is not supported: send an access token of this server (" + TokenTypeAccessToken + ").")
	}
	switch form.Get("requested_token_type") {
	case "", TokenTypeAccessToken:
	default:
		return nil, fosite.ErrInvalidRequest.WithHint("The requested_token_type is not supported: this server issues " + TokenTypeAccessToken + " only.")
	}
	targets, err := canonicalResources(append(slices.Clone(form["resource"]), form["audience"]...))
	if err != nil {
		return nil, err
	}
	switch len(targets) {
	case 0:
		return nil, errInvalidTarget("Name the resource the token is for with the resource or audience parameter.")
	case 1:
		p.target = targets[0]
	default:
		return nil, errInvalidTarget("Request one resource per token.")
	}
	return p, nil
}

// subjectGrant is what the exchange keeps of a verified subject token.
type subjectGrant struct {
	requestID string
	subject   string
	audience  string
	scopes    []string
	act       map[string]any
	notAfter  time.Time
	signature string
	statusIdx int64  // the grant's status index, which the exchanged token shares
	federated string // the subject's trusted issuer (session.Federated), which the exchanged token keeps
}

var errBadSubject = fosite.ErrInvalidGrant.WithHint("The subject_token is not an active access token issued by this server.")

// verifySubject accepts only an access token this server issued and still
// holds as active: signature with one of our keys, typ at+jwt, iss, exp
// (tokenStrategy.verify), then the stored record, found by the signature,
// active, unexpired and bound to this exact token, whose client still
// exists. Anything else is invalid_grant; a storage outage is returned as is.
func (h *exchangeHandler) verifySubject(ctx context.Context, token string) (*subjectGrant, error) {
	if len(token) > maxSubjectToken {
		return nil, errBadSubject
	}
	claims, err := h.s.tokens.verify(ctx, token)
	if err != nil {
		return nil, errBadSubject
	}
	sig := h.s.tokens.AccessTokenSignature(ctx, token)
	t, sr, err := h.s.store.loadShared(ctx, storage.KindAccessToken, sig)
	if errors.Is(err, fosite.ErrNotFound) {
		return nil, errBadSubject
	}
	if err != nil {
		return nil, err
	}
	if !t.Active || !h.s.now().Before(t.ExpiresAt) || sr.Session == nil || !tokenHashIs(token, sr.Session.TokenHash) ||
		len(sr.GrantedAud) != 1 || sr.GrantedAud[0] != claims.Audience {
		return nil, errBadSubject
	}
	active, err := h.s.personActive(ctx, sr.Session.Subject, sr.Session.Federated != "")
	if err != nil {
		return nil, userLookupErr(err)
	}
	if !active {
		return nil, errBadSubject
	}
	if _, err := h.s.clients.get(ctx, sr.ClientID); err != nil {
		if isUnavailable(err) {
			return nil, err
		}
		return nil, errBadSubject
	}
	notAfter := time.Unix(claims.ExpiresAt, 0)
	if t.ExpiresAt.Before(notAfter) {
		notAfter = t.ExpiresAt
	}
	return &subjectGrant{
		requestID: sr.ID,
		subject:   claims.Subject,
		audience:  claims.Audience,
		scopes:    sr.GrantedScope,
		act:       claims.Act,
		notAfter:  notAfter,
		signature: sig,
		statusIdx: sr.Session.StatusIdx,
		federated: sr.Session.Federated,
	}, nil
}

// HandleTokenEndpointRequest checks the client, the parameters, the target,
// the subject token and the policy, in that order, and grants the one
// audience and the narrowed scopes.
func (h *exchangeHandler) HandleTokenEndpointRequest(ctx context.Context, r fosite.AccessRequester) error {
	c, ok := r.GetClient().(*client)
	if !ok {
		return fosite.ErrInvalidClient
	}
	if c.public {
		return fosite.ErrInvalidClient.WithHint("Token exchange requires client authentication; a public client cannot use it.")
	}
	form := r.GetRequestForm()
	if h.s.cfg.Connections != nil && len(form["audience"]) == 1 && len(form["resource"]) == 0 {
		if cp := h.s.cfg.Connections.Provider(form.Get("audience")); cp != nil {
			// A connection named by its id stands for its resource.
			form = cloneForm(form)
			form.Set("audience", cp.Resource())
		}
	}
	p, err := parseExchangeForm(form)
	if err != nil {
		return err
	}
	// A connection's resource: listing the client in the connection's
	// clients is all it needs (connection.go).
	if h.s.cfg.Connections != nil {
		if cp := h.s.cfg.Connections.ForResource(p.target); cp != nil {
			return h.handleConnection(ctx, r, c, p, cp)
		}
	}
	if !c.GetGrantTypes().Has(GrantTypeTokenExchange) {
		return fosite.ErrUnauthorizedClient.WithHint("This client may not use the token-exchange grant.")
	}
	res := h.s.resourceByURI(p.target)
	if res == nil {
		return errInvalidTarget("The requested resource is unknown to this server.")
	}
	if !c.allows(res.URI) {
		return errInvalidTarget("This client may not get tokens for the requested resource.")
	}
	var candidates []*exchangeRule
	for i := range h.rules {
		if h.rules[i].to == res.URI && h.rules[i].allowsClient(c.id) {
			candidates = append(candidates, &h.rules[i])
		}
	}
	if len(candidates) == 0 {
		return errInvalidTarget("The exchange policy does not let this client exchange tokens for the requested resource.")
	}
	sub, err := h.verifySubject(ctx, p.subjectToken)
	if err != nil {
		return err
	}
	var rule *exchangeRule
	fromMatched := false
	for _, cand := range candidates {
		if cand.from != sub.audience {
			continue
		}
		fromMatched = true
		if containsAll(sub.scopes, cand.subjectScopes) {
			rule = cand
			break
		}
	}
	switch {
	case rule == nil && !fromMatched:
		return fosite.ErrInvalidGrant.WithHint("The subject_token was issued for a resource this client may not exchange from.")
	case rule == nil:
		return fosite.ErrInvalidGrant.WithHint("The subject_token lacks the scopes the exchange policy requires.")
	}

	// The subject token's person, capped by their claims: the mapping
	// bounds what an exchange grants them, as it bounds what they consent
	// to.
	allowed, capped, err := h.s.personCap(ctx, sub.subject, sub.federated != "", res.URI)
	if err != nil {
		return userLookupErr(err)
	}
	// The one scope rule, with the exchange rule's scopes as a further
	// bound on the ceiling and the defaults, then the person's cap.
	scopes, err := policy.Exchange(policyClient(c), policyResource(res), rule.scopes, r.GetRequestedScopes(), allowed, capped)
	if np := (*policy.NotPermittedError)(nil); errors.As(err, &np) {
		// The scopes refused: those named that the exchange could grant
		// or, naming none, its defaults, beyond the cap.
		h.s.log.audit(ctx, "token.exchange_not_permitted", "client_id", c.id, "sub", sub.subject, "aud", res.URI,
			"scope", strings.Join(np.Scopes, " "))
		return scopeError(err, "")
	}
	if err != nil {
		return scopeError(err, "None of the requested scopes may be granted by this exchange.")
	}

	sess, ok := r.GetSession().(*session)
	if !ok {
		return fosite.ErrServerError.WithDebug("unexpected session type")
	}
	sess.Subject, sess.Federated = sub.subject, sub.federated
	act := map[string]any{"sub": c.id}
	if sub.act != nil {
		act["act"] = sub.act
	}
	sess.Act = act
	sess.StatusIdx = sub.statusIdx
	// Read back (and replaced) by PopulateTokenEndpointResponse as the cap
	// of the new token's expiry.
	sess.SetExpiresAt(fosite.AccessToken, sub.notAfter)
	// The exchanged token joins the subject token's grant (see exchangeHandler).
	r.SetID(sub.requestID)
	r.SetRequestedScopes(scopes)
	r.SetRequestedAudience(fosite.Arguments{res.URI})
	for _, sc := range scopes {
		r.GrantScope(sc)
	}
	r.GrantAudience(res.URI)
	r.GetRequestForm().Set(subjectSignatureForm, sub.signature)
	return nil
}

// subjectSignatureForm carries the subject token's record key from Handle to
// Populate inside the request form; Sanitize drops it before anything is
// stored.
const subjectSignatureForm = "\x00subject_signature"

// PopulateTokenEndpointResponse issues the token (RFC 8693 §2.2.1): an
// RFC 9068 access token expiring no later than the subject token, stored
// like every access token, then checks that the subject token was not
// revoked meanwhile (if it was, the new token is deactivated and the answer
// is invalid_grant).
func (h *exchangeHandler) PopulateTokenEndpointResponse(ctx context.Context, r fosite.AccessRequester, resp fosite.AccessResponder) error {
	if !h.CanHandleTokenEndpointRequest(ctx, r) {
		return fosite.ErrUnknownRequest
	}
	if st := reqStateFrom(ctx); st != nil && st.connection != nil {
		return h.populateConnection(ctx, r, st.connection, resp)
	}
	sess, ok := r.GetSession().(*session)
	if !ok {
		return fosite.ErrServerError.WithDebug("unexpected session type")
	}
	now := h.s.now()
	ttl, ok := h.s.cappedTTL(sess, now)
	if !ok {
		return errBadSubject
	}
	subjectSig := r.GetRequestForm().Get(subjectSignatureForm)
	tok, sig, err := h.s.issueAccessToken(ctx, r, now, ttl)
	if err != nil {
		return err
	}
	if st, err := h.s.cfg.Store.GetToken(ctx, storage.KindAccessToken, subjectSig); err != nil || !st.Active {
		if derr := h.s.store.DeleteAccessTokenSession(ctx, sig); derr != nil {
			h.s.log.error(ctx, "deactivating an exchanged token whose subject was revoked", "err", derr)
		}
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			return mapStoreErr(err)
		}
		return errBadSubject
	}
	resp.SetAccessToken(tok)
	resp.SetTokenType("bearer")
	resp.SetExpiresIn(ttl)
	resp.SetScopes(r.GetGrantedScopes())
	resp.SetExtra("issued_token_type", TokenTypeAccessToken)
	h.s.log.audit(ctx, "token.exchanged", "client_id", r.GetClient().GetID(), "sub", sess.Subject,
		"aud", r.GetGrantedAudience()[0], "scope", strings.Join(r.GetGrantedScopes(), " "))
	return nil
}

// resourceByURI returns the configured resource with that canonical URI.
func (s *Server) resourceByURI(uri string) *resource {
	for i := range s.resources {
		if s.resources[i].URI == uri {
			return &s.resources[i]
		}
	}
	return nil
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

func cloneForm(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}
