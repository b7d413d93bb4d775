// Package upstream is the authorization server's OpenID Connect relying
// party: it signs people in through the organisation's provider (Okta,
// Microsoft Entra ID, Google Workspace, Keycloak, ...) with the
// authorization code flow and PKCE (OpenID Connect Core 1.0 §3.1, RFC 7636
// S256), and turns the verified ID token into an Identity: the person's
// subject, name, email and groups, whether the allow rules admit them, and
// the scopes their claims may be granted.
//
// What it does, in order:
//
//   - Discovery (OpenID Connect Discovery 1.0 §4): the provider's metadata
//     is read from {issuer}/.well-known/openid-configuration, whose issuer
//     must equal the configured one byte for byte (§4.3), and cached.
//   - Keys: the jwks_uri is fetched with a timeout and a size cap, cached,
//     and fetched again when a token names a kid the cache lacks, at most
//     once per KeyRefreshInterval, so tokens naming random kids cannot make
//     the server hammer the provider. A failed fetch keeps the keys it had.
//   - AuthCodeURL builds the authorization request with the caller's state,
//     nonce and PKCE verifier. It never carries what an OAuth client asked
//     of this server (its resource, scopes or state): those belong to our
//     own authorization request, not to the provider's.
//   - CheckResponseIssuer compares the authorization response's iss
//     parameter with the issuer (RFC 9207 §2.4), and refuses a response
//     without one when discovery says the provider sends it.
//   - Exchange redeems the code (client_secret_basic, client_secret_post or
//     private_key_jwt, RFC 7523 §2.2) and validates the ID token (Core
//     §3.1.3.7): an asymmetric signature by a key of the provider, iss, aud
//     holding our client_id, azp equal to it when present or when aud has
//     several values, exp and iat within the allowed clock skew, and the
//     nonce. Claims the ID token lacks are read from the userinfo endpoint
//     (Core §5.3), whose sub must match.
//   - Check applies allowed_domains (a verified email at one of the
//     domains) and allowed_groups; Scopes maps claim values to the scopes
//     the person may hold (MapScopes).
//
// Errors wrap one of the sentinels below, so the login pages can say what
// went wrong (the provider is down, the answer was not valid, the clocks
// differ, the person is not allowed) without showing internal text.
//
// Why not github.com/coreos/go-oidc: its remote key set fetches the JWKS
// again for every token with an unknown kid, with no bound on the rate, and
// reads discovery and key documents without a size cap; it folds the
// reasons a token fails into untyped errors, and the pages need to tell an
// expired token and a clock difference from a forged one. Validation here is
// a short list of checks on go-jose's verified payload, which the module
// already depends on.
package upstream

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/internal/safehttp"
)

// Sentinel errors; every error of this package wraps one of them.
var (
	// ErrUnavailable: the provider could not be reached or answered
	// something unusable (timeout, refused connection, 5xx, an oversized or
	// malformed document, discovery naming another issuer).
	ErrUnavailable = errors.New("upstream: provider unavailable")
	// ErrInvalidToken: the ID token is not valid for us (signature, iss,
	// aud, azp, nonce, subject).
	ErrInvalidToken = errors.New("upstream: invalid ID token")
	// ErrExpired: the ID token expired (beyond the allowed skew).
	ErrExpired = errors.New("upstream: ID token expired")
	// ErrClockSkew: the ID token was issued in the future by more than the
	// allowed skew: the clocks of the provider and this server differ.
	ErrClockSkew = errors.New("upstream: clock skew")
	// ErrRefused: the provider's token endpoint refused the code or the
	// refresh token (an OAuth error answer, RFC 6749 §5.2).
	ErrRefused = errors.New("upstream: provider refused the grant")
	// ErrDenied: the allow rules do not admit the person; the error is a
	// *DeniedError naming the rule.
	ErrDenied = errors.New("upstream: person not allowed")
	// ErrWrongIssuer: the authorization response names another issuer in
	// its iss parameter, or lacks one the provider promised (RFC 9207
	// §2.4): it may come from another provider (a mix-up attack).
	ErrWrongIssuer = errors.New("upstream: authorization response of another issuer")
)

// DeniedError says which allow rule refused the person.
type DeniedError struct {
	// Rule is "allowed_domains" or "allowed_groups".
	Rule string
}

func (e *DeniedError) Error() string { return "upstream: person not allowed by " + e.Rule }

// Is makes errors.Is(err, ErrDenied) true.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// Limits on what is read from a provider.
const (
	MaxDiscoveryBytes = 64 << 10
	MaxJWKSBytes      = 256 << 10
	MaxUserinfoBytes  = 64 << 10
	// MaxSubjectLen bounds the subject claim (OpenID Connect Core §2: sub
	// is at most 255 ASCII characters).
	MaxSubjectLen = 255
)

