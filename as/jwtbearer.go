package as

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/as/policy"
	"github.com/mcpauth/mcpauth/metadata"
	"github.com/mcpauth/mcpauth/storage"
)

// GrantTypeJWTBearer is the RFC 7523 §2.1 grant type. This server accepts
// two kinds of assertion with it, told apart by the JOSE typ: Identity
// Assertion JWT Authorization Grants (typ oauth-id-jag+jwt) from configured
// enterprise IdPs, redeemed by an authenticated client
// (draft-ietf-oauth-identity-assertion-authz-grant §4.4), and plain JWTs
// from configured workload issuers, redeemed without client authentication
// (MCP workload identity federation).
const GrantTypeJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// GrantProfileIDJAG is advertised in authorization_grant_profiles_supported
// when enterprise IdPs are configured
// (draft-ietf-oauth-identity-assertion-authz-grant §7.2).
const GrantProfileIDJAG = "urn:ietf:params:oauth:grant-profile:id-jag"

// typIDJAG is the explicit type of an ID-JAG (§3.1, RFC 8725 §3.11).
const typIDJAG = "oauth-id-jag+jwt"

const (
	// maxAssertion bounds the assertion parameter.
	maxAssertion = 16 << 10
	// assertionSkew is the clock skew allowed on exp, iat and nbf.
	assertionSkew = time.Minute
	// maxAssertionAge bounds now - iat, and an ID-JAG's exp - iat.
	maxAssertionAge = time.Hour
	// minJTITTL is the least time a consumed jti is remembered, so an
	// assertion close to its exp (plus the skew) cannot be replayed.
	minJTITTL = 2 * assertionSkew
)

func init() {
	registerGrant(grantExtension{
		grantType: GrantTypeJWTBearer,
		handler:   newJWTBearerHandler,
		enabled:   func(s *Server) bool { return len(s.cfg.EnterpriseIdPs)+len(s.cfg.WorkloadIssuers) > 0 },
	})
}

// enterpriseIdP is a validated EnterpriseIdP.
type enterpriseIdP struct {
	keys        *issuerKeys
	clients     []string
	linkByEmail bool
}

// workloadIssuer is a validated WorkloadIssuer.
type workloadIssuer struct {
	keys  *issuerKeys
	rules []workloadRule
}

type workloadRule struct {
	subject   string
	claims    map[string]string
	clientID  string
	resources []string // canonical
	scopes    []string
}

