// Package connections links people's accounts at third-party services
// (GitHub, Google, Slack, ...) to the authorization server and releases
// the services' tokens to the MCP servers allowed to act for them.
//
// The authorization server is an OAuth 2.0 client of each configured
// provider (a Provider): it sends the person through the provider's
// authorization code grant (RFC 6749 §4.1) with PKCE S256 (RFC 7636, sent
// to every provider), checks the iss parameter of the answer where the
// provider sends one (RFC 9207 §2.4), and redeems the code. The Vault
// keeps the resulting access and refresh tokens, sealed (AES-256-GCM under
// a key derived from the server secret, bound to the person and the
// connection), one record per person and connection; it refreshes an
// expired access token (RFC 6749 §6) when it is asked for, marks the
// connection as needing reconnecting when the provider refuses, and
// revokes at the provider (RFC 7009) when the person disconnects.
//
// Tokens never leave the Vault except through Token, which the token
// exchange (RFC 8693) at the AS calls for an allowed client; List and the
// records it returns hold none.
package connections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/internal/safehttp"
)

// Sentinel errors of a Provider.
var (
	// ErrUnavailable: the provider could not be reached or answered
	// something unusable.
	ErrUnavailable = errors.New("connections: provider unavailable")
	// ErrRefused: the provider's token endpoint refused the code or the
	// refresh token (an OAuth error answer, RFC 6749 §5.2).
	ErrRefused = errors.New("connections: provider refused the grant")
	// ErrWrongIssuer: the authorization answer names another issuer in
	// its iss parameter, or lacks one the provider promised (RFC 9207
	// §2.4).
	ErrWrongIssuer = errors.New("connections: authorization answer of another issuer")
)

// MaxMetadataBytes bounds the metadata document read from an issuer.
const MaxMetadataBytes = 64 << 10