// Defaults of Config fields.
const (
	DefaultSkew               = 2 * time.Minute
	DefaultKeyRefreshInterval = 30 * time.Second
	DefaultKeyTTL             = time.Hour
	DefaultMetadataTTL        = time.Hour
	DefaultTimeout            = 10 * time.Second
)

// algs are the JWS algorithms an ID token may be signed with: asymmetric
// only, never none or HMAC with the client secret (RFC 8725 §3.1).
var algs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// Config configures one provider.
type Config struct {
	// ID is the provider's id in our configuration (upstreams[].id).
	ID string
	// Issuer is its issuer identifier, exactly as discovery reports it.
	Issuer string
	// ClientID and ClientSecret are our credentials at the provider; with
	// PrivateKey set instead, the token endpoint gets a signed assertion
	// (private_key_jwt) with KeyID as its kid and KeyAlg (RS256, ES256,
	// EdDSA) as its algorithm.
	ClientID, ClientSecret string
	PrivateKey             crypto.Signer
	KeyID, KeyAlg          string
	// AssertionAudience is the aud of the private_key_jwt assertion;
	// empty means the token endpoint URL.
	AssertionAudience string
	// RedirectURL is our callback, {issuer}/upstream/{id}/callback.
	RedirectURL string
	// Scopes asked of the provider; must hold openid.
	Scopes []string
	// SubjectClaim identifies the person (default "sub").
	SubjectClaim string
	// AllowedDomains and AllowedGroups are the allow rules (Check); empty
	// rules admit everyone.
	AllowedDomains, AllowedGroups []string
	// ClaimScopes maps claim name -> value -> scopes (Scopes, MapScopes).
	ClaimScopes map[string]map[string][]string
	// KeepClaims names more claims whose string values Identity.Claims
	// holds (the tenant claim of access tokens).
	KeepClaims []string
	// AuthParams are added to the authorization request.
	AuthParams map[string]string

	// HTTPClient fetches discovery, keys and userinfo and calls the token
	// endpoint. Nil: NewHTTPClient(DefaultTimeout). Bodies are capped
	// whatever the client.
	HTTPClient *http.Client
	// Skew is the clock difference tolerated on exp, iat and nbf; zero
	// means DefaultSkew.
	Skew time.Duration
	// KeyRefreshInterval is the least time between two key fetches caused
	// by unknown kids; zero means DefaultKeyRefreshInterval.
	KeyRefreshInterval time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Provider is one configured OpenID provider. It is safe for concurrent use.
type Provider struct {
	cfg Config

	mu         sync.Mutex
	meta       *metadata
	metaAt     time.Time
	metaTried  time.Time
	keys       *jose.JSONWebKeySet
	keysAt     time.Time
	keysTried  time.Time
	keysFetchN int
}

// metadata is the part of the discovery document used here.
type metadata struct {
	Issuer           string   `json:"issuer"`
	AuthEndpoint     string   `json:"authorization_endpoint"`
	TokenEndpoint    string   `json:"token_endpoint"`
	UserinfoEndpoint string   `json:"userinfo_endpoint"`
	JWKSURI          string   `json:"jwks_uri"`
	AuthMethods      []string `json:"token_endpoint_auth_methods_supported"`
	// IssParameter is authorization_response_iss_parameter_supported
	// (RFC 9207 §3).
	IssParameter bool `json:"authorization_response_iss_parameter_supported"`
}

// New checks cfg; it makes no request (discovery happens on first use, so a
// provider that is down does not stop the server from starting).
func New(cfg Config) (*Provider, error) {
	if cfg.ID == "" || cfg.Issuer == "" || cfg.ClientID == "" || cfg.RedirectURL == "" {
		return nil, errors.New("upstream: ID, Issuer, ClientID and RedirectURL are required")
	}
	if !slices.Contains(cfg.Scopes, "openid") {
		return nil, errors.New("upstream: Scopes must include openid")
	}
	if cfg.PrivateKey != nil && cfg.ClientSecret != "" {
		return nil, errors.New("upstream: set ClientSecret or PrivateKey, not both")
	}
	if cfg.PrivateKey != nil && !slices.Contains([]string{"RS256", "ES256", "EdDSA"}, cfg.KeyAlg) {
		return nil, fmt.Errorf("upstream: KeyAlg %q is not RS256, ES256 or EdDSA", cfg.KeyAlg)
	}
	if cfg.SubjectClaim == "" {
		cfg.SubjectClaim = "sub"
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = NewHTTPClient(DefaultTimeout)
	}
	if cfg.Skew <= 0 {
		cfg.Skew = DefaultSkew
	}
	if cfg.KeyRefreshInterval <= 0 {
		cfg.KeyRefreshInterval = DefaultKeyRefreshInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Provider{cfg: cfg}, nil
}

// ID returns the provider's configured id.
func (p *Provider) ID() string { return p.cfg.ID }

// NewHTTPClient returns the client used for a provider by default: the
// given total timeout (and shorter connect, TLS and header timeouts), no
// redirects followed, no cookies. The provider is the operator's choice, so
// private addresses are allowed (a Keycloak on the internal network) and
// the environment's proxy settings apply.
func NewHTTPClient(timeout time.Duration) *http.Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           newDialer(timeout).DialContext,
			TLSHandshakeTimeout:   min(timeout, 5*time.Second),
			ResponseHeaderTimeout: timeout,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// newDialer is the connection dialer of NewHTTPClient: the connect timeout
// is timeout, at most 5 seconds.
func newDialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: min(timeout, 5*time.Second)}
}

