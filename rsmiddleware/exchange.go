package rsmiddleware

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mcpauth/mcpauth/internal/bearerretry"
	"github.com/mcpauth/mcpauth/metadata"
)

// RFC 8693 §2.1 and §3 identifiers.
const (
	GrantTypeTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	TokenTypeAccessToken   = "urn:ietf:params:oauth:token-type:access_token"
)

// Errors of the token exchange client.
var (
	// ErrNoInboundToken: the context carries no token verified by Middleware.
	ErrNoInboundToken = errors.New("rsmiddleware: no inbound token in context")
	// ErrPassthrough: an outgoing request carries the inbound token; it was
	// not sent (MCP: a server MUST NOT pass through the token it received).
	ErrPassthrough = errors.New("rsmiddleware: refusing to forward the inbound access token")
)

// ExchangeError is an OAuth error response of the token endpoint
// (RFC 6749 §5.2, RFC 8693 §2.2.2), e.g. invalid_target or invalid_grant.
type ExchangeError struct {
	Status      int
	Code        string
	Description string
}

func (e *ExchangeError) Error() string {
	if e.Description != "" {
		return fmt.Sprintf("token exchange: %s (%d): %s", e.Code, e.Status, e.Description)
	}
	return fmt.Sprintf("token exchange: %s (%d)", e.Code, e.Status)
}

// ExchangeConfig configures an Exchanger.
type ExchangeConfig struct {
	// Issuer of the AS; the token endpoint is read from its metadata unless
	// TokenURL is set. One of the two is required.
	Issuer string
	// TokenURL overrides discovery.
	TokenURL string
	// ClientID and ClientSecret authenticate this server (client_secret_basic,
	// RFC 6749 §2.3.1). Required.
	ClientID, ClientSecret string
	// Scopes requested for downstream tokens (optional; the AS narrows).
	Scopes []string
	// HTTPClient: zero value a client with a 10 s timeout.
	HTTPClient *http.Client
	// RefreshBefore: cached tokens are replaced this long before they
	// expire. Zero value: 30 s.
	RefreshBefore time.Duration
	// CacheSize bounds the cache. Zero value: 10000.
	CacheSize int
	// Now: zero value time.Now.
	Now func() time.Time
}

// Exchanger obtains downstream access tokens by RFC 8693 token exchange of
// the inbound token, caching each per (subject token, resource) until
// shortly before it expires. It is safe for concurrent use.
type Exchanger struct {
	cfg      ExchangeConfig
	client   *http.Client
	now      func() time.Time
	tokenURL string
	urlOnce  sync.Mutex

	mu    sync.Mutex
	cache map[[32]byte]*ExchangedToken
	// inflight holds the exchanges under way, by cache key: a cache miss
	// for a key already being exchanged waits for that exchange instead of
	// doing its own.
	inflight map[[32]byte]*exchangeCall
}

// exchangeCall is one exchange under way; tok and err are set before done
// is closed.
type exchangeCall struct {
	done chan struct{}
	tok  *ExchangedToken
	err  error
}

// ExchangedToken is a token issued by the exchange (RFC 8693 §2.2.1).
type ExchangedToken struct {
	AccessToken     string
	TokenType       string
	IssuedTokenType string
	Scope           string
	Expiry          time.Time
}

// NewExchanger checks cfg and returns an Exchanger.
func NewExchanger(cfg ExchangeConfig) (*Exchanger, error) {
	if cfg.Issuer == "" && cfg.TokenURL == "" {
		return nil, errors.New("rsmiddleware: ExchangeConfig needs Issuer or TokenURL")
	}
	if cfg.ClientID == "" || cfg.ClientSecret == "" {
		return nil, errors.New("rsmiddleware: ExchangeConfig needs ClientID and ClientSecret")
	}
	e := &Exchanger{cfg: cfg, client: noRedirects(cfg.HTTPClient), now: cfg.Now, tokenURL: cfg.TokenURL, cache: map[[32]byte]*ExchangedToken{},
		inflight: map[[32]byte]*exchangeCall{}}
	if e.now == nil {
		e.now = time.Now
	}
	if e.cfg.RefreshBefore <= 0 {
		e.cfg.RefreshBefore = 30 * time.Second
	}
	if e.cfg.CacheSize <= 0 {
		e.cfg.CacheSize = 10000
	}
	return e, nil
}

