package as

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	jose3 "github.com/go-jose/go-jose/v3"
	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/internal/safehttp"
	"github.com/mcpauth/mcpauth/internal/secret"
	"github.com/mcpauth/mcpauth/metadata"
	"github.com/mcpauth/mcpauth/storage"
)

// Client authentication methods (RFC 7591 §2, RFC 7523 §2.2).
const (
	authNone          = "none"
	authSecretBasic   = "client_secret_basic"
	authSecretPost    = "client_secret_post"
	authPrivateKeyJWT = "private_key_jwt"
)

// assertionAlgs are the JWS algorithms accepted for private_key_jwt client
// assertions: fosite verifies RSA, RSA-PSS and ECDSA; HMAC and none never.
var assertionAlgs = []string{"ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}

// client is the fosite.Client (and fosite.OpenIDConnectClient, for
// private_key_jwt) of every client, whatever its source.
type client struct {
	id              string
	secretHash      []byte
	secretExpiresAt time.Time
	public          bool
	name            string
	redirectURIs    []string
	grantTypes      []string
	scopes          []string // effective: what the client may be granted (the ceiling)
	// defaultScopes are what a registered or CIMD client registered with:
	// its scopes for a request that names none (see defaultScopes).
	defaultScopes []string
	resources     []string // effective: canonical resource URIs
	authMethod    string
	// exactAuthMethod: the client registered authMethod (RFC 7591 §2) and
	// must authenticate with it; configured clients may send their secret
	// either way.
	exactAuthMethod bool
	jwks            *jose3.JSONWebKeySet
	jwksURI         string
	assertionAlg    string // alg of the assertion being checked (see clientManager.authenticate)
	source          string
	// lastUsedAt is storage.Client.LastUsedAt as read with the client.
	lastUsedAt time.Time
	native     bool
	// dpopBound: the client registered dpop_bound_access_tokens (RFC 9449
	// §5.2) and gets no token without a DPoP proof.
	dpopBound bool
}

var _ fosite.OpenIDConnectClient = (*client)(nil)

func (c *client) GetID() string                      { return c.id }
func (c *client) GetHashedSecret() []byte            { return c.secretHash }
func (c *client) GetRedirectURIs() []string          { return c.redirectURIs }
func (c *client) GetGrantTypes() fosite.Arguments    { return c.grantTypes }
func (c *client) GetResponseTypes() fosite.Arguments { return fosite.Arguments{"code"} }
func (c *client) GetScopes() fosite.Arguments        { return c.scopes }
func (c *client) IsPublic() bool                     { return c.public }
func (c *client) GetAudience() fosite.Arguments      { return c.resources }
func (c *client) GetRequestURIs() []string           { return nil }

// GetResponseModes lets fosite accept response_mode=query, the default of
// the code flow (OAuth 2.0 Multiple Response Type Encoding Practices §2.1);
// serveAuthorize refuses every other mode before fosite reads the request.
func (c *client) GetResponseModes() []fosite.ResponseModeType {
	return []fosite.ResponseModeType{fosite.ResponseModeQuery}
}
func (c *client) GetJSONWebKeys() *jose3.JSONWebKeySet {
	return c.jwks
}
func (c *client) GetJSONWebKeysURI() string                { return c.jwksURI }
func (c *client) GetRequestObjectSigningAlgorithm() string { return "" }
func (c *client) GetTokenEndpointAuthMethod() string       { return c.authMethod }

// GetTokenEndpointAuthSigningAlgorithm answers the algorithm of the assertion
// under verification when it is one of assertionAlgs: clients may sign with
// any allowed algorithm, and fosite picks the key type from the algorithm.
func (c *client) GetTokenEndpointAuthSigningAlgorithm() string { return c.assertionAlg }

// allows reports whether the client may use the canonical resource uri.
func (c *client) allows(uri string) bool { return slices.Contains(c.resources, uri) }

// clientManager finds clients: configuration first, then storage, then the
// ClientResolver for https client_ids. It implements fosite.ClientManager.
type clientManager struct {
	static    map[string]*client
	store     storage.Store
	resolver  ClientResolver
	resources []resource
	// regScopes and regResources are the registration policy, the ceiling
	// of registered and CIMD clients (Config.RegistrationScopes,
	// Config.RegistrationResources).
	regScopes    []string
	regResources []string
	hasher       *secret.Hasher
	now          func() time.Time
	f            *fosite.Fosite // set after construction, for private_key_jwt
	jwks         *jwksFetcher
	// workload holds the synthetic clients of workload rules (the
	// client_id of the tokens they issue), so their tokens can be
	// introspected; they never authenticate.
	workload map[string]*client
	// assertionAudiences are the accepted sole aud values of client
	// assertions (see assertionAudiences).
	assertionAudiences []string

	// converted caches fromStorage results of registered and CIMD clients,
	// so a warm client costs a lookup and a copy rather than a conversion
	// (JWKS parsing, resource canonicalisation) on every request. An entry
	// is used only while the record it came from is unchanged.
	convMu    sync.Mutex
	converted map[string]convertedClient
}

// convertedClient is a conversion and a copy of the record it was made from
// (LastUsedAt aside), so an entry is used only for an identical record.
type convertedClient struct {
	c   *client
	rec storage.Client
}

// sameClientRecord reports whether a and b convert alike: every field
// fromStorage reads is equal.
func sameClientRecord(a, b *storage.Client) bool {
	return a.ID == b.ID && a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt) &&
		bytes.Equal(a.SecretHash, b.SecretHash) && a.SecretExpiresAt.Equal(b.SecretExpiresAt) &&
		a.Public == b.Public && a.Name == b.Name && slices.Equal(a.RedirectURIs, b.RedirectURIs) &&
		a.TokenEndpointAuthMethod == b.TokenEndpointAuthMethod && a.JWKSURI == b.JWKSURI &&
		bytes.Equal(a.JWKS, b.JWKS) && a.Source == b.Source && a.ApplicationType == b.ApplicationType &&
		slices.Equal(a.GrantTypes, b.GrantTypes) && slices.Equal(a.Scopes, b.Scopes) &&
		slices.Equal(a.Resources, b.Resources) && bytes.Equal(a.Metadata, b.Metadata)
}