// NewVerifier returns a random PKCE code verifier (RFC 7636 §4.1, 43
// characters).
func NewVerifier() string { return oauth2.GenerateVerifier() }

// RandomToken returns 32 random bytes, base64url: a state or nonce value.
func RandomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("upstream: crypto/rand failed: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// AuthCodeURL returns the provider's authorization URL for state, nonce and
// the PKCE verifier (sent as its S256 challenge).
// params are further name, value pairs (max_age 0 to have the person sign
// in again, OpenID Connect Core §3.1.2.1); they replace configured
// AuthParams of the same name.
func (p *Provider) AuthCodeURL(ctx context.Context, state, nonce, verifier string, params ...string) (string, error) {
	m, err := p.metadata(ctx)
	if err != nil {
		return "", err
	}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("nonce", nonce)}
	for _, k := range sortedKeys(p.cfg.AuthParams) {
		opts = append(opts, oauth2.SetAuthURLParam(k, p.cfg.AuthParams[k]))
	}
	for i := 0; i+1 < len(params); i += 2 {
		opts = append(opts, oauth2.SetAuthURLParam(params[i], params[i+1]))
	}
	return p.oauth2Config(m).AuthCodeURL(state, opts...), nil
}

// CheckResponseIssuer applies RFC 9207 §2.4 to the iss parameter of an
// authorization response (success or error; "" when absent): present, it
// must equal the issuer byte for byte; absent, the provider must not have
// said in discovery (authorization_response_iss_parameter_supported) that
// it sends one. Call it before redeeming the code. A mismatch wraps
// ErrWrongIssuer; a discovery failure, ErrUnavailable.
func (p *Provider) CheckResponseIssuer(ctx context.Context, iss string) error {
	if iss != "" {
		if iss != p.cfg.Issuer {
			return fmt.Errorf("%w: iss %q is not %q", ErrWrongIssuer, iss, p.cfg.Issuer)
		}
		return nil
	}
	m, err := p.metadata(ctx)
	if err != nil {
		return err
	}
	if m.IssParameter {
		return fmt.Errorf("%w: no iss, which the provider's discovery promises", ErrWrongIssuer)
	}
	return nil
}

// Identity is what a verified sign-in says of the person.
type Identity struct {
	// Subject is the value of the subject claim (Config.SubjectClaim).
	Subject       string
	Name, Email   string
	EmailVerified bool
	Groups        []string
	// Claims holds the string values of the claims ClaimScopes and
	// KeepClaims name and of groups, for the scope mapping and the user
	// record.
	Claims map[string][]string
	// AuthTime is when the person last authenticated at the provider (the
	// ID token's auth_time); zero when it does not say.
	AuthTime time.Time
	// RefreshToken is the provider's refresh token, "" when it gave none.
	// Keep it server-side and sealed; it never goes to a client.
	RefreshToken string
}

// Exchange redeems code with the PKCE verifier and returns the identity in
// the validated ID token, whose nonce must be nonce.
func (p *Provider) Exchange(ctx context.Context, code, verifier, nonce string) (*Identity, error) {
	if nonce == "" {
		return nil, fmt.Errorf("%w: no nonce to compare", ErrInvalidToken)
	}
	m, err := p.metadata(ctx)
	if err != nil {
		return nil, err
	}
	opts := append(p.clientAuth(m), oauth2.VerifierOption(verifier))
	tok, err := p.oauth2Config(m).Exchange(p.clientCtx(ctx), code, opts...)
	if err != nil {
		return nil, tokenError(err)
	}
	return p.identity(ctx, m, tok, nonce, "")
}

