package rsmiddleware

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpauth/mcpauth/metadata"
)

// Errors returned by verifiers; compare with errors.Is. The wrapped text
// explains the cause for logs; it is never sent to the client.
var (
	// ErrInvalidToken: the token is malformed, forged, expired, or not
	// meant for this resource (RFC 6750 §3.1 invalid_token).
	ErrInvalidToken = errors.New("rsmiddleware: invalid token")
	// ErrUnavailable: the authorization server could not be reached and no
	// cached key (or introspection answer) can decide.
	ErrUnavailable = errors.New("rsmiddleware: authorization server unavailable")
)

// TokenVerifier checks a bearer access token and returns its principal.
// Errors wrap ErrInvalidToken or ErrUnavailable. *Verifier implements it.
type TokenVerifier interface {
	Verify(ctx context.Context, token string) (*Principal, error)
}

// ClientCredentials authenticate the resource server to the AS
// (client_secret_basic, RFC 6749 §2.3.1).
type ClientCredentials struct {
	ClientID     string
	ClientSecret string
}

// Config configures a Verifier. Issuer and Resource are required.
type Config struct {
	// Issuer is the AS issuer identifier, compared byte for byte with the
	// metadata's "issuer" and the tokens' "iss" (RFC 8414 §3.3, RFC 9068 §4).
	Issuer string
	// Resource is this server's resource URI; tokens must carry it (in its
	// canonical form, metadata.CanonicalResource) in "aud" (RFC 8707, RFC 9068 §4).
	Resource string
	// Algorithms is the JWS algorithm allowlist (RFC 8725 §3.1). Zero value:
	// ES256, RS256, EdDSA. "none" and HMAC algorithms are refused.
	Algorithms []string
	// HTTPClient fetches the AS metadata, JWKS and introspection answers.
	// Zero value: a client with a 10 s timeout. Redirects are never followed.
	HTTPClient *http.Client
	// TracerProvider records a client span per request of HTTPClient (AS
	// metadata, JWKS, introspection, status list) under the span of the
	// request that caused it, its W3C traceparent sent to the AS. Nil: the
	// global provider (otel.GetTracerProvider), which records nothing until
	// a program sets one.
	TracerProvider trace.TracerProvider
	// ClockSkew tolerated on exp, nbf and iat. Zero value: 30 s.
	ClockSkew time.Duration
	// CacheSize bounds the cache of verified tokens (kept until they expire).
	// Zero value: 10000. Negative: no cache.
	CacheSize int
	// RefreshInterval is the minimum time between two JWKS fetches caused by
	// an unknown kid (rate limit). Zero value: 30 s.
	RefreshInterval time.Duration
	// KeysMaxAge: keys older than this are refreshed in the background; the
	// old keys stay in use until a fetch succeeds. Zero value: 1 h.
	KeysMaxAge time.Duration
	// Introspection, when set, switches to RFC 7662 mode: every token (JWT or
	// not) is sent to the AS's introspection_endpoint, authenticated with
	// these credentials, and nothing is cached, so revocation is immediate.
	Introspection *ClientCredentials
	// StatusMaxAge bounds how stale the Token Status List
	// (draft-ietf-oauth-status-list) may be when it decides that a token
	// with a status claim is not revoked: a list older than this (or than
	// its own ttl claim) is fetched again before use. A revoked token is
	// therefore refused at most this long (plus the AS's own second of
	// caching) after its revocation. Zero value: DefaultStatusMaxAge (30 s).
	StatusMaxAge time.Duration
	// StatusFailAfter is how long a cached status list is still used while
	// the AS cannot be reached; after it, tokens with a status claim are
	// refused with ErrUnavailable (503) until a fetch succeeds. Zero value:
	// DefaultStatusFailAfter (10 min); never shorter than StatusMaxAge.
	StatusFailAfter time.Duration
	// IgnoreStatus turns status list checking off: tokens are then refused
	// only when they expire (or in introspection mode).
	IgnoreStatus bool
	// Now returns the current time. Zero value: time.Now.
	Now func() time.Time
	// Logger receives key refresh failures. Zero value: slog.Default().
	Logger *slog.Logger
}