// compileFederation checks the trusted issuers of c and builds their key
// sources with client (nil while only validating).
func compileFederation(c *Config, client *http.Client) (map[string]*enterpriseIdP, map[string]*workloadIssuer, error) {
	now := c.Now
	if now == nil {
		now = time.Now
	}
	scopesOf := map[string][]string{}
	for _, r := range c.Resources {
		if cr, err := metadata.CanonicalResource(r.URI); err == nil {
			scopesOf[cr] = r.Scopes
		}
	}
	configured := map[string]bool{}
	for _, cl := range c.Clients {
		configured[cl.ID] = true
	}
	keysOf := func(p, issuer string, jwks []byte, jwksURI string, discovery bool) (*issuerKeys, error) {
		k := &issuerKeys{issuer: issuer, client: client, now: now}
		switch {
		case len(jwks) > 0 && jwksURI != "":
			return nil, fmt.Errorf("%s: set JWKS or JWKSURI, not both", p)
		case len(jwks) > 0:
			set, err := parseJWKS(jwks)
			if err != nil {
				return nil, fmt.Errorf("%s.JWKS: %v", p, err)
			}
			k.static = set
		case jwksURI != "":
			if u, err := url.Parse(jwksURI); err != nil || !u.IsAbs() || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
				return nil, fmt.Errorf("%s.JWKSURI %q is not an absolute http(s) URL", p, jwksURI)
			}
			k.jwksURI = jwksURI
		case !discovery:
			return nil, fmt.Errorf("%s: JWKS or JWKSURI is required", p)
		}
		return k, nil
	}
	httpsURL := func(s string) bool {
		u, err := url.Parse(s)
		return err == nil && u.Scheme == "https" && u.Host != "" && u.RawQuery == "" && u.Fragment == ""
	}
	idps := map[string]*enterpriseIdP{}
	for i, d := range c.EnterpriseIdPs {
		p := fmt.Sprintf("as: EnterpriseIdPs[%d]", i)
		if !httpsURL(d.Issuer) {
			return nil, nil, fmt.Errorf("%s.Issuer %q must be an https URL", p, d.Issuer)
		}
		if idps[d.Issuer] != nil {
			return nil, nil, fmt.Errorf("%s.Issuer %q is listed twice", p, d.Issuer)
		}
		k, err := keysOf(p, d.Issuer, d.JWKS, d.JWKSURI, false)
		if err != nil {
			return nil, nil, err
		}
		if len(d.Clients) == 0 {
			return nil, nil, fmt.Errorf("%s.Clients: at least one client is required", p)
		}
		if slices.Contains(d.Clients, "") {
			return nil, nil, fmt.Errorf("%s.Clients: empty client ID", p)
		}
		idps[d.Issuer] = &enterpriseIdP{keys: k, clients: slices.Clone(d.Clients), linkByEmail: d.LinkByEmail}
	}
	wis := map[string]*workloadIssuer{}
	for i, w := range c.WorkloadIssuers {
		p := fmt.Sprintf("as: WorkloadIssuers[%d]", i)
		if w.Issuer == "" {
			return nil, nil, fmt.Errorf("%s.Issuer is required", p)
		}
		if len(w.JWKS) == 0 && !httpsURL(w.Issuer) {
			return nil, nil, fmt.Errorf("%s.Issuer %q must be an https URL unless JWKS is given", p, w.Issuer)
		}
		if wis[w.Issuer] != nil || idps[w.Issuer] != nil {
			return nil, nil, fmt.Errorf("%s.Issuer %q is listed twice", p, w.Issuer)
		}
		k, err := keysOf(p, w.Issuer, w.JWKS, w.JWKSURI, true)
		if err != nil {
			return nil, nil, err
		}
		if len(w.Rules) == 0 {
			return nil, nil, fmt.Errorf("%s.Rules: at least one rule is required", p)
		}
		wi := &workloadIssuer{keys: k}
		for j, r := range w.Rules {
			rp := fmt.Sprintf("%s.Rules[%d]", p, j)
			if r.Subject == "" {
				return nil, nil, fmt.Errorf("%s.Subject is required", rp)
			}
			if r.ClientID == "" || configured[r.ClientID] {
				return nil, nil, fmt.Errorf("%s.ClientID %q must be set and not the ID of a configured client", rp, r.ClientID)
			}
			if len(r.Resources) == 0 || len(r.Scopes) == 0 {
				return nil, nil, fmt.Errorf("%s: at least one resource and one scope are required", rp)
			}
			rule := workloadRule{subject: r.Subject, claims: map[string]string{}, clientID: r.ClientID, scopes: slices.Clone(r.Scopes)}
			for name, v := range r.Claims {
				rule.claims[name] = v
			}
			for _, res := range r.Resources {
				cr, err := metadata.CanonicalResource(res)
				if _, ok := scopesOf[cr]; err != nil || !ok {
					return nil, nil, fmt.Errorf("%s.Resources: %q is not a configured resource", rp, res)
				}
				rule.resources = append(rule.resources, cr)
			}
			for _, sc := range r.Scopes {
				if !slices.ContainsFunc(rule.resources, func(res string) bool { return slices.Contains(scopesOf[res], sc) }) {
					return nil, nil, fmt.Errorf("%s.Scopes: %q is not a scope of its resources", rp, sc)
				}
			}
			wi.rules = append(wi.rules, rule)
		}
		wis[w.Issuer] = wi
	}
	return idps, wis, nil
}

// jwtBearerHandler is the token endpoint handler of the jwt-bearer grant
// (RFC 7523 §2.1) for ID-JAGs and workload tokens.
//
// Errors: a missing assertion is invalid_request; any failed check of the
// assertion (type, signature, issuer, audience, client binding, resource
// claim, times, replay) is invalid_grant (RFC 7523 §3.1; ID-JAG §4.4.1); a
// client or workload not allowed the grant is unauthorized_client; a
// requested resource other than the ID-JAG's, or one no rule of the
// workload allows, is invalid_target (RFC 8707 §2); no grantable scope is
// invalid_scope. No refresh token is issued (ID-JAG §4.4.3), and the access
// token expires no later than the assertion.
//
// The client of an ID-JAG is the authenticated client, so it must list
// GrantTypeJWTBearer in its grant_types and be named in the IdP's Clients.
// A workload token has no registered client: the matching workload rule is
// its only authorization, and the rule's synthetic client names the token.
type jwtBearerHandler struct {
	s         *Server
	idps      map[string]*enterpriseIdP
	workloads map[string]*workloadIssuer
	// audiences are the aud values accepted on an ID-JAG (the issuer, also
	// with one trailing slash) and, with the token endpoint, on a workload
	// token.
	audiences, workloadAudiences []string
}