// maxConverted bounds the conversion cache; it is cleared when full.
const maxConverted = 4096

// convert returns fromStorage(sc), from the cache when sc is the same
// version of the record as the cached conversion.
func (m *clientManager) convert(sc *storage.Client) (*client, error) {
	m.convMu.Lock()
	e, ok := m.converted[sc.ID]
	m.convMu.Unlock()
	if ok && sameClientRecord(&e.rec, sc) {
		c := *e.c
		c.lastUsedAt = sc.LastUsedAt
		return &c, nil
	}
	c, err := m.fromStorage(sc)
	if err != nil {
		return nil, err
	}
	m.convMu.Lock()
	if m.converted == nil || len(m.converted) >= maxConverted {
		m.converted = map[string]convertedClient{}
	}
	rec := *sc
	rec.SecretHash, rec.JWKS = bytes.Clone(sc.SecretHash), bytes.Clone(sc.JWKS)
	rec.RedirectURIs, rec.GrantTypes = slices.Clone(sc.RedirectURIs), slices.Clone(sc.GrantTypes)
	rec.Scopes, rec.Resources = slices.Clone(sc.Scopes), slices.Clone(sc.Resources)
	rec.Metadata = bytes.Clone(sc.Metadata)
	m.converted[sc.ID] = convertedClient{c: c, rec: rec}
	m.convMu.Unlock()
	cc := *c
	return &cc, nil
}

var _ fosite.ClientManager = (*clientManager)(nil)