// Refresh uses the provider's refresh token and returns the identity its
// answer confirms: the claims of a new ID token when the provider sends
// one, or else those of the userinfo endpoint, whose sub must be subject
// (the Identity.Subject of the sign-in). RefreshToken is the rotated one,
// or the one given when the provider keeps it.
func (p *Provider) Refresh(ctx context.Context, refreshToken, subject string) (*Identity, error) {
	m, err := p.metadata(ctx)
	if err != nil {
		return nil, err
	}
	if p.cfg.PrivateKey != nil {
		// oauth2's token source has no way to add the assertion; refresh
		// by hand with the same parameters.
		tok, err := p.refreshWithAssertion(ctx, m, refreshToken)
		if err != nil {
			return nil, err
		}
		return p.refreshed(ctx, m, tok, refreshToken, subject)
	}
	tok, err := p.oauth2Config(m).TokenSource(p.clientCtx(ctx), &oauth2.Token{RefreshToken: refreshToken}).Token()
	if err != nil {
		return nil, tokenError(err)
	}
	return p.refreshed(ctx, m, tok, refreshToken, subject)
}

func (p *Provider) refreshed(ctx context.Context, m *metadata, tok *oauth2.Token, old, subject string) (*Identity, error) {
	id, err := p.identity(ctx, m, tok, "", subject)
	if err != nil {
		return nil, err
	}
	if id.RefreshToken == "" {
		id.RefreshToken = old
	}
	return id, nil
}

// identity validates what the token endpoint returned. With nonce set (a
// sign-in) an ID token is required and its nonce checked; on refresh
// (subject set) an ID token is optional (Core §12.2) and must name the same
// person, and without one the userinfo endpoint must.
func (p *Provider) identity(ctx context.Context, m *metadata, tok *oauth2.Token, nonce, subject string) (*Identity, error) {
	raw, _ := tok.Extra("id_token").(string)
	var claims map[string]any
	if raw == "" {
		if nonce != "" || m.UserinfoEndpoint == "" {
			return nil, fmt.Errorf("%w: the token response has no id_token", ErrInvalidToken)
		}
		claims = map[string]any{}
	} else {
		var err error
		if claims, err = p.VerifyIDToken(ctx, raw, nonce); err != nil {
			return nil, err
		}
	}
	if p.needsUserinfo(claims) && m.UserinfoEndpoint != "" && tok.AccessToken != "" {
		info, err := p.userinfo(ctx, m, tok.AccessToken)
		if err != nil && raw == "" {
			return nil, err
		}
		// After a failed read (info nil) or an answer with no claims, the
		// verified ID token stands on its own; the allow rules refuse the
		// person if a claim they need is missing. An answer with claims
		// must name the ID token's subject (Core §5.3.2).
		if s, _ := claims["sub"].(string); len(info) > 0 && s != "" && info["sub"] != s {
			return nil, fmt.Errorf("%w: userinfo sub differs from the ID token's", ErrInvalidToken)
		}
		for k, v := range info {
			if _, ok := claims[k]; !ok {
				claims[k] = v
			}
		}
	}
	id, err := p.fromClaims(claims)
	if err != nil {
		return nil, err
	}
	if subject != "" && id.Subject != subject {
		return nil, fmt.Errorf("%w: the refreshed identity is another person", ErrInvalidToken)
	}
	id.RefreshToken = tok.RefreshToken
	return id, nil
}

// needsUserinfo reports whether claims lack one the rules or the mapping
// read (email, groups, a mapped claim, the subject claim).
func (p *Provider) needsUserinfo(claims map[string]any) bool {
	want := []string{"email", p.cfg.SubjectClaim}
	if len(p.cfg.AllowedGroups) > 0 || slices.Contains(p.cfg.Scopes, "groups") {
		want = append(want, "groups")
	}
	for name := range p.cfg.ClaimScopes {
		want = append(want, name)
	}
	want = append(want, p.cfg.KeepClaims...)
	for _, k := range want {
		if _, ok := claims[k]; !ok {
			return true
		}
	}
	return false
}