var _ fosite.TokenEndpointHandler = (*jwtBearerHandler)(nil)

func newJWTBearerHandler(s *Server) fosite.TokenEndpointHandler {
	hc := s.cfg.FederationHTTPClient
	if hc == nil {
		hc = s.cfg.JWKSHTTPClient
	}
	// New has validated the configuration already (Config.validate).
	idps, wis, _ := compileFederation(&s.cfg, hc)
	return &jwtBearerHandler{s: s, idps: idps, workloads: wis,
		audiences:         assertionAudiences(s.issuer, "", false),
		workloadAudiences: assertionAudiences(s.issuer, s.endpoint("/token"), true)}
}

func (h *jwtBearerHandler) CanHandleTokenEndpointRequest(_ context.Context, r fosite.AccessRequester) bool {
	return r.GetGrantTypes().ExactOne(GrantTypeJWTBearer)
}

// CanSkipClientAuth: an ID-JAG is redeemed by an authenticated client
// (§4.4); a workload token is the only credential of its request.
func (h *jwtBearerHandler) CanSkipClientAuth(_ context.Context, r fosite.AccessRequester) bool {
	return !isIDJAG(r.GetRequestForm().Get("assertion"))
}

// isIDJAG reports whether the assertion's JOSE typ is oauth-id-jag+jwt
// (compared as a media type: case-insensitive, "application/" optional).
func isIDJAG(assertion string) bool {
	hdr, _, ok := peekJWT(assertion)
	if !ok {
		return false
	}
	var h struct {
		Typ string `json:"typ"`
	}
	if json.Unmarshal(hdr, &h) != nil {
		return false
	}
	return mediaType(h.Typ) == typIDJAG
}

// assertionClaims are the claims this server reads from either kind of
// assertion.
type assertionClaims struct {
	Issuer   string          `json:"iss"`
	Subject  string          `json:"sub"`
	Audience json.RawMessage `json:"aud"`
	Expiry   *float64        `json:"exp"`
	IssuedAt *float64        `json:"iat"`
	NotBefor *float64        `json:"nbf"`
	ID       string          `json:"jti"`
	ClientID string          `json:"client_id"`
	Resource json.RawMessage `json:"resource"`
	Scope    *string         `json:"scope"`
	Email    string          `json:"email"`
	Act      map[string]any  `json:"act"`
	Cnf      json.RawMessage `json:"cnf"`
	AuthzDet json.RawMessage `json:"authorization_details"`
}

func badAssertion(hint string) error { return fosite.ErrInvalidGrant.WithHint(hint) }

// verify checks the signature with the issuer's keys and decodes the claims.
func verifyAssertion(ctx context.Context, keys *issuerKeys, assertion string) (*assertionClaims, map[string]any, error) {
	payload, _, err := keys.verifyJWS(ctx, assertion)
	if err != nil {
		return nil, nil, badAssertion("The assertion's signature does not verify with a key of its issuer.")
	}
	var cl assertionClaims
	var all map[string]any
	if json.Unmarshal(payload, &cl) != nil || json.Unmarshal(payload, &all) != nil {
		return nil, nil, badAssertion("The assertion's claims are malformed.")
	}
	if cl.Issuer != keys.issuer {
		return nil, nil, badAssertion("The assertion's iss is not its signer's.")
	}
	if cl.Subject == "" {
		return nil, nil, badAssertion("The assertion has no sub.")
	}
	return &cl, all, nil
}

