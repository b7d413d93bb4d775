package rsmiddleware

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// IdentityType is the JOSE typ of the identity JWT a gateway (mcpgateway's
// identity.header) sends its upstream: who called, signed by the gateway
// with ES256 (RFC 7515 §4.1.9, RFC 8725 §3.11 explicit typing).
const IdentityType = "mcp-identity+jwt"

// DefaultIdentityHeader is the header the identity JWT travels in.
const DefaultIdentityHeader = "X-MCP-Identity"

// IdentityJWKSPath is where a gateway serves the public keys of its
// identity JWTs, on its own origin.
const IdentityJWKSPath = "/.well-known/jwks.json"

// IdentityClaims are the claims of an identity JWT: sub, client_id, scope
// (space-separated, RFC 8693 §4.2), the person attributes the gateway is
// configured to pass (email, groups, tenant), iss (the gateway's resource),
// aud (the upstream URL), iat, exp (60 s after iat) and jti.
type IdentityClaims struct {
	Issuer   string           `json:"iss"`
	Subject  string           `json:"sub"`
	Audience jwt.Audience     `json:"aud"`
	ClientID string           `json:"client_id,omitempty"`
	Scope    string           `json:"scope,omitempty"`
	IssuedAt *jwt.NumericDate `json:"iat"`
	Expiry   *jwt.NumericDate `json:"exp"`
	ID       string           `json:"jti"`
	// Extra holds every claim, the attributes (email, groups, tenant)
	// among them.
	Extra map[string]any `json:"-"`
}

// Scopes splits Scope.
func (c *IdentityClaims) Scopes() []string { return strings.Fields(c.Scope) }

// IdentityVerifierConfig configures an IdentityVerifier.
type IdentityVerifierConfig struct {
	// Issuer is the gateway's resource URI, the JWT's iss (required).
	Issuer string
	// Audience is this server's URL as the gateway's upstream setting
	// names it, the JWT's aud (required).
	Audience string
	// JWKSURL is where the gateway's keys are. Zero value: the origin of
	// Issuer and IdentityJWKSPath.
	JWKSURL string
	// Header carries the JWT. Zero value: DefaultIdentityHeader.
	Header string
	// HTTPClient fetches the keys. Zero value: a client with a 10 s
	// timeout.
	HTTPClient *http.Client
	// Now: zero value time.Now.
	Now func() time.Time
}

// IdentityVerifier checks the identity JWTs of one gateway: ES256 only,
// typ IdentityType, iss, aud, exp (with 30 s of leeway for clocks) and
// iat. The gateway's keys are fetched at the first JWT and again for a
// kid not yet seen, at most every 10 s. It is safe for concurrent use.
type IdentityVerifier struct {
	cfg     IdentityVerifierConfig
	mu      sync.Mutex
	keys    map[string]*jose.JSONWebKey
	fetched time.Time
}

// NewIdentityVerifier checks cfg.
func NewIdentityVerifier(cfg IdentityVerifierConfig) (*IdentityVerifier, error) {
	if cfg.Issuer == "" || cfg.Audience == "" {
		return nil, errors.New("rsmiddleware: IdentityVerifierConfig needs Issuer and Audience")
	}
	if cfg.JWKSURL == "" {
		u, err := url.Parse(cfg.Issuer)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("rsmiddleware: identity issuer %q is not an absolute URL", cfg.Issuer)
		}
		cfg.JWKSURL = u.Scheme + "://" + u.Host + IdentityJWKSPath
	}
	if cfg.Header == "" {
		cfg.Header = DefaultIdentityHeader
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &IdentityVerifier{cfg: cfg}, nil
}

// ErrIdentity is the error of a missing or invalid identity JWT.
var ErrIdentity = errors.New("rsmiddleware: invalid identity JWT")

// Verify checks token and returns its claims.
func (v *IdentityVerifier) Verify(ctx context.Context, token string) (*IdentityClaims, error) {
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil || len(tok.Headers) != 1 {
		return nil, fmt.Errorf("%w: %v", ErrIdentity, err)
	}
	h := tok.Headers[0]
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != IdentityType {
		return nil, fmt.Errorf("%w: typ %q, want %s", ErrIdentity, typ, IdentityType)
	}
	key, err := v.key(ctx, h.KeyID)
	if err != nil {
		return nil, err
	}
	var c IdentityClaims
	var extra map[string]any
	if err := tok.Claims(key.Key, &c, &extra); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrIdentity, err)
	}
	now := v.cfg.Now()
	if c.Issuer != v.cfg.Issuer || !c.Audience.Contains(v.cfg.Audience) || c.Subject == "" || c.Expiry == nil || c.IssuedAt == nil {
		return nil, fmt.Errorf("%w: wrong iss or aud, or no sub, exp or iat", ErrIdentity)
	}
	const leeway = 30 * time.Second
	if now.After(c.Expiry.Time().Add(leeway)) || c.IssuedAt.Time().After(now.Add(leeway)) {
		return nil, fmt.Errorf("%w: expired or issued in the future", ErrIdentity)
	}
	c.Extra = extra
	return &c, nil
}

func (v *IdentityVerifier) key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if k, ok := v.keys[kid]; ok {
		return k, nil
	}
	if now := v.cfg.Now(); v.keys == nil || now.Sub(v.fetched) >= 10*time.Second {
		v.fetched = now
		keys, err := v.fetch(ctx)
		if err != nil {
			return nil, err
		}
		v.keys = keys
		if k, ok := keys[kid]; ok {
			return k, nil
		}
	}
	return nil, fmt.Errorf("%w: unknown kid %q", ErrIdentity, kid)
}

func (v *IdentityVerifier) fetch(ctx context.Context) (map[string]*jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.JWKSURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := v.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("rsmiddleware: identity keys: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("rsmiddleware: identity keys: status %d", resp.StatusCode)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("rsmiddleware: identity keys: %w", err)
	}
	keys := map[string]*jose.JSONWebKey{}
	for i := range set.Keys {
		k := &set.Keys[i]
		if k.IsPublic() && (k.Algorithm == "" || k.Algorithm == string(jose.ES256)) {
			keys[k.KeyID] = k
		}
	}
	return keys, nil
}

type identityKey struct{}

// IdentityFromContext returns the identity Wrap verified.
func IdentityFromContext(ctx context.Context) (*IdentityClaims, bool) {
	c, ok := ctx.Value(identityKey{}).(*IdentityClaims)
	return c, ok
}

// Wrap returns next behind the identity check: a request without a valid
// identity JWT in the header gets 401; others carry the claims
// (IdentityFromContext).
func (v *IdentityVerifier) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vals := r.Header.Values(v.cfg.Header)
		if len(vals) != 1 {
			http.Error(w, "identity required", http.StatusUnauthorized)
			return
		}
		c, err := v.Verify(r.Context(), vals[0])
		if err != nil {
			status := http.StatusUnauthorized
			if !errors.Is(err, ErrIdentity) {
				status = http.StatusServiceUnavailable
			}
			http.Error(w, http.StatusText(status), status)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, c)))
	})
}

// VerifiedClaims returns the claims of the access token the Middleware
// verified for the request whose context is ctx, as a JSON object: the
// JWT's payload, or the RFC 7662 §2.2 introspection answer. Nil without
// a verified token. The token itself is never exposed.
func VerifiedClaims(ctx context.Context) []byte {
	ai, ok := ctx.Value(ctxKey{}).(*authInfo)
	if !ok || ai.principal == nil {
		return nil
	}
	if ai.principal.introspected != nil {
		return slices.Clone(ai.principal.introspected)
	}
	return jwtPayload(ai.token)
}
