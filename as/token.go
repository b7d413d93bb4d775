package as

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/as/policy"
	"github.com/mcpauth/mcpauth/dpop"
	"github.com/mcpauth/mcpauth/metadata"
	"github.com/mcpauth/mcpauth/storage"
)

// singleParams may appear at most once in a token request (RFC 6749 §3.2).
// `resource` may repeat (RFC 8707 §2).
var singleParams = []string{"grant_type", "code", "code_verifier", "redirect_uri", "refresh_token", "scope",
	"client_id", "client_secret", "client_assertion", "client_assertion_type"}

// serveToken is the token endpoint (RFC 6749 §3.2).
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST, OPTIONS")
		writeJSONError(w, http.StatusMethodNotAllowed, "invalid_request", "The token endpoint accepts POST only.")
		return
	}
	if err := s.parseForm(w, r); err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	if err := checkGrantType(r.PostForm.Get("grant_type")); err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, err := s.checkTokenProof(ctx, r)
	if err != nil {
		if errors.Is(err, errUseDPoPNonce) {
			s.setNonceHeader(w)
		}
		s.writeError(w, r, err)
		return
	}
	ctx = withRedemption(ctx)
	ar, err := s.provider.NewAccessRequest(ctx, r, newSession(""))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp, err := s.provider.NewAccessResponse(ctx, ar)
	if errors.Is(err, errRefreshRace) {
		// Lost a race for the rotation of a refresh token (store.go).
		err = s.store.refreshRaceLost(ctx, ar)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// A client read in this request with a LastUsedAt less than
	// storage.TouchGranularity old is not touched: the backend would skip
	// the write, and the call would still cost a round trip.
	if c, ok := ar.GetClient().(*client); ok && c.source != "config" && c.source != sourceWorkload && !(s.now().Sub(c.lastUsedAt) < storage.TouchGranularity) {
		if err := s.cfg.Store.TouchClient(ctx, c.id, s.now()); err != nil && !errors.Is(err, storage.ErrNotFound) {
			s.log.error(ctx, "touching client", "client_id", c.id, "err", err)
		}
	}
	if jkt := dpopKeyFrom(ctx); jkt != "" {
		// RFC 9449 §5: a bound token is of type DPoP.
		resp.SetTokenType(dpop.HeaderName)
		s.setNonceHeader(w)
	}
	s.log.auditIssued(ctx, ar.GetClient().GetID(), ar.GetGrantTypes()[0], ar.GetSession().GetSubject(),
		strings.Join(ar.GetGrantedAudience(), " "), strings.Join(ar.GetGrantedScopes(), " "))
	writeAccessResponse(w, resp)
}

// cappedTTL is the lifetime of an access token whose grant caps it at the
// session's access-token expiry (the assertion's exp, the subject token's):
// AccessTokenTTL or less. ok is false when less than a second would remain.
func (s *Server) cappedTTL(sess *session, now time.Time) (ttl time.Duration, ok bool) {
	ttl = s.cfg.AccessTokenTTL
	if d := sess.GetExpiresAt(fosite.AccessToken).Sub(now); d < ttl {
		ttl = d
	}
	return ttl, ttl >= time.Second
}

// issueAccessToken mints the access token of r, issued at now and living
// ttl, and stores its record, for the grants whose Populate issues the
// token itself (jwt-bearer, token exchange). It returns the token and its
// signature.
func (s *Server) issueAccessToken(ctx context.Context, r fosite.AccessRequester, now time.Time, ttl time.Duration) (tok, sig string, err error) {
	ts := *s.tokens
	ts.ttl = ttl
	ts.now = func() time.Time { return now }
	tok, sig, err = ts.GenerateAccessToken(ctx, r)
	if err != nil {
		return "", "", fosite.ErrServerError.WithWrap(err)
	}
	if err := s.store.CreateAccessTokenSession(ctx, sig, r.Sanitize(nil)); err != nil {
		return "", "", err
	}
	return tok, sig, nil
}

// checkGrantType answers a missing grant_type with invalid_request and one
// this server does not implement (password, implicit, anything unknown) with
// unsupported_grant_type (RFC 6749 §5.2); fosite would say invalid_request.
func checkGrantType(gt string) error {
	switch gt {
	case "":
		return fosite.ErrInvalidRequest.WithHint("The grant_type parameter is missing.")
	case "authorization_code", "refresh_token", "client_credentials":
		return nil
	}
	if isExtraGrant(gt) {
		return nil
	}
	return fosite.ErrUnsupportedGrantType.WithHint("This server does not support that grant type.")
}