// checkTimes applies RFC 7523 §3 items 4-6: exp and iat required, exp in
// the future, nbf and iat not in the future, iat at most maxAssertionAge
// ago, each with assertionSkew.
func checkTimes(cl *assertionClaims, now time.Time) (exp time.Time, err error) {
	if cl.Expiry == nil || cl.IssuedAt == nil {
		return time.Time{}, badAssertion("The assertion must carry exp and iat.")
	}
	exp = time.Unix(int64(*cl.Expiry), 0)
	iat := time.Unix(int64(*cl.IssuedAt), 0)
	switch {
	case !now.Before(exp.Add(assertionSkew)):
		return time.Time{}, badAssertion("The assertion has expired.")
	case iat.After(now.Add(assertionSkew)):
		return time.Time{}, badAssertion("The assertion's iat is in the future.")
	case cl.NotBefor != nil && time.Unix(int64(*cl.NotBefor), 0).After(now.Add(assertionSkew)):
		return time.Time{}, badAssertion("The assertion is not valid yet (nbf).")
	case now.Sub(iat) > maxAssertionAge:
		return time.Time{}, badAssertion("The assertion is too old (iat).")
	}
	return exp, nil
}

// audiences returns the aud claim as a list (RFC 7519 §4.1.3).
func audiences(raw json.RawMessage) []string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		return many
	}
	return nil
}

// jtiKey is the one-time-id key of an assertion's jti, scoped by issuer.
func jtiKey(issuer, jti string) string {
	return "jwt-bearer:" + digest(issuer+"\x00"+jti)
}

// assertionJTIForm and assertionJTIUntilForm carry the assertion's jtiKey
// and the end of its replay window (Unix seconds) from Handle to Populate
// inside the request form; Sanitize drops them before anything is stored.
const (
	assertionJTIForm      = "\x00assertion_jti"
	assertionJTIUntilForm = "\x00assertion_jti_until"
)

// replayWindowEnd is when an assertion that passed checkTimes can pass it
// no longer: the earlier of exp plus the skew and iat plus
// maxAssertionAge, plus a second for the claims' fractions. Its jti is
// remembered until then, never until an exp however far ahead it lies.
func replayWindowEnd(cl *assertionClaims) time.Time {
	exp := time.Unix(int64(*cl.Expiry), 0).Add(assertionSkew)
	if old := time.Unix(int64(*cl.IssuedAt), 0).Add(maxAssertionAge); old.Before(exp) {
		exp = old
	}
	return exp.Add(time.Second)
}

// spendJTILater records on r what Populate passes to consumeJTI.
func spendJTILater(r fosite.AccessRequester, issuer, jti string, cl *assertionClaims) {
	form := r.GetRequestForm()
	form.Set(assertionJTIForm, jtiKey(issuer, jti))
	form.Set(assertionJTIUntilForm, strconv.FormatInt(replayWindowEnd(cl).Unix(), 10))
}

// consumeJTI records the assertion's jti key until the end of its replay
// window, at least minJTITTL; a second use is invalid_grant. It runs in
// Populate, after the checks of every handler (DPoP's among them), so an
// assertion refused for anything else is not spent; it fails closed.
func (h *jwtBearerHandler) consumeJTI(ctx context.Context, form url.Values) error {
	key := form.Get(assertionJTIForm)
	end, err := strconv.ParseInt(form.Get(assertionJTIUntilForm), 10, 64)
	if key == "" || err != nil {
		return fosite.ErrServerError.WithDebug("the assertion's jti key is missing")
	}
	until := time.Unix(end, 0)
	if floor := h.s.now().Add(minJTITTL); until.Before(floor) {
		until = floor
	}
	err = h.s.cfg.Store.UseJTI(ctx, key, until)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, storage.ErrAlreadyUsed):
		return badAssertion("The assertion was used before (jti replay).")
	}
	return mapStoreErr(err)
}

// refused audits a refused assertion ([EXT-WIF] identity translation) by
// its kind, its claimed issuer and the error, never the assertion itself,
// and returns err.
func (h *jwtBearerHandler) refused(ctx context.Context, assertion string, err error) error {
	iss, _ := peekIssuer(assertion)
	var rfc *fosite.RFC6749Error
	code := "server_error"
	if errors.As(err, &rfc) {
		code = rfc.ErrorField
	}
	kind := "workload"
	if isIDJAG(assertion) {
		kind = "id-jag"
	}
	if len(iss) > 256 {
		iss = iss[:256]
	}
	h.s.log.audit(ctx, "assertion.refused", "kind", kind, "iss", iss, "error", code, "assertion_digest", digest(assertion))
	return err
}