// Verifier verifies RFC 9068 JWT access tokens (or introspects tokens, see
// Config.Introspection). It is safe for concurrent use.
type Verifier struct {
	issuer, resource string
	algs             []jose.SignatureAlgorithm
	client           *http.Client
	skew             time.Duration
	refreshEvery     time.Duration
	keysMaxAge       time.Duration
	introspect       *ClientCredentials
	now              func() time.Time
	log              *slog.Logger

	meta      atomic.Pointer[metadata.AuthorizationServerMetadata]
	keys      atomic.Pointer[keySet]
	refreshMu sync.Mutex // serialises metadata and JWKS fetches
	lastTry   time.Time  // guarded by refreshMu
	bgRunning atomic.Bool

	cache   *tokenCache
	headers headerCache

	statusMaxAge    time.Duration
	statusFailAfter time.Duration
	ignoreStatus    bool
	listsMu         sync.Mutex
	lists           map[string]*statusList
}

type keySet struct {
	byKID     map[string]*jose.JSONWebKey
	fetchedAt time.Time
}

var defaultAlgorithms = []string{"ES256", "RS256", "EdDSA"}

var allowedAlgorithms = map[string]bool{
	"ES256": true, "ES384": true, "ES512": true,
	"RS256": true, "RS384": true, "RS512": true,
	"PS256": true, "PS384": true, "PS512": true,
	"EdDSA": true,
}

// NewVerifier returns a Verifier for cfg. It does not contact the AS: the
// metadata and keys are fetched on first use, so the resource server can
// start while the AS is down.
func NewVerifier(cfg Config) (*Verifier, error) {
	if cfg.Issuer == "" {
		return nil, errors.New("rsmiddleware: Config.Issuer is required")
	}
	if _, err := metadata.DiscoveryURLs(cfg.Issuer); err != nil {
		return nil, fmt.Errorf("rsmiddleware: Config.Issuer: %w", err)
	}
	if cfg.Resource == "" {
		return nil, errors.New("rsmiddleware: Config.Resource is required")
	}
	res, err := metadata.CanonicalResource(cfg.Resource)
	if err != nil {
		return nil, fmt.Errorf("rsmiddleware: Config.Resource: %w", err)
	}
	names := cfg.Algorithms
	if len(names) == 0 {
		names = defaultAlgorithms
	}
	var algs []jose.SignatureAlgorithm
	for _, a := range names {
		if !allowedAlgorithms[a] {
			return nil, fmt.Errorf("rsmiddleware: algorithm %q is not allowed (asymmetric JWS algorithms only)", a)
		}
		algs = append(algs, jose.SignatureAlgorithm(a))
	}
	if cfg.Introspection != nil && (cfg.Introspection.ClientID == "" || cfg.Introspection.ClientSecret == "") {
		return nil, errors.New("rsmiddleware: Config.Introspection needs ClientID and ClientSecret")
	}
	v := &Verifier{
		issuer: cfg.Issuer, resource: res, algs: algs,
		client:       tracedClient(noRedirects(cfg.HTTPClient), newTraces(cfg.TracerProvider)),
		skew:         cfg.ClockSkew,
		refreshEvery: cfg.RefreshInterval,
		keysMaxAge:   cfg.KeysMaxAge,
		introspect:   cfg.Introspection,
		now:          cfg.Now,
		log:          cfg.Logger,
	}
	if v.skew == 0 {
		v.skew = 30 * time.Second
	}
	if v.refreshEvery == 0 {
		v.refreshEvery = 30 * time.Second
	}
	if v.keysMaxAge == 0 {
		v.keysMaxAge = time.Hour
	}
	if v.now == nil {
		v.now = time.Now
	}
	v.statusMaxAge, v.statusFailAfter, v.ignoreStatus = cfg.StatusMaxAge, cfg.StatusFailAfter, cfg.IgnoreStatus
	if v.statusMaxAge <= 0 {
		v.statusMaxAge = DefaultStatusMaxAge
	}
	if v.statusFailAfter <= 0 {
		v.statusFailAfter = DefaultStatusFailAfter
	}
	v.statusFailAfter = max(v.statusFailAfter, v.statusMaxAge)
	v.lists = map[string]*statusList{}
	if v.log == nil {
		v.log = slog.Default()
	}
	size := cfg.CacheSize
	if size == 0 {
		size = 10000
	}
	if size > 0 && cfg.Introspection == nil {
		v.cache = newTokenCache(size)
	}
	return v, nil
}