// Token returns a token for resource obtained by exchanging the inbound
// token of ctx (put there by Middleware).
func (e *Exchanger) Token(ctx context.Context, resource string) (*ExchangedToken, error) {
	sub := inboundToken(ctx)
	if sub == "" {
		return nil, ErrNoInboundToken
	}
	return e.Exchange(ctx, sub, resource)
}

// Exchange exchanges subjectToken for a token whose audience is resource.
// Concurrent calls for the same subject token and resource while none is
// cached share one exchange.
func (e *Exchanger) Exchange(ctx context.Context, subjectToken, resource string) (*ExchangedToken, error) {
	res, err := metadata.CanonicalResource(resource)
	if err != nil {
		return nil, err
	}
	return e.exchangeCanonical(ctx, subjectToken, res)
}

// exchangeCanonical is Exchange for a resource already in canonical form.
func (e *Exchanger) exchangeCanonical(ctx context.Context, subjectToken, res string) (*ExchangedToken, error) {
	key := exchangeKey(subjectToken, res)
	for {
		now := e.now()
		e.mu.Lock()
		if t, ok := e.cache[key]; ok && now.Add(e.cfg.RefreshBefore).Before(t.Expiry) {
			e.mu.Unlock()
			return t, nil
		}
		if c, ok := e.inflight[key]; ok {
			e.mu.Unlock()
			select {
			case <-c.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			// The exchange this call waited for ended with its caller's
			// context: this caller's own is alive, so it tries again.
			if errors.Is(c.err, context.Canceled) || errors.Is(c.err, context.DeadlineExceeded) {
				continue
			}
			return c.tok, c.err
		}
		c := &exchangeCall{done: make(chan struct{})}
		e.inflight[key] = c
		e.mu.Unlock()

		c.tok, c.err = e.exchange(ctx, subjectToken, res, now)
		e.mu.Lock()
		delete(e.inflight, key)
		if c.err == nil {
			if len(e.cache) >= e.cfg.CacheSize {
				for k, v := range e.cache {
					if !now.Add(e.cfg.RefreshBefore).Before(v.Expiry) || len(e.cache) >= e.cfg.CacheSize {
						delete(e.cache, k)
					}
				}
			}
			e.cache[key] = c.tok
		}
		e.mu.Unlock()
		close(c.done)
		return c.tok, c.err
	}
}

func exchangeKey(subjectToken, res string) [32]byte {
	return sha256.Sum256([]byte(subjectToken + "\x00" + res))
}

// drop removes tok from the cache if it is still the token cached for
// subjectToken and res, so that the next call exchanges anew.
func (e *Exchanger) drop(subjectToken, res string, tok *ExchangedToken) {
	key := exchangeKey(subjectToken, res)
	e.mu.Lock()
	if e.cache[key] == tok {
		delete(e.cache, key)
	}
	e.mu.Unlock()
}

func (e *Exchanger) endpoint(ctx context.Context) (string, error) {
	e.urlOnce.Lock()
	defer e.urlOnce.Unlock()
	if e.tokenURL != "" {
		return e.tokenURL, nil
	}
	m, err := metadata.FetchAuthorizationServerMetadata(ctx, e.client, e.cfg.Issuer)
	if err != nil {
		return "", err
	}
	if m.TokenEndpoint == "" {
		return "", errors.New("rsmiddleware: AS metadata has no token_endpoint")
	}
	e.tokenURL = m.TokenEndpoint
	return e.tokenURL, nil
}

func (e *Exchanger) exchange(ctx context.Context, subjectToken, resource string, now time.Time) (*ExchangedToken, error) {
	tokenURL, err := e.endpoint(ctx)
	if err != nil {
		return nil, err
	}
	form := url.Values{
		"grant_type":           {GrantTypeTokenExchange},
		"subject_token":        {subjectToken},
		"subject_token_type":   {TokenTypeAccessToken},
		"requested_token_type": {TokenTypeAccessToken},
		"resource":             {resource},
	}
	if len(e.cfg.Scopes) > 0 {
		form.Set("scope", strings.Join(e.cfg.Scopes, " "))
	}
	resp, err := postForm(ctx, e.client, tokenURL, form, ClientCredentials{ClientID: e.cfg.ClientID, ClientSecret: e.cfg.ClientSecret})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxFetchBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxFetchBytes {
		return nil, errors.New("rsmiddleware: token response too large")
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return nil, fmt.Errorf("rsmiddleware: token endpoint answered %d with content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var tr struct {
		AccessToken     string      `json:"access_token"`
		TokenType       string      `json:"token_type"`
		IssuedTokenType string      `json:"issued_token_type"`
		ExpiresIn       json.Number `json:"expires_in"`
		Scope           string      `json:"scope"`
		Error           string      `json:"error"`
		Description     string      `json:"error_description"`
	}
	if err := json.Unmarshal(body, &tr); err != nil {
		return nil, fmt.Errorf("rsmiddleware: token response: %w", err)
	}
	if resp.StatusCode != http.StatusOK || tr.Error != "" {
		code := tr.Error
		if code == "" {
			code = "server_error"
		}
		return nil, &ExchangeError{Status: resp.StatusCode, Code: code, Description: tr.Description}
	}
	if tr.AccessToken == "" || !strings.EqualFold(tr.TokenType, "Bearer") {
		return nil, fmt.Errorf("rsmiddleware: token response without a Bearer access_token (token_type %q)", tr.TokenType)
	}
	if tr.IssuedTokenType != "" && tr.IssuedTokenType != TokenTypeAccessToken {
		return nil, fmt.Errorf("rsmiddleware: issued_token_type %q is not an access token", tr.IssuedTokenType)
	}
	if tr.AccessToken == subjectToken {
		return nil, ErrPassthrough
	}
	secs, err := tr.ExpiresIn.Int64()
	if err != nil || secs <= 0 {
		secs = 60 // RFC 6749 §5.1 makes expires_in optional; assume a short life
	}
	return &ExchangedToken{
		AccessToken: tr.AccessToken, TokenType: "Bearer", IssuedTokenType: tr.IssuedTokenType,
		Scope: tr.Scope, Expiry: now.Add(time.Duration(secs) * time.Second),
	}, nil
}

// Transport returns an http.RoundTripper for calls to resource: it attaches
// a token exchanged from the request context's inbound token, and refuses
// (returns ErrPassthrough, sends nothing) any request whose URL or headers
// contain the inbound token. Requests must carry the context of the inbound
// request (req.WithContext). A 401 from the resource drops the exchanged
// token from the cache and sends the request once more with a token
// exchanged anew, when its body can be sent again (GetBody). base nil means
// http.DefaultTransport.
func (e *Exchanger) Transport(base http.RoundTripper, resource string) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	res, err := metadata.CanonicalResource(resource)
	return &exchangeTransport{e: e, base: base, resource: res, resErr: err}
}

type exchangeTransport struct {
	e    *Exchanger
	base http.RoundTripper
	// resource is the canonical form of Transport's resource, parsed once;
	// resErr why it has none.
	resource string
	resErr   error
}

func (t *exchangeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	closeBody := func() {
		if req.Body != nil {
			_ = req.Body.Close()
		}
	}
	inbound := inboundToken(req.Context())
	if inbound == "" {
		closeBody()
		return nil, ErrNoInboundToken
	}
	if carriesToken(req, inbound) {
		closeBody()
		return nil, ErrPassthrough
	}
	if t.resErr != nil {
		closeBody()
		return nil, t.resErr
	}
	tok, err := t.e.exchangeCanonical(req.Context(), inbound, t.resource)
	if err != nil {
		closeBody()
		return nil, err
	}
	// A 401 from the resource drops the exchanged token from the cache and
	// the request is sent once more with a token exchanged anew.
	return bearerretry.RoundTrip(t.base, req, tok, bearerretry.Tokens[*ExchangedToken]{
		Get: func(ctx context.Context) (*ExchangedToken, error) {
			return t.e.exchangeCanonical(ctx, inbound, t.resource)
		},
		Drop:  func(tok *ExchangedToken) { t.e.drop(inbound, t.resource, tok) },
		Value: func(tok *ExchangedToken) string { return tok.AccessToken },
	})
}

func carriesToken(req *http.Request, tok string) bool {
	if strings.Contains(req.URL.String(), tok) || strings.Contains(req.Host, tok) {
		return true
	}
	for _, hs := range []http.Header{req.Header, req.Trailer} {
		for k, vs := range hs {
			if strings.Contains(k, tok) {
				return true
			}
			for _, v := range vs {
				if strings.Contains(v, tok) {
					return true
				}
				// A token hidden in base64 credentials (Basic, or those of
				// any other scheme) is still the token.
				if _, cred, ok := strings.Cut(v, " "); ok {
					if dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred)); err == nil && strings.Contains(string(dec), tok) {
						return true
					}
				}
			}
		}
	}
	return false
}