func (h *jwtBearerHandler) HandleTokenEndpointRequest(ctx context.Context, r fosite.AccessRequester) error {
	if len(h.idps)+len(h.workloads) == 0 {
		return fosite.ErrUnsupportedGrantType.WithHint("This server trusts no assertion issuers.")
	}
	form := r.GetRequestForm()
	if len(form["assertion"]) > 1 {
		return fosite.ErrInvalidRequest.WithHint(`The parameter "assertion" is repeated.`)
	}
	assertion := form.Get("assertion")
	if assertion == "" {
		return fosite.ErrInvalidRequest.WithHint("The assertion parameter is missing.")
	}
	if len(assertion) > maxAssertion {
		return badAssertion("The assertion is too large.")
	}
	iss, ok := peekIssuer(assertion)
	if !ok {
		return badAssertion("The assertion is not a JWT.")
	}
	sess, ok := r.GetSession().(*session)
	ar, aok := r.(*fosite.AccessRequest)
	if !ok || !aok {
		return fosite.ErrServerError.WithDebug("unexpected session or request type")
	}
	redeem := h.workload
	if isIDJAG(assertion) {
		redeem = h.idJAG
	}
	if err := redeem(ctx, ar, sess, assertion, iss); err != nil {
		return h.refused(ctx, assertion, err)
	}
	return nil
}

// peekIssuer is the iss claim of a compact JWS, read without verifying
// anything; ok is false when assertion is not one with a JSON payload.
func peekIssuer(assertion string) (iss string, ok bool) {
	_, payload, ok := peekJWT(assertion)
	var peek struct {
		Issuer string `json:"iss"`
	}
	if !ok || json.Unmarshal(payload, &peek) != nil {
		return "", false
	}
	return peek.Issuer, true
}

// idJAG redeems an ID-JAG (draft-ietf-oauth-identity-assertion-authz-grant
// §4.4.1).
func (h *jwtBearerHandler) idJAG(ctx context.Context, r *fosite.AccessRequest, sess *session, assertion, iss string) error {
	c, ok := r.GetClient().(*client)
	if !ok || c == nil {
		return fosite.ErrInvalidClient.WithHint("Client authentication is missing.")
	}
	if c.public || c.source == sourceWorkload {
		return fosite.ErrUnauthorizedClient.WithHint("Only confidential clients may redeem an ID-JAG.")
	}
	// RFC 6749 §5.2: the authenticated client must have the grant type
	// among its grant_types, as for every other grant.
	if !c.GetGrantTypes().Has(GrantTypeJWTBearer) {
		return fosite.ErrUnauthorizedClient.WithHint("This client may not use the jwt-bearer grant.")
	}
	idp := h.idps[iss]
	if idp == nil {
		return badAssertion("The assertion's issuer is not a trusted enterprise IdP.")
	}
	if !slices.Contains(idp.clients, c.id) {
		return fosite.ErrUnauthorizedClient.WithHint("This client may not redeem ID-JAGs of this IdP.")
	}
	cl, _, err := verifyAssertion(ctx, idp.keys, assertion)
	if err != nil {
		return err
	}
	if aud, ok := soleAudience(cl.Audience); !ok || !slices.Contains(h.audiences, aud) {
		return badAssertion("The ID-JAG's aud must be this server's issuer identifier, as its only value.")
	}
	if cl.ClientID == "" || cl.ClientID != c.id {
		return badAssertion("The ID-JAG's client_id is not the authenticated client.")
	}
	exp, err := checkTimes(cl, h.s.now())
	if err != nil {
		return err
	}
	if exp.Sub(time.Unix(int64(*cl.IssuedAt), 0)) > maxAssertionAge {
		return badAssertion("The ID-JAG lives too long (exp - iat).")
	}
	if cl.ID == "" {
		return badAssertion("The ID-JAG has no jti.")
	}
	if len(cl.AuthzDet) > 0 {
		return badAssertion("The ID-JAG carries authorization_details, which this server does not support.")
	}
	if len(cl.Cnf) > 0 {
		// §8.6.1: an ID-JAG bound to a key is redeemed only with a DPoP
		// proof of that key (RFC 9449 §6.1 cnf.jkt); other confirmation
		// methods are not supported.
		var cnf map[string]json.RawMessage
		var jkt string
		if json.Unmarshal(cl.Cnf, &cnf) != nil || len(cnf) != 1 || json.Unmarshal(cnf["jkt"], &jkt) != nil || jkt == "" {
			return badAssertion("The ID-JAG's cnf must be a cnf.jkt thumbprint.")
		}
		if proof := dpopKeyFrom(ctx); proof == "" || !constantEq(proof, jkt) {
			return badAssertion("The ID-JAG is bound to a key (cnf.jkt): send a DPoP proof of that key.")
		}
	}
	res, err := h.idJAGResource(c, cl, r.GetRequestForm()["resource"])
	if err != nil {
		return err
	}
	var claimed []string
	if cl.Scope != nil {
		claimed = splitSpace(*cl.Scope)
	}
	scopes, err := policy.IDJAG(policyClient(c), policyResource(res), claimed, cl.Scope != nil, r.GetRequestedScopes())
	if err != nil {
		return scopeError(err, "None of the requested scopes may be granted for this ID-JAG.")
	}
	subject := cl.Issuer + "#" + cl.Subject
	sess.Federated = cl.Issuer
	if idp.linkByEmail {
		if cl.Email == "" {
			return badAssertion("The ID-JAG has no email to link the account by.")
		}
		active, err := h.s.localPersonActive(ctx, cl.Email)
		if err != nil {
			return userLookupErr(err)
		}
		if !active {
			return badAssertion("No active local account has the ID-JAG's email.")
		}
		subject, sess.Federated = cl.Email, ""
	}
	spendJTILater(r, cl.Issuer, cl.ID, cl)
	sess.Subject = subject
	if cl.Act != nil {
		sess.Act = cl.Act
	}
	h.grant(r, sess, res, scopes, exp)
	return nil
}