// GetClient implements fosite.ClientManager. Unknown clients give
// fosite.ErrNotFound; an unreachable store gives temporarily_unavailable.
func (m *clientManager) GetClient(ctx context.Context, id string) (fosite.Client, error) {
	c, err := m.get(ctx, id)
	if err != nil {
		return nil, err
	}
	st := reqStateFrom(ctx)
	if st != nil && st.assertionAlg != "" {
		cc := *c
		cc.assertionAlg = st.assertionAlg
		return &cc, nil
	}
	if st != nil && st.loopbackRedirect != "" && matchRedirectURI(c.redirectURIs, st.loopbackRedirect) && !slices.Contains(c.redirectURIs, st.loopbackRedirect) {
		uri := st.loopbackRedirect
		cc := *c
		cc.redirectURIs = append(slices.Clone(c.redirectURIs), uri)
		return &cc, nil
	}
	return c, nil
}

func (m *clientManager) get(ctx context.Context, id string) (*client, error) {
	if id == "" || len(id) > 2048 {
		return nil, fosite.ErrNotFound
	}
	if c, ok := m.static[id]; ok {
		return c, nil
	}
	if c, ok := m.workload[id]; ok {
		return c, nil
	}
	memo := redemptionFrom(ctx)
	if memo != nil && memo.client != nil && memo.client.id == id {
		return memo.client, nil
	}
	var sc *storage.Client
	var err error
	if m.resolver != nil && strings.HasPrefix(id, "https://") {
		// A Client ID Metadata Document is the source of truth for its
		// client: always ask the resolver (it caches within bounds), never a
		// stored copy, so a document that drops a redirect URI takes effect.
		sc, err = m.resolver.ResolveClient(ctx, id)
		if err == nil && sc != nil && sc.Source == "" {
			sc.Source = "cimd"
		}
	} else {
		sc, err = m.store.GetClient(ctx, id)
	}
	if err != nil {
		return nil, mapStoreErr(err)
	}
	if sc == nil || sc.ID != id {
		return nil, fosite.ErrNotFound
	}
	c, err := m.convert(sc)
	if err == nil && memo != nil {
		memo.client = c
	}
	return c, err
}

// fromStorage converts a stored (dcr) or resolved (cimd) client.
func (m *clientManager) fromStorage(sc *storage.Client) (*client, error) {
	c := &client{
		id:              sc.ID,
		secretHash:      sc.SecretHash,
		secretExpiresAt: sc.SecretExpiresAt,
		public:          sc.Public,
		name:            sc.Name,
		redirectURIs:    sc.RedirectURIs,
		authMethod:      sc.TokenEndpointAuthMethod,
		jwksURI:         sc.JWKSURI,
		source:          sc.Source,
		native:          sc.ApplicationType == "native",
		lastUsedAt:      sc.LastUsedAt,
	}
	if len(sc.JWKS) > 0 {
		var set jose3.JSONWebKeySet
		if err := json.Unmarshal(sc.JWKS, &set); err != nil {
			return nil, fosite.ErrNotFound.WithWrap(err)
		}
		c.jwks = sigUse(&set)
	}
	if c.authMethod == "" {
		switch {
		case c.jwks != nil || c.jwksURI != "":
			c.authMethod = authPrivateKeyJWT
		case c.public || len(c.secretHash) == 0:
			c.authMethod = authNone
		default:
			c.authMethod = authSecretBasic
		}
	}
	if c.authMethod == authNone {
		c.public = true
	} else if c.authMethod != authPrivateKeyJWT && len(c.secretHash) == 0 {
		c.public = true
		c.authMethod = authNone
	}
	c.exactAuthMethod = sc.TokenEndpointAuthMethod == c.authMethod
	c.grantTypes = effectiveGrants(sc.GrantTypes, c.public, len(c.redirectURIs) > 0)
	// The registration policy is the ceiling; the scope the client
	// registered with is only its default (RFC 7591 §2 leaves the meaning
	// of scope to the server), so it can step up within the policy.
	res := sc.Resources
	if len(m.regResources) > 0 {
		res = m.regResources
	}
	c.resources, c.scopes = m.effectiveAccess(res, m.regScopes)
	c.scopes = withOffline(c.scopes, c.grantTypes)
	c.defaultScopes = slices.Clone(sc.Scopes)
	c.dpopBound = registeredDPoPBound(sc.Metadata)
	return c, nil
}