// Resource returns the canonical resource URI the verifier accepts.
func (v *Verifier) Resource() string { return v.resource }

// Issuer returns the configured issuer.
func (v *Verifier) Issuer() string { return v.issuer }

// Verify checks token and returns its principal. In JWT mode it checks (RFC
// 9068 §4, RFC 8725): the JWS algorithm is on the allowlist, the header typ is
// "at+jwt" or "application/at+jwt", the key is found by kid in the AS's JWKS,
// the signature, iss equal to the issuer, aud containing the resource (canonical
// forms compared exactly), exp and nbf with ClockSkew, and sub, client_id and
// jti present. Verified tokens are cached until they expire. A token with a
// Token Status List claim (draft-ietf-oauth-status-list §6.1) is also
// checked, on every call, against the cached list (see StatusMaxAge):
// a revoked one is refused with ErrInvalidToken.
func (v *Verifier) Verify(ctx context.Context, token string) (*Principal, error) {
	if v.introspect != nil {
		return v.introspectToken(ctx, token)
	}
	now := v.now()
	if v.cache != nil {
		if p, ok := v.cache.get(token, now); ok {
			if p.status != nil {
				if err := v.checkStatus(ctx, p.status, now); err != nil {
					return nil, err
				}
			}
			return p, nil
		}
	}
	p, err := v.verifyJWT(ctx, token, now)
	if err != nil {
		return nil, err
	}
	if p.status != nil {
		if err := v.checkStatus(ctx, p.status, now); err != nil {
			return nil, err
		}
	}
	if v.cache != nil {
		v.cache.put(token, p, now)
	}
	return p, nil
}

// claims is the RFC 9068 §2.2 claim set.
type claims struct {
	Issuer   string           `json:"iss"`
	Subject  string           `json:"sub"`
	Audience jwt.Audience     `json:"aud"`
	ClientID string           `json:"client_id"`
	Scope    string           `json:"scope"`
	IssuedAt *jwt.NumericDate `json:"iat"`
	Expiry   *jwt.NumericDate `json:"exp"`
	NotAfter *jwt.NumericDate `json:"nbf"`
	ID       string           `json:"jti"`
	Act      *Actor           `json:"act"`
	// SCP is the scope list some servers (fosite's default "scp" field)
	// send instead of RFC 9068's "scope"; read only when "scope" is absent.
	SCP jwt.Audience `json:"scp"`
	// Status is the Token Status List reference (status.go).
	Status *tokenStatus `json:"status"`
	// Cnf is the RFC 7800 confirmation; jkt binds the token to a DPoP key
	// (RFC 9449 §6.1, and §6.2 for introspection).
	Cnf *struct {
		JKT string `json:"jkt"`
	} `json:"cnf"`
}

func (c *claims) scopes() []string {
	if c.Scope != "" {
		return strings.Fields(c.Scope)
	}
	return []string(c.SCP)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidToken}, args...)...)
}