// VerifyIDToken checks raw as an ID token of this provider for us (OpenID
// Connect Core §3.1.3.7) and returns its claims. With nonce "" the nonce is
// not compared (a refresh, Core §12.2); otherwise it must match exactly.
func (p *Provider) VerifyIDToken(ctx context.Context, raw, nonce string) (map[string]any, error) {
	jws, err := jose.ParseSigned(raw, algs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if len(jws.Signatures) != 1 {
		return nil, fmt.Errorf("%w: not exactly one signature", ErrInvalidToken)
	}
	h := jws.Signatures[0].Protected
	keys, err := p.keysFor(ctx, h.KeyID, h.Algorithm)
	if err != nil {
		return nil, err
	}
	var payload []byte
	for _, k := range keys {
		if payload, err = jws.Verify(k.Key); err == nil {
			break
		}
	}
	if payload == nil {
		return nil, fmt.Errorf("%w: no key of the provider verifies the signature (kid %q)", ErrInvalidToken, h.KeyID)
	}
	var claims map[string]any
	dec := json.NewDecoder(strings.NewReader(string(payload)))
	dec.UseNumber()
	if err := dec.Decode(&claims); err != nil {
		return nil, fmt.Errorf("%w: payload is not a JSON object", ErrInvalidToken)
	}
	if err := p.checkClaims(claims, nonce); err != nil {
		return nil, err
	}
	return claims, nil
}

// googleIssuer is Google's issuer identifier. Google documents the iss of
// its ID tokens as "https://accounts.google.com" or "accounts.google.com".
const googleIssuer = "https://accounts.google.com"

// idTokenIssuerMatches reports whether an ID token's iss is the provider's
// issuer (Core §3.1.3.7 item 2): equal byte for byte, and for Google's
// issuer exactly, also its scheme-less form, which Google documents its ID
// tokens may carry (as coreos/go-oidc accepts). Discovery's issuer and the
// authorization response's iss parameter are compared exactly, for Google
// too.
func idTokenIssuerMatches(configured, iss string) bool {
	return iss == configured || configured == googleIssuer && iss == strings.TrimPrefix(googleIssuer, "https://")
}

// checkClaims runs the claim checks of Core §3.1.3.7 items 2-5 and 9-11.
func (p *Provider) checkClaims(c map[string]any, nonce string) error {
	if iss, _ := c["iss"].(string); !idTokenIssuerMatches(p.cfg.Issuer, iss) {
		return fmt.Errorf("%w: iss %q is not %q", ErrInvalidToken, iss, p.cfg.Issuer)
	}
	var aud []string
	switch a := c["aud"].(type) {
	case string:
		aud = []string{a}
	case []any:
		for _, v := range a {
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("%w: aud holds a non-string", ErrInvalidToken)
			}
			aud = append(aud, s)
		}
	}
	if !slices.Contains(aud, p.cfg.ClientID) {
		return fmt.Errorf("%w: aud %q does not hold our client_id", ErrInvalidToken, aud)
	}
	azp, hasAzp := c["azp"].(string)
	if len(aud) > 1 && !hasAzp {
		return fmt.Errorf("%w: several audiences and no azp", ErrInvalidToken)
	}
	if _, present := c["azp"]; present && azp != p.cfg.ClientID {
		return fmt.Errorf("%w: azp %q is not our client_id", ErrInvalidToken, azp)
	}
	now := p.cfg.Now()
	exp, ok := numericDate(c["exp"])
	if !ok {
		return fmt.Errorf("%w: no exp", ErrInvalidToken)
	}
	iat, ok := numericDate(c["iat"])
	if !ok {
		return fmt.Errorf("%w: no iat", ErrInvalidToken)
	}
	if iat.After(now.Add(p.cfg.Skew)) {
		return fmt.Errorf("%w: iat %s is %s ahead of this server's clock", ErrClockSkew, iat.UTC().Format(time.RFC3339), iat.Sub(now).Round(time.Second))
	}
	if nbf, ok := numericDate(c["nbf"]); ok && nbf.After(now.Add(p.cfg.Skew)) {
		return fmt.Errorf("%w: nbf %s is ahead of this server's clock", ErrClockSkew, nbf.UTC().Format(time.RFC3339))
	}
	if !now.Before(exp.Add(p.cfg.Skew)) {
		return fmt.Errorf("%w: exp %s", ErrExpired, exp.UTC().Format(time.RFC3339))
	}
	if nonce != "" {
		got, _ := c["nonce"].(string)
		if subtle.ConstantTimeCompare([]byte(got), []byte(nonce)) != 1 {
			return fmt.Errorf("%w: nonce does not match", ErrInvalidToken)
		}
	}
	if s, _ := c["sub"].(string); s == "" {
		return fmt.Errorf("%w: no sub", ErrInvalidToken)
	}
	return nil
}

// numericDate reads a JSON number of seconds (RFC 7519 §2).
func numericDate(v any) (time.Time, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return time.Time{}, false
	}
	f, err := n.Float64()
	if err != nil || f < 0 || f > 1<<40 {
		return time.Time{}, false
	}
	return time.Unix(int64(f), 0), true
}