// effectiveGrants narrows the grant types a client lists to those this
// server offers it (CLIENT-QUIRKS: listed grant types are requests the AS may
// narrow, never a reason to refuse the client).
func effectiveGrants(listed []string, public, hasRedirect bool) []string {
	if len(listed) == 0 {
		if !public && !hasRedirect {
			return []string{"client_credentials"}
		}
		return []string{"authorization_code", "refresh_token"}
	}
	var out []string
	for _, g := range listed {
		switch g {
		case "authorization_code", "refresh_token":
		case "client_credentials":
			if public {
				continue
			}
		default:
			if !isExtraGrant(g) {
				continue
			}
		}
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// effectiveAccess returns the canonical resources and the scopes a client may
// have: those listed (empty lists mean every configured resource, and every
// scope of those resources), never more than configured.
func (m *clientManager) effectiveAccess(listedRes, listedScopes []string) (resources, scopes []string) {
	for _, r := range m.resources {
		if len(listedRes) > 0 {
			ok := false
			for _, lr := range listedRes {
				if c, err := metadata.CanonicalResource(lr); err == nil && c == r.URI {
					ok = true
					break
				}
			}
			if !ok {
				continue
			}
		}
		resources = append(resources, r.URI)
		for _, s := range r.Scopes {
			if (len(listedScopes) == 0 || slices.Contains(listedScopes, s)) && !slices.Contains(scopes, s) {
				scopes = append(scopes, s)
			}
		}
	}
	return resources, scopes
}

// withOffline adds offline_access to the scopes of a client that may
// refresh: it is granted when asked for (see policy.Select), and fosite
// checks every granted scope against the client's.
func withOffline(scopes, grants []string) []string {
	if slices.Contains(grants, "refresh_token") && !slices.Contains(scopes, offlineAccess) {
		scopes = append(scopes, offlineAccess)
	}
	return scopes
}

func (m *clientManager) fromConfig(i int, cc Client) (*client, error) {
	if cc.ID == "" {
		return nil, fmt.Errorf("as: Clients[%d].ID is required", i)
	}
	c := &client{id: cc.ID, name: cc.Name, public: cc.Public, redirectURIs: slices.Clone(cc.RedirectURIs), source: "config", dpopBound: cc.DPoPBoundAccessTokens}
	switch {
	case len(cc.JWKS) > 0 || cc.JWKSURI != "":
		if cc.Public {
			return nil, fmt.Errorf("as: Clients[%d] (%s): a public client has no JWKS", i, cc.ID)
		}
		c.authMethod = authPrivateKeyJWT
		c.jwksURI = cc.JWKSURI
		if len(cc.JWKS) > 0 {
			var set jose3.JSONWebKeySet
			if err := json.Unmarshal(cc.JWKS, &set); err != nil {
				return nil, fmt.Errorf("as: Clients[%d].JWKS: %v", i, err)
			}
			c.jwks = sigUse(&set)
		}
	case cc.Public:
		if cc.Secret != "" || len(cc.SecretHash) > 0 {
			return nil, fmt.Errorf("as: Clients[%d] (%s): a public client has no secret", i, cc.ID)
		}
		c.authMethod = authNone
	case cc.Secret != "":
		if len(cc.Secret) < 16 {
			return nil, fmt.Errorf("as: Clients[%d].Secret is shorter than 16 characters", i)
		}
		c.secretHash = m.hasher.Hash(cc.Secret)
		c.authMethod = authSecretBasic
	case len(cc.SecretHash) > 0:
		c.secretHash = slices.Clone(cc.SecretHash)
		c.authMethod = authSecretBasic
	default:
		return nil, fmt.Errorf("as: Clients[%d] (%s): set Secret, SecretHash, JWKS or Public", i, cc.ID)
	}
	for _, g := range cc.GrantTypes {
		switch g {
		case "authorization_code", "refresh_token":
		case "client_credentials":
			if cc.Public {
				return nil, fmt.Errorf("as: Clients[%d] (%s): a public client cannot use client_credentials", i, cc.ID)
			}
		default:
			if !isExtraGrant(g) {
				return nil, fmt.Errorf("as: Clients[%d].GrantTypes: unsupported grant type %q", i, g)
			}
		}
	}
	c.grantTypes = effectiveGrants(cc.GrantTypes, cc.Public, len(cc.RedirectURIs) > 0)
	if slices.Contains(c.grantTypes, "authorization_code") && len(c.redirectURIs) == 0 {
		return nil, fmt.Errorf("as: Clients[%d] (%s): authorization_code needs RedirectURIs", i, cc.ID)
	}
	for _, u := range c.redirectURIs {
		if err := checkRedirectURI(u); err != nil {
			return nil, fmt.Errorf("as: Clients[%d].RedirectURIs: %q: %v", i, u, err)
		}
	}
	for _, r := range cc.Resources {
		cr, err := metadata.CanonicalResource(r)
		if err != nil || !slices.ContainsFunc(m.resources, func(x resource) bool { return x.URI == cr }) {
			return nil, fmt.Errorf("as: Clients[%d].Resources: %q is not a configured resource", i, r)
		}
	}
	c.resources, c.scopes = m.effectiveAccess(cc.Resources, cc.Scopes)
	c.scopes = withOffline(c.scopes, c.grantTypes)
	return c, nil
}

// checkRedirectURI accepts absolute URIs without fragment: https, http on
// any host (loopback for native apps; others allowed for development), and
// private-use schemes of native apps (RFC 8252 §7.1).
func checkRedirectURI(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		return errors.New("not an absolute URI")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return errors.New("has a fragment")
	}
	if (u.Scheme == "https" || u.Scheme == "http") && u.Host == "" {
		return errors.New("has no host")
	}
	return nil
}

// ClientAssertionJWTValid implements fosite.ClientManager. The jti check is
// made atomically by SetClientAssertionJWT, so this answers nil.
func (m *clientManager) ClientAssertionJWTValid(context.Context, string) error { return nil }

// SetClientAssertionJWT records a private_key_jwt assertion's jti until it
// expires; a second use fails (RFC 7523 §3, item 7).
func (m *clientManager) SetClientAssertionJWT(ctx context.Context, jti string, exp time.Time) error {
	err := m.store.UseJTI(ctx, "client_assertion:"+jti, exp)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, storage.ErrAlreadyUsed):
		return fosite.ErrInvalidClient.WithHint("The client assertion was used before (jti replay).")
	case errors.Is(err, storage.ErrUnavailable):
		return fosite.ErrTemporarilyUnavailable.WithWrap(err)
	}
	return fosite.ErrServerError.WithWrap(err)
}