func (v *Verifier) verifyJWT(ctx context.Context, token string, now time.Time) (*Principal, error) {
	if len(token) > 16<<10 {
		return nil, invalid("token too long")
	}
	hseg, pseg, sseg, compact := splitCompact(token)
	if compact {
		if h, ok := v.headers.get(hseg); ok {
			key, err := v.key(ctx, h.kid, h.alg, now)
			if err != nil {
				return nil, err
			}
			if pub, ok := key.Key.(*ecdsa.PublicKey); ok {
				payload, ok := verifyES256Compact(token, pseg, sseg, pub)
				if !ok {
					return nil, invalid("%v", jose.ErrCryptoFailure)
				}
				return v.checkPayload(payload, now)
			}
		}
	}
	tok, err := jose.ParseSignedCompact(token, v.algs)
	if err != nil {
		return nil, invalid("%v", err)
	}
	if len(tok.Signatures) != 1 {
		return nil, invalid("expected one signature")
	}
	h := tok.Signatures[0].Protected
	typ, _ := h.ExtraHeaders[jose.HeaderType].(string)
	if !strings.EqualFold(typ, "at+jwt") && !strings.EqualFold(typ, "application/at+jwt") {
		return nil, invalid("typ %q is not at+jwt", typ)
	}
	key, err := v.key(ctx, h.KeyID, h.Algorithm, now)
	if err != nil {
		return nil, err
	}
	payload, err := tok.Verify(key.Key)
	if err != nil {
		return nil, invalid("%v", err)
	}
	if compact && len(h.ExtraHeaders) == 1 && h.JSONWebKey == nil && h.Nonce == "" {
		// Only typ besides alg and kid: nothing else in the header can
		// change how the next token under it verifies.
		v.headers.put(hseg, cachedHeader{kid: h.KeyID, alg: h.Algorithm})
	}
	return v.checkPayload(payload, now)
}

// checkPayload decodes the verified claims and applies the checks of
// checkClaims and the status reference.
func (v *Verifier) checkPayload(payload []byte, now time.Time) (*Principal, error) {
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, invalid("claims: %v", err)
	}
	p, err := v.checkClaims(&c, now, true)
	if err != nil || c.Status == nil || v.ignoreStatus {
		return p, err
	}
	if p.status, err = v.statusRefFor(c.Status); err != nil {
		return nil, err
	}
	return p, nil
}

// checkClaims applies the RFC 9068 §4 claim checks. jti is required of JWTs
// (RFC 9068 §2.2) but optional in introspection answers (RFC 7662 §2.2).
func (v *Verifier) checkClaims(c *claims, now time.Time, requireJTI bool) (*Principal, error) {
	if c.Issuer != v.issuer {
		return nil, invalid("iss %q is not the configured issuer", c.Issuer)
	}
	if c.Expiry == nil {
		return nil, invalid("no exp")
	}
	exp := c.Expiry.Time()
	if now.After(exp.Add(v.skew)) {
		return nil, invalid("expired at %s", exp.UTC().Format(time.RFC3339))
	}
	if c.NotAfter != nil && now.Add(v.skew).Before(c.NotAfter.Time()) {
		return nil, invalid("not valid before %s", c.NotAfter.Time().UTC().Format(time.RFC3339))
	}
	var iat time.Time
	if c.IssuedAt != nil {
		iat = c.IssuedAt.Time()
		if now.Add(v.skew).Before(iat) {
			return nil, invalid("issued in the future")
		}
	}
	if !v.audienceMatches(c.Audience) {
		return nil, invalid("aud %q does not contain %q", []string(c.Audience), v.resource)
	}
	if c.Subject == "" || c.ClientID == "" || (requireJTI && c.ID == "") {
		return nil, invalid("sub, client_id and jti are required")
	}
	p := &Principal{
		Issuer: c.Issuer, Subject: c.Subject, ClientID: c.ClientID,
		Scopes: c.scopes(), TokenID: c.ID,
		IssuedAt: iat, Expiry: exp, Audience: []string(c.Audience), Actor: c.Act,
	}
	if c.Cnf != nil {
		if c.Cnf.JKT == "" {
			// A confirmation this package cannot check (x5t#S256, jwk):
			// the token is sender-constrained some other way.
			return nil, invalid("cnf without jkt")
		}
		p.DPoPThumbprint = c.Cnf.JKT
	}
	return p, nil
}

