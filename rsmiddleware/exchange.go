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
	// ConnectURI is the connect_uri member of an interaction_required
	// answer to an exchange for a connected account (Connection): the page
	// of the AS where the person connects (or reconnects) their account.
	ConnectURI string
}

// ConnectRequired reports whether e says the person must first connect
// their account at ConnectURI.
func (e *ExchangeError) ConnectRequired() bool {
	return e.Code == "interaction_required" && e.ConnectURI != ""
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
	return e.exchangeKeyed(ctx, exchangeKey(subjectToken, res), subjectToken, target{name: "resource", value: res})
}

// target is how an exchange names what the token is for: its RFC 8693
// §2.1 resource, or audience (a connection's id).
type target struct {
	name, value string
	// maxTTL, when set, bounds how long the token is cached.
	maxTTL time.Duration
}

// exchangeKeyed is the exchange for t, cached under key.
func (e *Exchanger) exchangeKeyed(ctx context.Context, key [32]byte, subjectToken string, t target) (*ExchangedToken, error) {
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

		c.tok, c.err = e.exchange(ctx, subjectToken, t, now)
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

// drop removes tok from the cache if it is still the token cached under
// key, so that the next call exchanges anew.
func (e *Exchanger) drop(key [32]byte, tok *ExchangedToken) {
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

func (e *Exchanger) exchange(ctx context.Context, subjectToken string, t target, now time.Time) (*ExchangedToken, error) {
	tokenURL, err := e.endpoint(ctx)
	if err != nil {
		return nil, err
	}
	form := url.Values{
		"grant_type":           {GrantTypeTokenExchange},
		"subject_token":        {subjectToken},
		"subject_token_type":   {TokenTypeAccessToken},
		"requested_token_type": {TokenTypeAccessToken},
		t.name:                 {t.value},
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
		ConnectURI      string      `json:"connect_uri"`
	}
	if err := json.Unmarshal(body, &tr); err != nil {
		return nil, fmt.Errorf("rsmiddleware: token response: %w", err)
	}
	if resp.StatusCode != http.StatusOK || tr.Error != "" {
		code := tr.Error
		if code == "" {
			code = "server_error"
		}
		return nil, &ExchangeError{Status: resp.StatusCode, Code: code, Description: tr.Description, ConnectURI: tr.ConnectURI}
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
	ttl := time.Duration(secs) * time.Second
	if t.maxTTL > 0 && ttl > t.maxTTL+e.cfg.RefreshBefore {
		ttl = t.maxTTL + e.cfg.RefreshBefore
	}
	return &ExchangedToken{
		AccessToken: tr.AccessToken, TokenType: "Bearer", IssuedTokenType: tr.IssuedTokenType,
		Scope: tr.Scope, Expiry: now.Add(ttl),
	}, nil
}

// Transport returns an http.RoundTripper for calls to resource: it attaches
// a token exchanged from the request context's inbound token, and refuses
// (returns ErrPassthrough, sends nothing) any request whose URL or headers
// contain the inbound token. Requests must carry the context of the inbound
// request (req.WithContext). A 401 from the resource drops the exchanged
// token from the cache and sends the request once more with a token
// exchanged anew, when its body can be sent again (GetBody). base nil means
// http.DefaultTransport. With the Connection option the token is the
// person's token at a third-party service instead.
func (e *Exchanger) Transport(base http.RoundTripper, resource string, opts ...TransportOption) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &exchangeTransport{e: e, base: base}
	for _, o := range opts {
		o(t)
	}
	if t.connection != "" && resource == "" {
		// The AS finds the connection by its id, an RFC 8693 §2.1
		// audience (a logical name of the target service).
		t.target = target{name: "audience", value: t.connection, maxTTL: ConnectionCacheTTL}
		return t
	}
	res, err := metadata.CanonicalResource(resource)
	t.target, t.resErr = target{name: "resource", value: res}, err
	if t.connection != "" {
		t.target.maxTTL = ConnectionCacheTTL
	}
	return t
}

// TransportOption changes what Transport attaches.
type TransportOption func(*exchangeTransport)

// Connection makes Transport attach the person's token at the third-party
// service of the AS's connection id (connections[].id: GitHub, Google,
// Slack, ...), for a server that calls that service's API as the person.
// The exchange names the connection by Transport's resource (the
// connection's resource) or, when that is "", by audience=id. The token is
// cached per person (the inbound token's issuer and subject), not per
// inbound token, until shortly before it expires, for at most
// ConnectionCacheTTL. When the person has not connected that account (or
// must reconnect it) the request is not sent and RoundTrip returns an
// *ExchangeError whose ConnectRequired is true: answer the MCP request
// with ConnectURLRequired's URLRequired (WriteURLRequired).
func Connection(id string) TransportOption {
	return func(t *exchangeTransport) { t.connection = id }
}

// ConnectionCacheTTL bounds how long a connection's token is reused for
// one person without asking the AS, which checks that the person is still
// active and connected.
const ConnectionCacheTTL = 5 * time.Minute

// ConnectURLRequired returns the URLRequired answer for err when err is
// the AS's answer that the person must connect their account of
// connection first (ExchangeError.ConnectRequired); ok is false for any
// other error. subject names the person in ElicitationID (as a digest).
func ConnectURLRequired(err error, connection, subject string) (u URLRequired, ok bool) {
	var ee *ExchangeError
	if !errors.As(err, &ee) || !ee.ConnectRequired() {
		return URLRequired{}, false
	}
	sum := sha256.Sum256([]byte(subject))
	return URLRequired{
		URL:           ee.ConnectURI,
		ElicitationID: "connection-" + connection + "-" + base64.RawURLEncoding.EncodeToString(sum[:9]),
		Message:       "This tool needs your " + connection + " account, which is not connected.",
	}, true
}

type exchangeTransport struct {
	e    *Exchanger
	base http.RoundTripper
	// target is how the exchange names Transport's resource (canonical,
	// parsed once), or the connection; resErr why there is none.
	target target
	resErr error
	// connection is the AS's connection id (Connection), or "".
	connection string
}

// key is the cache key of a token for the request of ctx: per person for a
// connection, per inbound token otherwise.
func (t *exchangeTransport) key(ctx context.Context, inbound string) [32]byte {
	if t.connection != "" {
		if p, ok := PrincipalFromContext(ctx); ok && p.Subject != "" {
			return sha256.Sum256([]byte("connection\x00" + p.Issuer + "\x00" + p.Subject + "\x00" + t.target.name + "\x00" + t.target.value))
		}
	}
	return exchangeKey(inbound, t.target.value)
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
	key := t.key(req.Context(), inbound)
	tok, err := t.e.exchangeKeyed(req.Context(), key, inbound, t.target)
	if err != nil {
		closeBody()
		return nil, err
	}
	// A 401 from the resource drops the exchanged token from the cache and
	// the request is sent once more with a token exchanged anew.
	var retryErr error
	res, err := bearerretry.RoundTrip(t.base, req, tok, bearerretry.Tokens[*ExchangedToken]{
		Get: func(ctx context.Context) (*ExchangedToken, error) {
			tok, err := t.e.exchangeKeyed(ctx, key, inbound, t.target)
			retryErr = err
			return tok, err
		},
		Drop:  func(tok *ExchangedToken) { t.e.drop(key, tok) },
		Value: func(tok *ExchangedToken) string { return tok.AccessToken },
	})
	// A connection's token the service refused (the person disconnected,
	// or revoked it there) whose exchange anew says the person must
	// connect: that is the answer, not the service's 401.
	var ee *ExchangeError
	if err == nil && t.connection != "" && errors.As(retryErr, &ee) && ee.ConnectRequired() {
		_ = res.Body.Close()
		return nil, retryErr
	}
	return res, err
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