// Config is one connection.
type Config struct {
	// ID names it in URLs and records; Name is shown to people.
	ID, Name string
	// AuthorizationEndpoint and TokenEndpoint, or Issuer, whose RFC 8414
	// metadata (or OpenID Connect discovery) names them.
	AuthorizationEndpoint, TokenEndpoint, Issuer string
	// RevocationEndpoint is the RFC 7009 endpoint; "" when none (with
	// Issuer, the metadata's is used).
	RevocationEndpoint string
	// ClientID and ClientSecret are our credentials at the provider.
	ClientID, ClientSecret string
	// Scopes asked of the provider.
	Scopes []string
	// Resource is the URI a token exchange names to get this
	// connection's token (canonical).
	Resource string
	// Clients may receive the tokens.
	Clients []string
	// RedirectURL is our callback, {issuer}/connections/{id}/callback.
	RedirectURL string
	// HTTPClient calls the provider; nil: a client with a 10 s timeout
	// that follows no redirects.
	HTTPClient *http.Client
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Provider is one configured connection's provider. It is safe for
// concurrent use.
type Provider struct {
	cfg Config

	mu     sync.Mutex
	meta   *metadata
	metaAt time.Time
}

// metadata is the part of RFC 8414 metadata used here.
type metadata struct {
	Issuer                string `json:"issuer"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
	RevocationEndpoint    string `json:"revocation_endpoint"`
	// IssParameter is authorization_response_iss_parameter_supported
	// (RFC 9207 §3).
	IssParameter bool `json:"authorization_response_iss_parameter_supported"`
}

const metadataTTL = time.Hour

// NewProvider checks cfg; it makes no request.
func NewProvider(cfg Config) (*Provider, error) {
	if cfg.ID == "" || cfg.ClientID == "" || cfg.RedirectURL == "" || cfg.Resource == "" {
		return nil, errors.New("connections: ID, ClientID, RedirectURL and Resource are required")
	}
	if (cfg.Issuer == "") == (cfg.AuthorizationEndpoint == "" || cfg.TokenEndpoint == "") {
		return nil, errors.New("connections: set Issuer, or AuthorizationEndpoint and TokenEndpoint")
	}
	if cfg.Name == "" {
		cfg.Name = cfg.ID
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Provider{cfg: cfg}, nil
}

// ID returns the connection's id; Name its display name; Resource the URI
// an exchange names for it.
func (p *Provider) ID() string       { return p.cfg.ID }
func (p *Provider) Name() string     { return p.cfg.Name }
func (p *Provider) Resource() string { return p.cfg.Resource }

// AllowsClient reports whether client may receive this connection's
// tokens.
func (p *Provider) AllowsClient(client string) bool { return slices.Contains(p.cfg.Clients, client) }

// endpoints returns the metadata: the configured endpoints, or the
// issuer's document (cached for an hour).
func (p *Provider) endpoints(ctx context.Context) (*metadata, error) {
	if p.cfg.Issuer == "" {
		return &metadata{AuthorizationEndpoint: p.cfg.AuthorizationEndpoint, TokenEndpoint: p.cfg.TokenEndpoint,
			RevocationEndpoint: p.cfg.RevocationEndpoint}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.meta != nil && p.cfg.Now().Sub(p.metaAt) < metadataTTL {
		return p.meta, nil
	}
	m, err := p.discover(ctx)
	if err != nil {
		if p.meta != nil {
			return p.meta, nil
		}
		return nil, err
	}
	p.meta, p.metaAt = m, p.cfg.Now()
	return m, nil
}

// discover reads RFC 8414 metadata (path-inserted well-known URL, §3.1),
// then OpenID Connect discovery; the issuer in the document must be the
// configured one (RFC 8414 §3.3).
func (p *Provider) discover(ctx context.Context) (*metadata, error) {
	iss := strings.TrimSuffix(p.cfg.Issuer, "/")
	u, err := url.Parse(iss)
	if err != nil {
		return nil, fmt.Errorf("%w: issuer: %v", ErrUnavailable, err)
	}
	urls := []string{u.Scheme + "://" + u.Host + "/.well-known/oauth-authorization-server" + u.Path, iss + "/.well-known/openid-configuration"}
	var lastErr error
	for _, mu := range urls {
		body, _, err := safehttp.Fetch(ctx, p.cfg.HTTPClient, mu, "application/json", MaxMetadataBytes)
		if err != nil {
			lastErr = err
			continue
		}
		var m metadata
		if err := json.Unmarshal(body, &m); err != nil {
			lastErr = errors.New("metadata is not JSON")
			continue
		}
		if m.Issuer != p.cfg.Issuer {
			return nil, fmt.Errorf("%w: metadata names issuer %q, not %q", ErrUnavailable, m.Issuer, p.cfg.Issuer)
		}
		if m.AuthorizationEndpoint == "" || m.TokenEndpoint == "" {
			return nil, fmt.Errorf("%w: metadata lacks an endpoint", ErrUnavailable)
		}
		if p.cfg.RevocationEndpoint != "" {
			m.RevocationEndpoint = p.cfg.RevocationEndpoint
		}
		return &m, nil
	}
	return nil, fmt.Errorf("%w: metadata: %v", ErrUnavailable, lastErr)
}

func (p *Provider) oauth2Config(m *metadata) *oauth2.Config {
	return &oauth2.Config{
		ClientID:     p.cfg.ClientID,
		ClientSecret: p.cfg.ClientSecret,
		// client_secret_basic first, client_secret_post for providers
		// that refuse it (RFC 6749 §2.3.1).
		Endpoint:    oauth2.Endpoint{AuthURL: m.AuthorizationEndpoint, TokenURL: m.TokenEndpoint, AuthStyle: oauth2.AuthStyleAutoDetect},
		RedirectURL: p.cfg.RedirectURL,
		Scopes:      p.cfg.Scopes,
	}
}

// AuthCodeURL returns the provider's authorization URL for our state and
// the PKCE verifier, sent as its S256 challenge (RFC 7636 §4.2).
func (p *Provider) AuthCodeURL(ctx context.Context, state, verifier string) (string, error) {
	m, err := p.endpoints(ctx)
	if err != nil {
		return "", err
	}
	return p.oauth2Config(m).AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)), nil
}

// CheckResponseIssuer applies RFC 9207 §2.4 to the iss parameter of an
// authorization answer ("" when absent). With Issuer configured, a
// present iss must equal it byte for byte, and an absent one is refused
// when the metadata promises it. With endpoints configured, a present iss
// must be the authorization endpoint's URL or a prefix of it ending at a
// path segment (the provider's issuer), so an answer naming another
// provider is refused.
func (p *Provider) CheckResponseIssuer(ctx context.Context, iss string) error {
	if p.cfg.Issuer != "" {
		if iss != "" {
			if iss != p.cfg.Issuer {
				return fmt.Errorf("%w: iss %q is not %q", ErrWrongIssuer, iss, p.cfg.Issuer)
			}
			return nil
		}
		m, err := p.endpoints(ctx)
		if err != nil {
			return err
		}
		if m.IssParameter {
			return fmt.Errorf("%w: no iss, which the provider's metadata promises", ErrWrongIssuer)
		}
		return nil
	}
	if iss == "" {
		return nil
	}
	ae := p.cfg.AuthorizationEndpoint
	trimmed := strings.TrimSuffix(iss, "/")
	u, err := url.Parse(iss)
	if err == nil && u.Host != "" && (ae == iss || strings.HasPrefix(ae, trimmed+"/")) {
		return nil
	}
	return fmt.Errorf("%w: iss %q is not the issuer of %s", ErrWrongIssuer, iss, ae)
}

// Token is a provider's answer at its token endpoint.
type Token struct {
	AccessToken  string
	RefreshToken string // "" when none
	TokenType    string
	ExpiresAt    time.Time // zero when the provider did not say
	Scopes       []string  // granted, or asked when the provider did not say
}

func (p *Provider) fromOAuth2(t *oauth2.Token) (*Token, error) {
	if t.AccessToken == "" {
		return nil, fmt.Errorf("%w: no access token in the answer", ErrUnavailable)
	}
	out := &Token{AccessToken: t.AccessToken, RefreshToken: t.RefreshToken, TokenType: t.Type(), ExpiresAt: t.Expiry}
	if t.ExpiresIn > 0 {
		// expires_in (RFC 6749 §5.1) counted from our clock, the one the
		// vault decides refreshes by.
		out.ExpiresAt = p.cfg.Now().Add(time.Duration(t.ExpiresIn) * time.Second)
	}
	if raw, ok := t.Extra("token_type").(string); ok && raw != "" {
		out.TokenType = raw // as the provider spelled it
	}
	switch s := t.Extra("scope").(type) {
	case string:
		// RFC 6749 §3.3 separates scopes with spaces; GitHub with commas.
		out.Scopes = strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' })
	}
	if out.Scopes == nil {
		out.Scopes = slices.Clone(p.cfg.Scopes)
	}
	return out, nil
}

func (p *Provider) clientCtx(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, p.cfg.HTTPClient)
}

// Exchange redeems code with the PKCE verifier (RFC 6749 §4.1.3).
func (p *Provider) Exchange(ctx context.Context, code, verifier string) (*Token, error) {
	m, err := p.endpoints(ctx)
	if err != nil {
		return nil, err
	}
	t, err := p.oauth2Config(m).Exchange(p.clientCtx(ctx), code, oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, tokenError(err)
	}
	return p.fromOAuth2(t)
}

// Refresh uses refreshToken (RFC 6749 §6). A provider that does not
// rotate it leaves RefreshToken as it was.
func (p *Provider) Refresh(ctx context.Context, refreshToken string) (*Token, error) {
	m, err := p.endpoints(ctx)
	if err != nil {
		return nil, err
	}
	t, err := p.oauth2Config(m).TokenSource(p.clientCtx(ctx), &oauth2.Token{RefreshToken: refreshToken}).Token()
	if err != nil {
		return nil, tokenError(err)
	}
	return p.fromOAuth2(t)
}

// CanRevoke reports whether the provider has a revocation endpoint.
func (p *Provider) CanRevoke(ctx context.Context) bool {
	m, err := p.endpoints(ctx)
	return err == nil && m.RevocationEndpoint != ""
}

// Revoke asks the provider to revoke token, of type hint
// ("refresh_token" or "access_token"), with client authentication
// (RFC 7009 §2.1). Without a revocation endpoint it does nothing.
func (p *Provider) Revoke(ctx context.Context, token, hint string) error {
	m, err := p.endpoints(ctx)
	if err != nil {
		return err
	}
	if m.RevocationEndpoint == "" {
		return nil
	}
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.RevocationEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(p.cfg.ClientID), url.QueryEscape(p.cfg.ClientSecret))
	resp, err := p.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w: revocation: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: revocation endpoint answered HTTP %d", ErrUnavailable, resp.StatusCode)
	}
	return nil
}

// tokenError classifies an error of the oauth2 package: an OAuth error
// answer is the provider refusing; anything else is it being unusable. The
// provider's text is not kept: it may echo what was sent.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && (re.ErrorCode != "" || re.Response.StatusCode == http.StatusBadRequest || re.Response.StatusCode == http.StatusUnauthorized) {
		return fmt.Errorf("%w: %s (HTTP %d)", ErrRefused, re.ErrorCode, re.Response.StatusCode)
	}
	if errors.As(err, &re) {
		return fmt.Errorf("%w: token endpoint answered HTTP %d", ErrUnavailable, re.Response.StatusCode)
	}
	return fmt.Errorf("%w: token endpoint unreachable", ErrUnavailable)
}