// parseForm reads a capped application/x-www-form-urlencoded body and
// refuses repeated single-valued parameters.
func (s *Server) parseForm(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fosite.ErrInvalidRequest.WithHint("The request body is too large.")
		}
		return fosite.ErrInvalidRequest.WithHint("The request body is not a valid form.")
	}
	for _, p := range singleParams {
		if len(r.PostForm[p]) > 1 {
			return fosite.ErrInvalidRequest.WithHintf("The parameter %q is repeated.", p)
		}
	}
	if len(r.PostForm) == 0 {
		return fosite.ErrInvalidRequest.WithHint("The request body is empty or not application/x-www-form-urlencoded.")
	}
	return nil
}

// canonicalResources canonicalises the `resource` values of a request
// (RFC 8707 §2) and drops duplicates.
func canonicalResources(values []string) ([]string, error) {
	var out []string
	for _, v := range values {
		c, err := metadata.CanonicalResource(v)
		if err != nil {
			return nil, errInvalidTarget("The resource parameter is not an absolute URI without fragment.")
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// pickResource chooses the one resource of a request: the requested one
// (which must be configured and allowed for the client), or the default.
// Tokens carry exactly one audience, so requesting several is invalid_target.
func (s *Server) pickResource(c *client, values []string) (*resource, error) {
	var reqd []string
	if len(values) == 1 && s.isConfiguredFixedPoint(values[0]) {
		// The canonical form of a configured resource's own identifier.
		reqd = values
	} else {
		var err error
		if reqd, err = canonicalResources(values); err != nil {
			return nil, err
		}
	}
	var uri string
	switch len(reqd) {
	case 0:
		for _, r := range s.resources {
			if r.Default && c.allows(r.URI) {
				uri = r.URI
			}
		}
		if uri == "" && len(c.resources) == 1 {
			uri = c.resources[0]
		}
		if uri == "" {
			return nil, errInvalidTarget("No resource was requested and there is no default resource for this client.")
		}
	case 1:
		uri = reqd[0]
	default:
		return nil, errInvalidTarget("Request one resource per token.")
	}
	res := s.resourceByURI(uri)
	if res == nil {
		return nil, errInvalidTarget("The requested resource is unknown to this server.")
	}
	if !c.allows(uri) {
		return nil, errInvalidTarget("This client may not get tokens for the requested resource.")
	}
	return res, nil
}

// isConfiguredFixedPoint reports whether uri is the identifier of a
// configured resource that metadata.CanonicalResource leaves as it is.
func (s *Server) isConfiguredFixedPoint(uri string) bool {
	r := s.resourceByURI(uri)
	return r != nil && r.fixedPoint
}

// resourcePreHandler runs before fosite's handlers. For client credentials
// it picks the resource (RFC 8707) and narrows the scopes, then grants them,
// so fosite's handler checks a request that is already within policy.
type resourcePreHandler struct{ s *Server }

var _ fosite.TokenEndpointHandler = (*resourcePreHandler)(nil)

func (h *resourcePreHandler) CanHandleTokenEndpointRequest(_ context.Context, r fosite.AccessRequester) bool {
	return r.GetGrantTypes().ExactOne("client_credentials")
}

func (h *resourcePreHandler) CanSkipClientAuth(context.Context, fosite.AccessRequester) bool {
	return false
}

func (h *resourcePreHandler) HandleTokenEndpointRequest(_ context.Context, r fosite.AccessRequester) error {
	c, ok := r.GetClient().(*client)
	if !ok {
		return fosite.ErrInvalidClient
	}
	if c.public || !c.GetGrantTypes().Has("client_credentials") {
		return fosite.ErrUnauthorizedClient.WithHint("This client may not use the client_credentials grant.")
	}
	res, err := h.s.pickResource(c, r.GetRequestForm()["resource"])
	if err != nil {
		return err
	}
	scopes, err := grantScopes(c, res, r.GetRequestedScopes())
	if err != nil {
		return err
	}
	r.SetRequestedScopes(scopes)
	r.SetRequestedAudience(fosite.Arguments{res.URI})
	for _, sc := range scopes {
		r.GrantScope(sc)
	}
	r.GrantAudience(res.URI)
	return nil
}

func (h *resourcePreHandler) PopulateTokenEndpointResponse(context.Context, fosite.AccessRequester, fosite.AccessResponder) error {
	return nil
}

// resourcePostHandler runs after fosite's handlers have loaded the grant of
// a code or refresh request: a `resource` sent to the token endpoint must be
// within what was granted at the authorization endpoint (RFC 8707 §2.2), and
// a `scope` sent with a refresh request within the granted scopes (RFC 6749 §6).
type resourcePostHandler struct{ s *Server }

var _ fosite.TokenEndpointHandler = (*resourcePostHandler)(nil)

func (h *resourcePostHandler) CanHandleTokenEndpointRequest(_ context.Context, r fosite.AccessRequester) bool {
	g := r.GetGrantTypes()
	return g.ExactOne("authorization_code") || g.ExactOne("refresh_token")
}

func (h *resourcePostHandler) CanSkipClientAuth(context.Context, fosite.AccessRequester) bool {
	return false
}

func (h *resourcePostHandler) HandleTokenEndpointRequest(_ context.Context, r fosite.AccessRequester) error {
	reqd, err := canonicalResources(r.GetRequestForm()["resource"])
	if err != nil {
		return err
	}
	granted := r.GetRequestedAudience()
	for _, res := range reqd {
		if !slices.Contains(granted, res) {
			return errInvalidTarget("The requested resource was not granted by this authorization.")
		}
	}
	if r.GetGrantTypes().ExactOne("refresh_token") {
		if err := h.narrowRefresh(r); err != nil {
			return err
		}
		// RFC 9700 §4.14.2: a bounded absolute lifetime. Rotation never
		// extends a refresh token beyond the grant's end.
		if sess, ok := r.GetSession().(*session); ok && !sess.GrantedAt.IsZero() {
			end := sess.GrantedAt.Add(h.s.cfg.GrantLifetime)
			if !h.s.now().Before(end) {
				return fosite.ErrInvalidGrant.WithHint("The grant has reached its maximum lifetime; authorize again.")
			}
			if exp := sess.GetExpiresAt(fosite.RefreshToken); exp.IsZero() || exp.After(end) {
				sess.SetExpiresAt(fosite.RefreshToken, end)
			}
		}
	}
	return nil
}

// narrowRefresh sets the scopes of a refresh (RFC 6749 §6): fosite granted
// those of the presented token; the request's `scope` may name fewer of
// those the person originally granted, and naming none means all of them.
func (h *resourcePostHandler) narrowRefresh(r fosite.AccessRequester) error {
	ar, ok := r.(*fosite.AccessRequest)
	c, cok := r.GetClient().(*client)
	if !ok || !cok {
		return fosite.ErrServerError.WithDebug("unexpected request or client type")
	}
	original := []string(r.GetGrantedScopes())
	if sess, ok := r.GetSession().(*session); ok && len(sess.Scopes) > 0 {
		original = sess.Scopes
	}
	var res *policy.Resource
	if aud := r.GetGrantedAudience(); len(aud) == 1 {
		if rr := h.s.resourceByURI(aud[0]); rr != nil {
			pr := policyResource(rr)
			res = &pr
		}
	}
	scopes, err := policy.Refresh(policyClient(c), res, original, fosite.RemoveEmpty(splitSpace(r.GetRequestForm().Get("scope"))))
	if err != nil {
		return scopeError(err, "")
	}
	ar.GrantedScope = fosite.Arguments(scopes)
	return nil
}

func (h *resourcePostHandler) PopulateTokenEndpointResponse(context.Context, fosite.AccessRequester, fosite.AccessResponder) error {
	return nil
}

// grantExtension is the slot for grants that live in their own file, such as
// RFC 8693 token exchange: that file calls registerGrant from an
// init function with its grant type URI and a constructor of its fosite
// handler, which then runs between fosite's handlers and the resource check,
// is advertised in grant_types_supported, and may be listed in a client's
// GrantTypes. The handler must grant exactly one audience (a configured
// resource the client may use) because GenerateAccessToken refuses any other.
type grantExtension struct {
	grantType string
	handler   func(*Server) fosite.TokenEndpointHandler
	// enabled, when set, says whether the server's configuration offers
	// the grant: only then is it advertised in grant_types_supported.
	enabled func(*Server) bool
}

var grantExtensions []grantExtension

// registerGrant adds an extension grant; call it from init.
func registerGrant(g grantExtension) { grantExtensions = append(grantExtensions, g) }

func isExtraGrant(g string) bool {
	return slices.ContainsFunc(grantExtensions, func(e grantExtension) bool { return e.grantType == g })
}

func (s *Server) extensionHandlers() []fosite.TokenEndpointHandler {
	var out []fosite.TokenEndpointHandler
	for _, e := range grantExtensions {
		out = append(out, e.handler(s))
	}
	return out
}