// audienceMatches compares canonical forms exactly (never by prefix).
func (v *Verifier) audienceMatches(aud []string) bool {
	for _, a := range aud {
		if a == v.resource {
			return true
		}
		if ca, err := metadata.CanonicalResource(a); err == nil && ca == v.resource {
			return true
		}
	}
	return false
}

// key returns the verification key for kid. An unknown kid causes a JWKS
// refresh at most once per RefreshInterval; keys already known keep working
// when the AS is unreachable.
func (v *Verifier) key(ctx context.Context, kid, alg string, now time.Time) (*jose.JSONWebKey, error) {
	ks := v.keys.Load()
	if ks != nil {
		if k, ok := ks.lookup(kid, alg); ok {
			if now.Sub(ks.fetchedAt) > v.keysMaxAge {
				v.backgroundRefresh()
			}
			return k, nil
		}
	}
	// Unknown kid (or no keys yet): refresh, rate-limited.
	v.refreshMu.Lock()
	if cur := v.keys.Load(); cur != ks && cur != nil { // someone refreshed while we waited
		ks = cur
	} else if interval := v.retryInterval(ks); v.lastTry.IsZero() || now.Sub(v.lastTry) >= interval {
		v.lastTry = now
		if err := v.refreshLocked(ctx); err != nil {
			v.refreshMu.Unlock()
			v.log.Warn("rsmiddleware: JWKS refresh failed", "issuer", v.issuer, "err", err)
			if ks == nil {
				return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
			}
			return nil, invalid("unknown kid %q (key refresh failed)", kid)
		}
		ks = v.keys.Load()
	}
	v.refreshMu.Unlock()
	if ks == nil {
		return nil, fmt.Errorf("%w: no keys yet", ErrUnavailable)
	}
	if k, ok := ks.lookup(kid, alg); ok {
		return k, nil
	}
	return nil, invalid("unknown kid %q", kid)
}

// retryInterval is RefreshInterval, shortened to one second while no key has
// ever been fetched, so a resource server started before its AS recovers
// quickly.
func (v *Verifier) retryInterval(ks *keySet) time.Duration {
	if ks == nil && v.refreshEvery > time.Second {
		return time.Second
	}
	return v.refreshEvery
}

func (ks *keySet) lookup(kid, alg string) (*jose.JSONWebKey, bool) {
	var k *jose.JSONWebKey
	var ok bool
	if kid == "" {
		if len(ks.byKID) != 1 {
			return nil, false
		}
		for _, only := range ks.byKID {
			k, ok = only, true
		}
	} else {
		k, ok = ks.byKID[kid]
	}
	if !ok || (k.Algorithm != "" && k.Algorithm != alg) {
		return nil, false
	}
	return k, true
}

func (v *Verifier) backgroundRefresh() {
	if !v.bgRunning.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer v.bgRunning.Store(false)
		v.refreshMu.Lock()
		defer v.refreshMu.Unlock()
		now := v.now()
		if !v.lastTry.IsZero() && now.Sub(v.lastTry) < v.refreshEvery {
			return
		}
		v.lastTry = now
		if err := v.refreshLocked(context.Background()); err != nil {
			v.log.Warn("rsmiddleware: JWKS refresh failed; keeping cached keys", "issuer", v.issuer, "err", err)
		}
	}()
}