// fromClaims builds the Identity from verified claims.
func (p *Provider) fromClaims(c map[string]any) (*Identity, error) {
	sub, _ := c[p.cfg.SubjectClaim].(string)
	if sub == "" || len(sub) > MaxSubjectLen || strings.ContainsFunc(sub, func(r rune) bool { return r < ' ' || r > '~' }) {
		return nil, fmt.Errorf("%w: subject claim %q missing, longer than %d or not printable ASCII", ErrInvalidToken, p.cfg.SubjectClaim, MaxSubjectLen)
	}
	id := &Identity{Subject: sub, Claims: map[string][]string{}}
	id.Email, _ = c["email"].(string)
	switch v := c["email_verified"].(type) {
	case bool:
		id.EmailVerified = v
	case string: // some providers (Amazon Cognito) send a string
		id.EmailVerified = v == "true"
	}
	id.Name, _ = c["name"].(string)
	if id.Name == "" {
		id.Name, _ = c["preferred_username"].(string)
	}
	if at, ok := numericDate(c["auth_time"]); ok {
		id.AuthTime = at
	}
	id.Groups = stringValues(c["groups"])
	if len(id.Groups) > 0 {
		id.Claims["groups"] = id.Groups
	}
	for name := range p.cfg.ClaimScopes {
		if vs := stringValues(c[name]); len(vs) > 0 {
			id.Claims[name] = vs
		}
	}
	for _, name := range p.cfg.KeepClaims {
		if vs := stringValues(c[name]); len(vs) > 0 {
			id.Claims[name] = vs
		}
	}
	return id, nil
}

// stringValues reads a claim as a list of strings: a string, a boolean or a
// number is one value, an array its string, boolean and number members.
// Claims are decoded with UseNumber, so a number is a json.Number.
func stringValues(v any) []string {
	one := func(x any) (string, bool) {
		switch x := x.(type) {
		case string:
			return x, true
		case bool:
			return strconv.FormatBool(x), true
		case json.Number:
			return x.String(), true
		}
		return "", false
	}
	if a, ok := v.([]any); ok {
		var out []string
		for _, x := range a {
			if s, ok := one(x); ok && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out
	}
	if s, ok := one(v); ok {
		return []string{s}
	}
	return nil
}

// Check applies the allow rules to id: a verified email at one of
// AllowedDomains, and one of AllowedGroups among its groups. It returns a
// *DeniedError naming the first rule that refuses.
func (p *Provider) Check(id *Identity) error {
	if len(p.cfg.AllowedDomains) > 0 {
		_, domain, ok := strings.Cut(id.Email, "@")
		domain = strings.ToLower(domain)
		if !ok || !id.EmailVerified || strings.Contains(domain, "@") || !slices.Contains(p.cfg.AllowedDomains, domain) {
			return &DeniedError{Rule: "allowed_domains"}
		}
	}
	if len(p.cfg.AllowedGroups) > 0 && !slices.ContainsFunc(id.Groups, func(g string) bool { return slices.Contains(p.cfg.AllowedGroups, g) }) {
		return &DeniedError{Rule: "allowed_groups"}
	}
	return nil
}

// Capped reports whether claim_scopes is configured, so that Scopes caps
// what this provider's people may be granted.
func (p *Provider) Capped() bool { return len(p.cfg.ClaimScopes) > 0 }

// Scopes returns the scopes a person with these claims may be granted
// (MapScopes with this provider's claim_scopes).
func (p *Provider) Scopes(claims map[string][]string) []string {
	return MapScopes(p.cfg.ClaimScopes, claims)
}

// MapScopes returns, sorted and without duplicates, every scope that
// mapping (claim name -> claim value -> scopes) gives to one of the values
// claims holds. Values are compared exactly.
func MapScopes(mapping map[string]map[string][]string, claims map[string][]string) []string {
	var out []string
	for name, values := range mapping {
		for _, v := range claims[name] {
			out = append(out, values[v]...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// oauth2Config is the golang.org/x/oauth2 view of the provider.
func (p *Provider) oauth2Config(m *metadata) *oauth2.Config {
	style := oauth2.AuthStyleInHeader
	// client_secret_post only when the provider lists it and not
	// client_secret_basic (RFC 8414 §2: basic is the default when it lists
	// none).
	if p.cfg.PrivateKey != nil || (!slices.Contains(m.AuthMethods, "client_secret_basic") && slices.Contains(m.AuthMethods, "client_secret_post")) {
		style = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{
		ClientID:     p.cfg.ClientID,
		ClientSecret: p.cfg.ClientSecret,
		Endpoint:     oauth2.Endpoint{AuthURL: m.AuthEndpoint, TokenURL: m.TokenEndpoint, AuthStyle: style},
		RedirectURL:  p.cfg.RedirectURL,
		Scopes:       p.cfg.Scopes,
	}
}

func (p *Provider) clientCtx(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, p.cfg.HTTPClient)
}

// clientAuth returns the private_key_jwt parameters (RFC 7523 §2.2), or
// nothing with a client secret.
func (p *Provider) clientAuth(m *metadata) []oauth2.AuthCodeOption {
	if p.cfg.PrivateKey == nil {
		return nil
	}
	a, err := p.assertion(p.assertionAudience(m))
	if err != nil {
		// An unusable key was refused by New; signing cannot fail here
		// short of crypto/rand failing.
		return nil
	}
	return []oauth2.AuthCodeOption{
		oauth2.SetAuthURLParam("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
		oauth2.SetAuthURLParam("client_assertion", a),
	}
}

func (p *Provider) assertionAudience(m *metadata) string {
	if p.cfg.AssertionAudience != "" {
		return p.cfg.AssertionAudience
	}
	return m.TokenEndpoint
}

// assertion signs a client assertion for the token endpoint aud (RFC 7523
// §3: iss and sub our client_id, a jti, a short exp).
func (p *Provider) assertion(aud string) (string, error) {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(p.cfg.KeyAlg), Key: p.cfg.PrivateKey},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), p.cfg.KeyID))
	if err != nil {
		return "", err
	}
	now := p.cfg.Now()
	return jwt.Signed(sig).Claims(jwt.Claims{
		Issuer: p.cfg.ClientID, Subject: p.cfg.ClientID, Audience: jwt.Audience{aud},
		ID: RandomToken(), IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Minute)),
	}).Serialize()
}