// idJAGResource is the resource of an ID-JAG: its resource claim, which must
// be a configured resource (else invalid_grant) the client may use, and
// which a resource parameter, when sent, must equal (invalid_target); with
// no claim, the request's resource or the default (EXT-EMA §5.1).
func (h *jwtBearerHandler) idJAGResource(c *client, cl *assertionClaims, requested []string) (*resource, error) {
	if len(cl.Resource) == 0 {
		return h.s.pickResource(c, requested)
	}
	claimed, ok := soleAudience(cl.Resource)
	if !ok {
		return nil, badAssertion("The ID-JAG's resource claim must name one resource.")
	}
	uri, err := metadata.CanonicalResource(claimed)
	res := h.s.resourceByURI(uri)
	if err != nil || res == nil {
		return nil, badAssertion("The ID-JAG's resource is not a resource of this server.")
	}
	reqd, err := canonicalResources(requested)
	if err != nil {
		return nil, err
	}
	for _, q := range reqd {
		if q != res.URI {
			return nil, errInvalidTarget("The requested resource differs from the ID-JAG's resource claim.")
		}
	}
	if !c.allows(res.URI) {
		return nil, errInvalidTarget("This client may not get tokens for the ID-JAG's resource.")
	}
	return res, nil
}

// sourceWorkload marks the synthetic client of a workload rule: it names
// the issued tokens' client_id and never authenticates.
const sourceWorkload = "workload"