// authenticate is fosite's ClientAuthenticationStrategy (RFC 6749 §2.3,
// RFC 7523 §2.2). Secrets are accepted by HTTP Basic or in the body, checked
// against an HMAC in constant time; assertions are handed to fosite with
// their algorithm checked against assertionAlgs first.
func (m *clientManager) authenticate(ctx context.Context, r *http.Request, form url.Values) (fosite.Client, error) {
	if form.Get("client_assertion_type") != "" || form.Get("client_assertion") != "" {
		return m.authenticateAssertion(ctx, r, form)
	}
	id, sec, basic := r.BasicAuth()
	if basic {
		var err1, err2 error
		id, err1 = url.QueryUnescape(id)
		sec, err2 = url.QueryUnescape(sec)
		if err1 != nil || err2 != nil {
			return nil, fosite.ErrInvalidRequest.WithHint("The HTTP Basic credentials are not form-urlencoded.")
		}
		if form.Get("client_secret") != "" {
			return nil, fosite.ErrInvalidRequest.WithHint("Use one client authentication method, not several.")
		}
		if fid := form.Get("client_id"); fid != "" && fid != id {
			return nil, fosite.ErrInvalidRequest.WithHint("client_id in the body differs from the HTTP Basic user.")
		}
	} else {
		id, sec = form.Get("client_id"), form.Get("client_secret")
	}
	if id == "" {
		return nil, fosite.ErrInvalidClient.WithHint("Client authentication is missing.")
	}
	c, err := m.get(ctx, id)
	if err != nil {
		return nil, authErr(err)
	}
	if c.source == sourceWorkload {
		return nil, fosite.ErrInvalidClient.WithHint("The client is unknown.")
	}
	if c.public {
		// A public client proves nothing; a secret it sends anyway (some
		// clients register as public and still send one) is ignored.
		return c, nil
	}
	if c.authMethod == authPrivateKeyJWT {
		return nil, fosite.ErrInvalidClient.WithHint("This client authenticates with private_key_jwt.")
	}
	if sec == "" || !m.hasher.Equal(c.secretHash, sec) {
		return nil, fosite.ErrInvalidClient.WithHint("Client authentication failed.")
	}
	// A registered client uses the method it registered (RFC 7591 §2,
	// token_endpoint_auth_method), checked after the secret so a wrong
	// method tells nothing to someone without it.
	if c.exactAuthMethod {
		if basic && c.authMethod != authSecretBasic {
			return nil, fosite.ErrInvalidClient.WithHint("This client registered client_secret_post: send client_id and client_secret in the request body, not HTTP Basic.")
		}
		if !basic && c.authMethod != authSecretPost {
			return nil, fosite.ErrInvalidClient.WithHint("This client registered client_secret_basic: send its credentials with HTTP Basic, not in the request body.")
		}
	}
	if !c.secretExpiresAt.IsZero() && m.now().After(c.secretExpiresAt) {
		return nil, fosite.ErrInvalidClient.WithHint("The client secret has expired.")
	}
	return c, nil
}