// refreshWithAssertion is the refresh_token grant (RFC 6749 §6) with a
// client assertion.
func (p *Provider) refreshWithAssertion(ctx context.Context, m *metadata, refreshToken string) (*oauth2.Token, error) {
	a, err := p.assertion(p.assertionAudience(m))
	if err != nil {
		return nil, fmt.Errorf("%w: signing the client assertion: %v", ErrUnavailable, err)
	}
	form := url.Values{
		"grant_type":            {"refresh_token"},
		"refresh_token":         {refreshToken},
		"client_id":             {p.cfg.ClientID},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
		"client_assertion":      {a},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := p.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	body, err := safehttp.ReadLimited(resp.Body, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	var tr struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
		IDToken      string `json:"id_token"`
		Error        string `json:"error"`
	}
	if err := json.Unmarshal(body, &tr); err != nil {
		return nil, fmt.Errorf("%w: token response is not JSON (HTTP %d)", ErrUnavailable, resp.StatusCode)
	}
	if tr.Error != "" || resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusUnauthorized {
		return nil, fmt.Errorf("%w: %s (HTTP %d)", ErrRefused, tr.Error, resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: token endpoint answered HTTP %d", ErrUnavailable, resp.StatusCode)
	}
	tok := &oauth2.Token{AccessToken: tr.AccessToken, RefreshToken: tr.RefreshToken}
	return tok.WithExtra(map[string]any{"id_token": tr.IDToken}), nil
}

// tokenError classifies an error of the oauth2 package: an OAuth error
// answer is the provider refusing; anything else is the provider being
// unusable.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && (re.ErrorCode != "" || re.Response.StatusCode == http.StatusBadRequest || re.Response.StatusCode == http.StatusUnauthorized) {
		return fmt.Errorf("%w: %s (HTTP %d)", ErrRefused, re.ErrorCode, re.Response.StatusCode)
	}
	return fmt.Errorf("%w: token endpoint: %v", ErrUnavailable, err)
}

// metadata returns the cached discovery document, reading it when absent
// or older than DefaultMetadataTTL; a failed read is retried at most once
// per KeyRefreshInterval while the cached document (if any) stays in use.
func (p *Provider) metadata(ctx context.Context) (*metadata, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	if p.meta != nil && now.Sub(p.metaAt) < DefaultMetadataTTL {
		return p.meta, nil
	}
	if !p.metaTried.IsZero() && now.Sub(p.metaTried) < p.cfg.KeyRefreshInterval {
		if p.meta != nil {
			return p.meta, nil
		}
		return nil, fmt.Errorf("%w: discovery failed recently; not retried yet", ErrUnavailable)
	}
	p.metaTried = now
	m, err := p.discover(ctx)
	if err != nil {
		if p.meta != nil {
			return p.meta, nil
		}
		return nil, err
	}
	p.meta, p.metaAt = m, now
	return m, nil
}

func (p *Provider) discover(ctx context.Context) (*metadata, error) {
	u := strings.TrimSuffix(p.cfg.Issuer, "/") + "/.well-known/openid-configuration"
	body, _, err := safehttp.Fetch(ctx, p.cfg.HTTPClient, u, "application/json", MaxDiscoveryBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: discovery: %w", ErrUnavailable, err)
	}
	var m metadata
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("%w: discovery document is not JSON", ErrUnavailable)
	}
	if m.Issuer != p.cfg.Issuer {
		return nil, fmt.Errorf("%w: discovery names issuer %q, not %q", ErrUnavailable, m.Issuer, p.cfg.Issuer)
	}
	for name, e := range map[string]string{"authorization_endpoint": m.AuthEndpoint, "token_endpoint": m.TokenEndpoint, "jwks_uri": m.JWKSURI} {
		if err := p.checkEndpoint(e); err != nil {
			return nil, fmt.Errorf("%w: discovery %s: %v", ErrUnavailable, name, err)
		}
	}
	if m.UserinfoEndpoint != "" && p.checkEndpoint(m.UserinfoEndpoint) != nil {
		m.UserinfoEndpoint = ""
	}
	return &m, nil
}