// asMetadata returns the AS metadata, fetching it if not yet known.
func (v *Verifier) asMetadata(ctx context.Context) (*metadata.AuthorizationServerMetadata, error) {
	if m := v.meta.Load(); m != nil {
		return m, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	m, err := metadata.FetchAuthorizationServerMetadata(ctx, v.client, v.issuer)
	if err != nil {
		return nil, err
	}
	v.meta.Store(m)
	return m, nil
}

// refreshLocked fetches the JWKS named by the AS metadata. refreshMu is held.
func (v *Verifier) refreshLocked(ctx context.Context) error {
	m, err := v.asMetadata(ctx)
	if err != nil {
		return err
	}
	if m.JWKSURI == "" {
		return errors.New("AS metadata has no jwks_uri")
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var set jose.JSONWebKeySet
	if err := getJSON(ctx, v.client, m.JWKSURI, &set); err != nil {
		return err
	}
	byKID := make(map[string]*jose.JSONWebKey, len(set.Keys))
	for _, k := range set.Keys {
		if !k.Valid() || !k.IsPublic() || (k.Use != "" && k.Use != "sig") {
			continue
		}
		if k.Algorithm != "" && !slices.Contains(v.algs, jose.SignatureAlgorithm(k.Algorithm)) {
			continue
		}
		byKID[k.KeyID] = &k
	}
	if len(byKID) == 0 {
		return errors.New("JWKS has no usable signing key")
	}
	v.keys.Store(&keySet{byKID: byKID, fetchedAt: v.now()})
	return nil
}

const maxFetchBytes = 256 << 10

// noRedirects returns a copy of c (nil: a client with a 10 s timeout) that
// never follows redirects: metadata, keys and token endpoint answers must
// come from the URL asked.
func noRedirects(c *http.Client) *http.Client {
	n := http.Client{Timeout: 10 * time.Second}
	if c != nil {
		n = *c
	}
	n.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &n
}

// getJSON GETs u with client (see noRedirects) and decodes a size-capped
// JSON body into dst.
func getJSON(ctx context.Context, client *http.Client, u string, dst any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json, application/jwk-set+json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodeJSONResponse(resp, u, dst)
}

func decodeJSONResponse(resp *http.Response, u string, dst any) error {
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s: status %d", u, resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && mt != "application/jwk-set+json") {
			return fmt.Errorf("%s: content type %q", u, ct)
		}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxFetchBytes+1))
	if err != nil {
		return err
	}
	if len(body) > maxFetchBytes {
		return fmt.Errorf("%s: response larger than %d bytes", u, maxFetchBytes)
	}
	return json.Unmarshal(body, dst)
}

// introspectToken asks the AS (RFC 7662 §2) about token.
func (v *Verifier) introspectToken(ctx context.Context, token string) (*Principal, error) {
	if token == "" || len(token) > 16<<10 {
		return nil, invalid("malformed token")
	}
	m, err := v.asMetadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if m.IntrospectionEndpoint == "" {
		return nil, fmt.Errorf("%w: AS metadata has no introspection_endpoint", ErrUnavailable)
	}
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := postForm(ctx, v.client, m.IntrospectionEndpoint, form, *v.introspect)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	var ir struct {
		Active    bool   `json:"active"`
		TokenType string `json:"token_type"`
		claims
	}
	var raw json.RawMessage
	if err := decodeJSONResponse(resp, m.IntrospectionEndpoint, &raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if err := json.Unmarshal(raw, &ir); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if !ir.Active {
		return nil, invalid("introspection: inactive")
	}
	if ir.TokenType != "" && !strings.EqualFold(ir.TokenType, "Bearer") && !strings.EqualFold(ir.TokenType, "access_token") &&
		!(strings.EqualFold(ir.TokenType, "DPoP") && ir.Cnf != nil) {
		return nil, invalid("introspection: token_type %q", ir.TokenType)
	}
	if ir.Issuer == "" { // RFC 7662 makes iss optional; the AS we asked is the issuer
		ir.Issuer = v.issuer
	}
	p, err := v.checkClaims(&ir.claims, v.now(), false)
	if err != nil {
		return nil, err
	}
	// Kept for the claims the Principal has no field for (MCPFilter's
	// tenant claim), as a JWT's payload is kept in the token itself.
	p.introspected = raw
	return p, nil
}

// postForm POSTs form to u with client (see noRedirects), authenticated by
// client_secret_basic: id and secret form-encoded, then Basic (RFC 6749
// §2.3.1).
func postForm(ctx context.Context, client *http.Client, u string, form url.Values, cred ClientCredentials) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(cred.ClientID), url.QueryEscape(cred.ClientSecret))
	return client.Do(req)
}