func (m *clientManager) authenticateAssertion(ctx context.Context, r *http.Request, form url.Values) (fosite.Client, error) {
	// RFC 7523 §2.2 defines one assertion type; anything else cannot
	// authenticate the client (RFC 6749 §5.2 invalid_client).
	if form.Get("client_assertion_type") != clientAssertionType {
		return nil, fosite.ErrInvalidClient.WithHint("The client_assertion_type must be " + clientAssertionType + ".")
	}
	assertion := form.Get("client_assertion")
	if len(assertion) > 8192 {
		return nil, fosite.ErrInvalidClient.WithHint("The client assertion is too large.")
	}
	hdr, claims, ok := peekJWT(assertion)
	if !ok {
		return nil, fosite.ErrInvalidClient.WithHint("The client assertion is not a JWS.")
	}
	var h struct {
		Alg string `json:"alg"`
		Typ string `json:"typ"`
		JKU string `json:"jku"`
		JWK any    `json:"jwk"`
		X5U string `json:"x5u"`
	}
	if json.Unmarshal(hdr, &h) != nil || !slices.Contains(assertionAlgs, h.Alg) {
		return nil, fosite.ErrInvalidClient.WithHint("The client assertion's algorithm is not allowed.")
	}
	if h.JKU != "" || h.JWK != nil || h.X5U != "" {
		return nil, fosite.ErrInvalidClient.WithHint("Key references in the assertion header are not honoured.")
	}
	if !clientAssertionTyp(h.Typ) {
		return nil, fosite.ErrInvalidClient.WithHint("The client assertion's typ must be " + typClientAuthentication + " or absent.")
	}
	var cl struct {
		Exp *float64        `json:"exp"`
		Aud json.RawMessage `json:"aud"`
	}
	if json.Unmarshal(claims, &cl) != nil || cl.Exp == nil {
		return nil, fosite.ErrInvalidClient.WithHint("The client assertion must carry exp.")
	}
	if aud, ok := soleAudience(cl.Aud); !ok || !slices.Contains(m.assertionAudiences, aud) {
		return nil, fosite.ErrInvalidClient.WithHint("The client assertion's aud must be this server's issuer identifier, as its only value.")
	}
	if time.Unix(int64(*cl.Exp), 0).After(m.now().Add(maxAssertionLifetime)) {
		return nil, fosite.ErrInvalidClient.WithHint("The client assertion lives too long.")
	}
	// GetClient, called by fosite while it verifies the assertion, shows
	// the client with this alg; no later lookup in the request does.
	ctx, st := withReqState(ctx)
	st.assertionAlg = h.Alg
	c, err := m.f.DefaultClientAuthenticationStrategy(ctx, r, form)
	st.assertionAlg = ""
	if err != nil {
		return nil, authErr(err)
	}
	return c, nil
}