// workload redeems a workload identity token: a trusted issuer, an
// audience naming this server, and the first rule that matches the subject
// and claims and allows the requested resource.
func (h *jwtBearerHandler) workload(ctx context.Context, r *fosite.AccessRequest, sess *session, assertion, iss string) error {
	wi := h.workloads[iss]
	if wi == nil {
		return badAssertion("The assertion's issuer is not trusted.")
	}
	cl, all, err := verifyAssertion(ctx, wi.keys, assertion)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(audiences(cl.Audience), func(a string) bool { return slices.Contains(h.workloadAudiences, a) }) {
		return badAssertion("The assertion's aud names neither this server's issuer nor its token endpoint.")
	}
	exp, err := checkTimes(cl, h.s.now())
	if err != nil {
		return err
	}
	reqd, err := canonicalResources(r.GetRequestForm()["resource"])
	if err != nil {
		return err
	}
	if len(reqd) > 1 {
		return errInvalidTarget("Request one resource per token.")
	}
	var matched []*workloadRule
	for i := range wi.rules {
		if wi.rules[i].matches(cl.Subject, all) {
			matched = append(matched, &wi.rules[i])
		}
	}
	if len(matched) == 0 {
		return fosite.ErrUnauthorizedClient.WithHint("No workload rule admits this subject.")
	}
	var rule *workloadRule
	var res *resource
	for _, m := range matched {
		uri := ""
		if len(reqd) == 1 {
			uri = reqd[0]
		} else if d := h.defaultResource(m); d != "" {
			uri = d
		}
		if uri != "" && slices.Contains(m.resources, uri) {
			rule, res = m, h.s.resourceByURI(uri)
			break
		}
	}
	if rule == nil || res == nil {
		return errInvalidTarget("No workload rule for this subject allows the requested resource.")
	}
	scopes, err := policy.Workload(policyResource(res), rule.scopes, r.GetRequestedScopes())
	if err != nil {
		return scopeError(err, "None of the requested scopes is allowed to this workload.")
	}
	// Workload tokens often omit jti; their hash then stands in for it.
	jti := cl.ID
	if jti == "" {
		jti = "sha256:" + digest(assertion)
	}
	spendJTILater(r, cl.Issuer, jti, cl)
	r.Client = h.s.clients.workload[rule.clientID]
	sess.Subject = cl.Issuer + "#" + cl.Subject
	sess.Federated = cl.Issuer
	h.grant(r, sess, res, scopes, exp)
	return nil
}

// defaultResource is the resource a workload request naming none gets: the
// configured default when the rule allows it, else the rule's only one.
func (h *jwtBearerHandler) defaultResource(rule *workloadRule) string {
	for _, r := range h.s.resources {
		if r.Default && slices.Contains(rule.resources, r.URI) {
			return r.URI
		}
	}
	if len(rule.resources) == 1 {
		return rule.resources[0]
	}
	return ""
}

// matches reports whether a workload token's subject and claims satisfy
// the rule. Claim values compare as strings; a claim that is not a string
// never matches.
func (w *workloadRule) matches(sub string, claims map[string]any) bool {
	if !globMatch(w.subject, sub) {
		return false
	}
	for name, want := range w.claims {
		got, ok := claims[name].(string)
		if !ok || got != want {
			return false
		}
	}
	return true
}

// globMatch matches s against pattern, where "*" stands for any run of
// characters (including none) and everything else is literal.
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}

// grant records what Populate issues: one audience, the scopes, and the
// assertion's expiry as the cap of the token's.
func (h *jwtBearerHandler) grant(r *fosite.AccessRequest, sess *session, res *resource, scopes []string, exp time.Time) {
	sess.SetExpiresAt(fosite.AccessToken, exp)
	r.SetRequestedScopes(scopes)
	r.SetRequestedAudience(fosite.Arguments{res.URI})
	for _, sc := range scopes {
		r.GrantScope(sc)
	}
	r.GrantAudience(res.URI)
}

// PopulateTokenEndpointResponse issues an RFC 9068 access token that
// expires no later than the assertion, and no refresh token.
func (h *jwtBearerHandler) PopulateTokenEndpointResponse(ctx context.Context, r fosite.AccessRequester, resp fosite.AccessResponder) error {
	if !h.CanHandleTokenEndpointRequest(ctx, r) {
		return fosite.ErrUnknownRequest
	}
	sess, ok := r.GetSession().(*session)
	if !ok {
		return fosite.ErrServerError.WithDebug("unexpected session type")
	}
	now := h.s.now()
	form := r.GetRequestForm()
	assertion := form.Get("assertion")
	ttl, ok := h.s.cappedTTL(sess, now)
	if !ok {
		return h.refused(ctx, assertion, badAssertion("The assertion has expired."))
	}
	if err := h.consumeJTI(ctx, form); err != nil {
		return h.refused(ctx, assertion, err)
	}
	tok, _, err := h.s.issueAccessToken(ctx, r, now, ttl)
	if err != nil {
		return err
	}
	resp.SetAccessToken(tok)
	resp.SetTokenType("bearer")
	resp.SetExpiresIn(ttl)
	resp.SetScopes(r.GetGrantedScopes())
	return nil
}