// checkEndpoint accepts https URLs, and http ones when the issuer itself is
// plain http (a loopback provider for development).
func (p *Provider) checkEndpoint(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("not an absolute URL: %q", raw)
	}
	if u.Scheme == "https" || (u.Scheme == "http" && strings.HasPrefix(p.cfg.Issuer, "http://")) {
		return nil
	}
	return fmt.Errorf("not https: %q", raw)
}

// keysFor returns the provider's keys that may have signed a token with
// this kid and alg, fetching the key set when there is none, when it is
// older than DefaultKeyTTL, or (at most once per KeyRefreshInterval) when
// no cached key has the kid.
func (p *Provider) keysFor(ctx context.Context, kid, alg string) ([]jose.JSONWebKey, error) {
	m, err := p.metadata(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	found := p.matching(kid, alg)
	stale := p.keys == nil || now.Sub(p.keysAt) >= DefaultKeyTTL
	if (stale || len(found) == 0) && (p.keysTried.IsZero() || now.Sub(p.keysTried) >= p.cfg.KeyRefreshInterval) {
		p.keysTried = now
		set, err := p.fetchKeys(ctx, m.JWKSURI)
		switch {
		case err == nil:
			p.keys, p.keysAt = set, now
			p.keysFetchN++
			found = p.matching(kid, alg)
		case p.keys == nil:
			return nil, err
		}
	}
	if p.keys == nil {
		return nil, fmt.Errorf("%w: no keys fetched yet; not retried yet", ErrUnavailable)
	}
	return found, nil
}

// KeyFetches reports how many times the key set was fetched successfully
// (for tests of the refresh rate limit).
func (p *Provider) KeyFetches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keysFetchN
}

// matching returns the cached keys for kid (all of them when kid is empty)
// usable with alg. Call with p.mu held.
func (p *Provider) matching(kid, alg string) []jose.JSONWebKey {
	if p.keys == nil {
		return nil
	}
	var out []jose.JSONWebKey
	for _, k := range p.keys.Keys {
		if (kid == "" || k.KeyID == kid) && (k.Algorithm == "" || k.Algorithm == alg) && (k.Use == "" || k.Use == "sig") {
			out = append(out, k)
		}
	}
	return out
}

func (p *Provider) fetchKeys(ctx context.Context, uri string) (*jose.JSONWebKeySet, error) {
	body, _, err := safehttp.Fetch(ctx, p.cfg.HTTPClient, uri, "application/json", MaxJWKSBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: jwks_uri: %w", ErrUnavailable, err)
	}
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("%w: jwks_uri: not a JWK Set", ErrUnavailable)
	}
	set := &jose.JSONWebKeySet{}
	for _, r := range raw.Keys {
		var k jose.JSONWebKey
		// Keys of types go-jose does not know are skipped, as RFC 7517
		// §5 asks, rather than failing the whole set.
		if err := k.UnmarshalJSON(r); err != nil || !k.IsPublic() || !k.Valid() {
			continue
		}
		set.Keys = append(set.Keys, k)
	}
	if len(set.Keys) == 0 {
		return nil, fmt.Errorf("%w: jwks_uri: no usable public keys", ErrUnavailable)
	}
	return set, nil
}

// userinfo reads the userinfo endpoint with the access token (Core §5.3).
// A JWT answer (application/jwt) is not read; only the JSON form is.
func (p *Provider) userinfo(ctx context.Context, m *metadata, accessToken string) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.UserinfoEndpoint, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: userinfo: %v", ErrUnavailable, err)
	}
	req.Header.Set("Authorization", "Bearer "+accessToken)
	req.Header.Set("Accept", "application/json")
	resp, err := p.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: userinfo: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("%w: userinfo answered HTTP %d", ErrRefused, resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("%w: userinfo answered HTTP %d", ErrUnavailable, resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/jwt") {
		return map[string]any{}, nil
	}
	body, err := safehttp.ReadLimited(resp.Body, MaxUserinfoBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: userinfo: %v", ErrUnavailable, err)
	}
	var info map[string]any
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	if err := dec.Decode(&info); err != nil {
		return nil, fmt.Errorf("%w: userinfo is not a JSON object", ErrUnavailable)
	}
	return info, nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