// clientAssertionType is the RFC 7523 §2.2 client_assertion_type.
const clientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// typClientAuthentication is the explicit type of client assertions
// (draft-ietf-oauth-rfc7523bis §3.2).
const typClientAuthentication = "client-authentication+jwt"

// clientAssertionTyp reports whether a client assertion's JOSE typ is
// acceptable: client-authentication+jwt (with or without the "application/"
// prefix, compared case-insensitively, RFC 7515 §4.1.9), or no explicit
// type at all. rfc7523bis makes rejecting untyped assertions NOT
// RECOMMENDED; "JWT" (RFC 7519 §5.1) says only that the object is a JWT, the
// default of many libraries, and counts as untyped. Any other type names
// another kind of JWT (an access token, an ID-JAG, a DPoP proof), which must
// not authenticate a client.
func clientAssertionTyp(typ string) bool {
	t := mediaType(typ)
	return t == "" || t == "jwt" || t == typClientAuthentication
}

// mediaType is a JOSE typ value in the form it is compared in: lower case,
// without the "application/" prefix RFC 7515 §4.1.9 lets senders omit.
func mediaType(typ string) string {
	return strings.TrimPrefix(strings.ToLower(typ), "application/")
}

// soleAudience returns the single value of an aud claim given as a string
// or as an array of exactly one string (RFC 7519 §4.1.3).
func soleAudience(raw json.RawMessage) (string, bool) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one, one != ""
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) == 1 && many[0] != "" {
		return many[0], true
	}
	return "", false
}

// assertionAudiences are the aud values a client assertion may carry as its
// sole value: the issuer identifier, also with one trailing slash (some
// clients normalise URLs so; the MCP conformance suite accepts both), and
// the token endpoint URL only when legacy is set
// (draft-ietf-oauth-rfc7523bis §3: the token endpoint URL "MUST NOT be used
// as an audience value").
func assertionAudiences(issuer, tokenURL string, legacy bool) []string {
	out := []string{issuer, issuer + "/"}
	if legacy {
		out = append(out, tokenURL)
	}
	return out
}

// maxAssertionLifetime bounds how far in the future a client assertion's exp
// may lie, which also bounds how long its jti is remembered.
const maxAssertionLifetime = 10 * time.Minute

// authErr maps a client lookup or verification failure to invalid_client,
// except an unreachable store (temporarily_unavailable) and a malformed
// request (invalid_request).
func authErr(err error) error {
	var rfc *fosite.RFC6749Error
	switch {
	case errors.Is(err, storage.ErrUnavailable) || errors.Is(err, fosite.ErrTemporarilyUnavailable):
		return fosite.ErrTemporarilyUnavailable.WithWrap(err)
	case errors.Is(err, fosite.ErrNotFound):
		return fosite.ErrInvalidClient.WithHint("The client is unknown.").WithWrap(err)
	case errors.As(err, &rfc) && (rfc.ErrorField == fosite.ErrInvalidClient.ErrorField || rfc.ErrorField == fosite.ErrInvalidRequest.ErrorField):
		return err
	}
	return fosite.ErrInvalidClient.WithHint("Client authentication failed.").WithWrap(err)
}

// peekJWT splits a compact JWS and decodes header and payload without
// verifying anything.
func peekJWT(s string) (header, payload []byte, ok bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return nil, nil, false
	}
	h, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	p, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	if err1 != nil || err2 != nil {
		return nil, nil, false
	}
	return h, p, true
}

// secretHasher is fosite's Hasher on internal/secret: a keyed SHA-256 (the
// secrets are generated, high-entropy values), compared in constant time.
type secretHasher struct{ h *secret.Hasher }

var _ fosite.Hasher = secretHasher{}

func (s secretHasher) Compare(_ context.Context, hash, data []byte) error {
	if !s.h.Equal(hash, string(data)) {
		return errors.New("as: secret does not match")
	}
	return nil
}

func (s secretHasher) Hash(_ context.Context, data []byte) ([]byte, error) {
	return s.h.Hash(string(data)), nil
}

// jwksFetcher fetches private_key_jwt jwks_uri documents with the injected
// SSRF-safe client, caching each for a few minutes.
type jwksFetcher struct {
	client *http.Client
	now    func() time.Time
	mu     sync.Mutex
	cache  map[string]jwksEntry
}

type jwksEntry struct {
	set *jose3.JSONWebKeySet
	at  time.Time
}

var _ fosite.JWKSFetcherStrategy = (*jwksFetcher)(nil)

const (
	jwksCacheTTL   = 5 * time.Minute
	jwksMaxBody    = 64 << 10
	jwksCacheLimit = 1024
)

// Resolve implements fosite.JWKSFetcherStrategy.
func (j *jwksFetcher) Resolve(ctx context.Context, location string, ignoreCache bool) (*jose3.JSONWebKeySet, error) {
	if j.client == nil {
		return nil, fosite.ErrInvalidClient.WithHint("This server does not fetch jwks_uri documents.")
	}
	j.mu.Lock()
	e, ok := j.cache[location]
	j.mu.Unlock()
	if ok && !ignoreCache && j.now().Sub(e.at) < jwksCacheTTL {
		return e.set, nil
	}
	body, _, err := safehttp.Fetch(ctx, j.client, location, "application/json, application/jwk-set+json", jwksMaxBody)
	var status *safehttp.StatusError
	switch {
	case errors.As(err, &status):
		return nil, fosite.ErrInvalidClient.WithHintf("The client's jwks_uri answered %d.", status.Code)
	case errors.Is(err, safehttp.ErrTooLarge):
		return nil, fosite.ErrInvalidClient.WithHint("The client's jwks_uri document is too large or unreadable.")
	case err != nil:
		return nil, fosite.ErrInvalidClient.WithHint("The client's jwks_uri could not be fetched.").WithWrap(err)
	}
	var set jose3.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fosite.ErrInvalidClient.WithHint("The client's jwks_uri document is not a JWK Set.")
	}
	sigUse(&set)
	j.mu.Lock()
	if len(j.cache) >= jwksCacheLimit {
		clear(j.cache)
	}
	j.cache[location] = jwksEntry{set: &set, at: j.now()}
	j.mu.Unlock()
	return &set, nil
}

// sigUse marks keys without "use" as signature keys: fosite only considers
// keys with use "sig", and many published sets omit the member.
func sigUse(set *jose3.JSONWebKeySet) *jose3.JSONWebKeySet {
	for i := range set.Keys {
		if set.Keys[i].Use == "" {
			set.Keys[i].Use = "sig"
		}
	}
	return set
}

// registeredDPoPBound reads dpop_bound_access_tokens (RFC 9449 §5.2) from
// the metadata a registered or CIMD client was accepted with.
func registeredDPoPBound(md []byte) bool {
	if len(md) == 0 {
		return false
	}
	var v struct {
		DPoP bool `json:"dpop_bound_access_tokens"`
	}
	_ = json.Unmarshal(md, &v)
	return v.DPoP
}
