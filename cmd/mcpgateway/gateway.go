package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcpauth/mcpauth/dpop"
	"github.com/mcpauth/mcpauth/internal/auditchain"
	"github.com/mcpauth/mcpauth/internal/bearerretry"
	"github.com/mcpauth/mcpauth/internal/tracing"
	"github.com/mcpauth/mcpauth/metadata"
	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// Gateway is the authorizing reverse proxy: rsmiddleware's Middleware,
// SessionBinding and MCPFilter in front of a forwarder to the upstream.
type Gateway struct {
	cfg     *Config
	handler http.Handler
	audit   io.Closer  // the audit file, if any
	metrics *gwMetrics // nil without metrics.listen
	// chain chains the audit lines (audit.chain_key); nil without.
	chain *auditchain.Writer
	// auditDest is what the audit lines go through to audit.file when
	// they are not chained, so that ReopenAudit can switch files.
	auditDest *swapWriter
	// stopPins ends the pins file's watch; nil without pins.
	stopPins chan struct{}
}

// ChainPurpose is the HKDF info (RFC 5869 §3.2) under which the audit
// chain's key is derived from audit.chain_key.
const ChainPurpose = "mcpgateway audit chain"

// swapWriter writes to w, which Set replaces between two Writes.
type swapWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *swapWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *swapWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

// pinsPollInterval is how often a running gateway checks whether the pins
// file changed.
var pinsPollInterval = time.Second

// ReloadPins reads the pins file again (SIGHUP); without pins it does
// nothing. A file that cannot be parsed leaves the pins as they were.
func (g *Gateway) ReloadPins() error {
	if g.cfg.pins == nil {
		return nil
	}
	return g.cfg.pins.Reload()
}

// Options are the parts of a Gateway that tests and the command choose.
type Options struct {
	Logger *slog.Logger
	// HTTPClient reaches the AS (metadata, JWKS, token endpoint). Nil: a
	// client with a 10 s timeout.
	HTTPClient *http.Client
	// AuditWriter overrides the audit destination (audit.file or stderr).
	AuditWriter io.Writer
	// TracerProvider records the OpenTelemetry spans: a server span per
	// request, the token's verification, the policy, the calls to the AS
	// (client spans, the trace context sent along) and the upstream hop.
	// Nil: no spans.
	TracerProvider trace.TracerProvider
}

// NewGateway wires cfg. It does not contact the AS or the upstream.
func NewGateway(cfg *Config, o Options) (*Gateway, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	g := &Gateway{cfg: cfg}
	tp := o.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	o.TracerProvider = tp
	if tracing.Enabled(tp) {
		// The calls to the AS (metadata, JWKS, introspection, exchange,
		// client credentials) are client spans, their trace context sent
		// along for the AS to continue.
		c := &http.Client{Timeout: 10 * time.Second}
		if o.HTTPClient != nil {
			*c = *o.HTTPClient
		}
		c.Transport = tracing.Transport(tp, c.Transport, "")
		o.HTTPClient = c
	}
	if cfg.IssuerInternal != "" {
		base := http.DefaultTransport
		timeout := 10 * time.Second
		if o.HTTPClient != nil {
			if o.HTTPClient.Transport != nil {
				base = o.HTTPClient.Transport
			}
			timeout = o.HTTPClient.Timeout
		}
		rt, err := rsmiddleware.RewriteOrigins(base, map[string]string{cfg.Issuer: cfg.IssuerInternal})
		if err != nil {
			return nil, err
		}
		o.HTTPClient = &http.Client{Transport: rt, Timeout: timeout}
	}
	// o.HTTPClient already records the client spans of the calls to the AS.
	vcfg := rsmiddleware.Config{Issuer: cfg.Issuer, Resource: cfg.Resource, HTTPClient: o.HTTPClient, Logger: o.Logger,
		TracerProvider: noop.NewTracerProvider()}
	if i := cfg.Introspection; i != nil {
		vcfg.Introspection = &rsmiddleware.ClientCredentials{ClientID: i.ClientID, ClientSecret: i.ClientSecret}
	}
	verifier, err := rsmiddleware.NewVerifier(vcfg)
	if err != nil {
		return nil, err
	}
	prmURL, err := rsmiddleware.ResourceMetadataURL(cfg.Resource)
	if err != nil {
		return nil, err
	}
	scopes := cfg.Scopes.rs()
	var audit rsmiddleware.AuditFunc
	if cfg.Audit.Format != "off" {
		w := o.AuditWriter
		if w == nil && cfg.Audit.File != "" {
			f, err := os.OpenFile(cfg.Audit.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			if err != nil {
				return nil, fmt.Errorf("audit.file: %w", err)
			}
			g.audit, w = f, f
		}
		if w == nil {
			w = os.Stderr
		}
		if key := cfg.Audit.ChainKey; key != "" {
			k, err := auditchain.DeriveKey([]byte(key), ChainPurpose)
			if err != nil {
				return nil, fmt.Errorf("audit.chain_key: %w", err)
			}
			format := auditchain.JSON
			if cfg.Audit.Format == "text" {
				format = auditchain.Text
			}
			g.chain = auditchain.NewWriter(w, k, format)
			w = g.chain.Chained()
		} else if g.audit != nil {
			g.auditDest = &swapWriter{w: w}
			w = g.auditDest
		}
		audit = rsmiddleware.AuditLog(w, cfg.Audit.Format)
	}
	met := g.newMetrics()
	if met != nil {
		// The metrics count the audit's events, also with audit.format off.
		write := audit
		audit = func(e rsmiddleware.AuditEvent) {
			met.audit(e)
			if write != nil {
				write(e)
			}
		}
	}
	var approval *rsmiddleware.Approval
	if a := cfg.Approval; a != nil {
		// o.HTTPClient reaches the AS (issuer_internal) and records client
		// spans, as for introspection.
		if approval, err = rsmiddleware.NewApproval(a.rs(cfg.Issuer, o.HTTPClient)); err != nil {
			return nil, err
		}
	}
	filter := rsmiddleware.NewMCPFilter(rsmiddleware.MCPFilterConfig{
		Scopes: scopes, Audit: audit, TenantClaim: cfg.TenantClaim,
		MaxBodyBytes: cfg.Limits.MaxRequestBytes, MaxResponseBytes: cfg.Limits.MaxResponseBytes, Logger: o.Logger,
		Policy: cfg.policy, RateLimits: cfg.limits, Pins: cfg.pins, Screening: cfg.screening, Approval: approval, TracerProvider: tp,
	})
	if cfg.pins != nil {
		g.stopPins = make(chan struct{})
		go cfg.pins.Watch(pinsPollInterval, g.stopPins)
	}
	// DPoP-bound tokens are accepted by default (RFC 9449 §7): a client
	// that sent a proof to the AS holds one, and refusing the scheme would
	// lock it out. dpop.required refuses other tokens.
	var dcfg DPoPConfig
	if cfg.DPoP != nil {
		dcfg = *cfg.DPoP
	}
	// The resource URI is the gateway's public URL: the htu of proofs.
	dp, err := rsmiddleware.NewDPoP(rsmiddleware.DPoPConfig{
		PublicURL: cfg.Resource, Required: dcfg.Required, Algs: dcfg.Algs, JTIs: dpop.NewMemoryJTIs(0),
	})
	if err != nil {
		return nil, err
	}
	onDenied, onRefused := filter.AuditDenied, filter.AuditRefused
	if met != nil {
		onDenied = func(r *http.Request, p *rsmiddleware.Principal, body []byte) {
			met.insufficientScope()
			filter.AuditDenied(r, p, body)
		}
		onRefused = func(r *http.Request, p *rsmiddleware.Principal, status int) {
			met.refused(r, p, status)
			filter.AuditRefused(r, p, status)
		}
	}
	mw, err := rsmiddleware.NewMiddleware(rsmiddleware.MiddlewareConfig{
		Verifier: verifier, ResourceMetadataURL: prmURL, Scopes: scopes,
		MaxBodyBytes: cfg.Limits.MaxRequestBytes, Logger: o.Logger,
		OnInsufficientScope: onDenied, OnRefused: onRefused, DPoP: dp, TracerProvider: tp,
	})
	if err != nil {
		return nil, err
	}
	// The MCP Go SDK's client registers again (DCR) for a step-up, so its
	// client ID changes within a session: sessions are bound to the user.
	// The binding is always signed: the upstream knows sessions this
	// instance never saw (another instance's, or those from before a
	// restart), so an unsigned ID it does not know must not pass.
	key := []byte(cfg.SessionKey)
	if len(key) == 0 {
		key = make([]byte, rsmiddleware.MinSessionKeyBytes)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		o.Logger.Info("mcpgateway: no session_key, so a random one: sessions end when the gateway restarts and are not shared between instances (clients get 404 and start a new session, as MCP requires); set session_key, the same at every instance, to keep them")
	}
	binding := &rsmiddleware.SessionBinding{Owner: func(p *rsmiddleware.Principal) string { return p.Subject }, Key: key}

	proxy, err := newProxy(cfg, o, met)
	if err != nil {
		return nil, err
	}
	doc, err := rsmiddleware.NewProtectedResourceMetadata(cfg.Resource, []string{cfg.Issuer}, cfg.allScopes())
	if err != nil {
		return nil, err
	}
	dp.AddToPRM(&doc)
	mux := http.NewServeMux()
	if err := rsmiddleware.MountPRM(mux, doc, true); err != nil {
		return nil, err
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok\n")
	})
	path := "/"
	if u, _ := url.Parse(cfg.Resource); u.Path != "" {
		path = u.Path
	}
	if cfg.Identity != nil {
		signer, err := newIdentitySigner(cfg, o.Logger)
		if err != nil {
			return nil, err
		}
		mux.HandleFunc("GET "+rsmiddleware.IdentityJWKSPath, signer.serveJWKS)
		proxy = signer.wrap(proxy)
	}
	limit, bodyTimeout := cfg.Limits.MaxRequestBytes, cfg.Limits.ReadBodyTimeout
	chain := mw.Wrap(binding.Wrap(filter.Wrap(proxy)))
	mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// MCP Streamable HTTP has POST, GET and DELETE (and browsers'
		// CORS preflights); only a POST's body is JSON-RPC, and only it is
		// read for scopes, so no other method or body is passed on for a
		// server to read.
		switch r.Method {
		case http.MethodPost, http.MethodGet, http.MethodDelete, http.MethodOptions:
		default:
			w.Header().Set("Allow", "POST, GET, DELETE, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.Method != http.MethodPost && r.ContentLength != 0 {
			http.Error(w, r.Method+" requests have no body here", http.StatusBadRequest)
			return
		}
		if r.ContentLength > limit {
			rsmiddleware.WriteBodyTooLarge(w)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = bodyDeadline(w, r, bodyTimeout)
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		chain.ServeHTTP(w, r)
	}))
	g.handler = tracing.Handler(tp, mux, tracing.HandlerConfig{Carrier: metaCarrier(path, limit, bodyTimeout)})
	return g, nil
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.handler.ServeHTTP(w, r) }

// newMetrics makes the gateway's metrics when metrics.listen is set, the
// tool label knowing the tools and prompts of scopes from the start.
func (g *Gateway) newMetrics() *gwMetrics {
	if g.cfg.Metrics.Listen == "" {
		return nil
	}
	var names []string
	for _, m := range []map[string][]string{g.cfg.Scopes.Tools, g.cfg.Scopes.Prompts} {
		for k := range m {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	g.metrics = newMetrics(names)
	return g.metrics
}

// MetricsHandler serves the Prometheus metrics (GET /metrics on
// metrics.listen); nil without metrics.listen.
func (g *Gateway) MetricsHandler() http.Handler {
	if g.metrics == nil {
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", g.metrics.Handler())
	return mux
}

// ReopenAudit opens audit.file anew (after a rotation moved it away) and
// writes the next audit lines there; with audit.chain_key the new file
// begins with a start line naming the last chain value of the old one.
// Without audit.file it does nothing.
func (g *Gateway) ReopenAudit() error {
	if g.audit == nil {
		return nil
	}
	f, err := os.OpenFile(g.cfg.Audit.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit.file: %w", err)
	}
	if g.chain != nil {
		err = g.chain.Rotate(f)
	} else {
		g.auditDest.set(f)
	}
	old := g.audit
	g.audit = f
	_ = old.Close()
	return err
}

// Close releases the audit file.
func (g *Gateway) Close() error {
	if g.stopPins != nil {
		close(g.stopPins)
		g.stopPins = nil
	}
	if g.audit != nil {
		return g.audit.Close()
	}
	return nil
}

// Server returns the http.Server of the configured limits.
func (g *Gateway) Server() *http.Server {
	l := g.cfg.Limits
	return &http.Server{
		Addr:              g.cfg.Listen,
		Handler:           g,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		// No read or write timeout: event streams stay open as long as the
		// client and the upstream keep them.
	}
}

func newProxy(cfg *Config, o Options, met *gwMetrics) (http.Handler, error) {
	target, err := url.Parse(cfg.Upstream)
	if err != nil {
		return nil, err
	}
	var base http.RoundTripper = newUpstreamTransport(cfg.Limits, target.Scheme)
	if met != nil {
		base = timedUpstream{base: base, obs: met.upstream}
		if a := cfg.UpstreamAuth; a != nil && a.Exchange != nil {
			o.HTTPClient = met.exchangeClient(o.HTTPClient)
		}
	}
	transport, err := upstreamTransport(cfg, o, base)
	if err != nil {
		return nil, err
	}
	var tracer trace.Tracer
	if tracing.Enabled(o.TracerProvider) {
		tracer = tracing.Tracer(o.TracerProvider)
	}
	return &forwarder{
		tracer:    tracer,
		target:    target,
		transport: transport,
		refused: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
				// The upstream refused the gateway's own credentials: its
				// challenge is not the client's business.
				return errUpstreamRefused
			}
			return nil
		},
		onError: func(w http.ResponseWriter, r *http.Request, body []byte, err error) {
			status, msg := http.StatusBadGateway, "mcpgateway: the MCP server behind the gateway is unreachable"
			reason := upstreamUnreachable
			var ne net.Error
			switch {
			case errors.Is(err, errUpstreamRefused):
				msg, reason = "mcpgateway: the MCP server refused the gateway's credentials", upstreamRefused
			case errors.Is(err, errUpstreamStatus):
				msg, reason = "mcpgateway: the MCP server answered with an invalid status code", upstreamBadStatus
			case errors.Is(err, rsmiddleware.ErrUnavailable), isTokenError(err):
				msg, reason = "mcpgateway: the gateway could not obtain a token for the MCP server", upstreamToken
			case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
				status, msg, reason = http.StatusGatewayTimeout, "mcpgateway: the MCP server did not answer in time", upstreamTimeout
			case errors.Is(err, context.Canceled):
				return // the client went away
			}
			if met != nil {
				met.upstreamError(reason)
			}
			o.Logger.Warn("mcpgateway: upstream request failed", "upstream", cfg.Upstream, "err", err)
			writeRPCError(w, status, requestID(body), msg)
		},
	}, nil
}

// readAll reads the request body in one buffer of its declared length.
func readAll(r *http.Request) ([]byte, error) {
	if n := r.ContentLength; n > 0 {
		b := make([]byte, n)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, err
		}
		// A body longer than declared is an error, as the server's own
		// reader would report it.
		if m, _ := r.Body.Read(make([]byte, 1)); m > 0 {
			return nil, errors.New("mcpgateway: request body longer than its Content-Length")
		}
		return b, nil
	}
	return io.ReadAll(r.Body)
}

// copyBufferPool lends the forwarder its 32 KiB copy buffers.
var copyBufferPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

var errUpstreamRefused = errors.New("mcpgateway: upstream answered 401/403")

// requestID returns the id of the single JSON-RPC request in body, or null.
func requestID(body []byte) json.RawMessage {
	if body == nil {
		return json.RawMessage("null")
	}
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &m) != nil || len(m.ID) == 0 {
		return json.RawMessage("null")
	}
	return m.ID
}

// writeRPCError answers a JSON-RPC 2.0 error (-32603, internal error: the
// request was valid, the gateway could not complete it).
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, msg string) {
	writeRPCErrorCode(w, status, id, -32603, msg)
}

// writeUnreadableBody answers a POST to the MCP endpoint whose body could
// not be read: 400 with the JSON-RPC error -32700, id null (JSON-RPC 2.0
// §5.1: the id cannot be read), as rsmiddleware answers one.
func writeUnreadableBody(w http.ResponseWriter) {
	writeRPCErrorCode(w, http.StatusBadRequest, json.RawMessage("null"), -32700, "Parse error: the request body could not be read")
}

// writeRPCErrorCode answers a JSON-RPC 2.0 error Response object (§5.1)
// of code, application/json.
func writeRPCErrorCode(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": msg},
	})
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func isTokenError(err error) bool {
	var re *oauth2.RetrieveError
	var ee *rsmiddleware.ExchangeError
	return errors.As(err, &re) || errors.As(err, &ee) || errors.Is(err, errTokenEndpoint)
}

var errTokenEndpoint = errors.New("mcpgateway: cannot discover the token endpoint")

// upstreamTransport adds the gateway's own credentials, when configured.
func upstreamTransport(cfg *Config, o Options, base http.RoundTripper) (http.RoundTripper, error) {
	a := cfg.UpstreamAuth
	if a == nil {
		return base, nil
	}
	if g := a.Exchange; g != nil {
		ex, err := rsmiddleware.NewExchanger(rsmiddleware.ExchangeConfig{
			Issuer: cfg.Issuer, ClientID: g.ClientID, ClientSecret: g.ClientSecret, Scopes: g.Scopes, HTTPClient: o.HTTPClient,
		})
		if err != nil {
			return nil, err
		}
		return ex.Transport(base, g.Resource), nil
	}
	g := a.ClientCredentials
	return &ccTransport{cfg: cfg, g: g, base: base, client: o.HTTPClient}, nil
}

// ccTransport attaches an RFC 6749 §4.4 client credentials token of the
// gateway, for the upstream's resource (RFC 8707), reused until it expires
// or the upstream refuses it. A 401 from the upstream (RFC 6750 §3.1
// invalid_token: revoked, or signed by a key it no longer trusts) drops the
// token; the request is sent once more with a new one when its body can be
// sent again, and the second answer, 401 or not, is passed on (a second
// 401 drops the new token too). The AS metadata is fetched once; while that
// fails, requests fail at once and the next attempt waits a backoff (1 s,
// doubling up to 30 s) instead of every request asking an AS that is down.
type ccTransport struct {
	cfg    *Config
	g      *GrantConfig
	base   http.RoundTripper
	client *http.Client
	now    func() time.Time // zero value time.Now

	mu      sync.Mutex
	cc      *clientcredentials.Config // nil until the metadata is fetched
	tok     *oauth2.Token
	retryAt time.Time // no metadata fetch before then
	backoff time.Duration
	metaErr error // the last metadata failure
}

const (
	metadataBackoffMin = time.Second
	metadataBackoffMax = 30 * time.Second
)

func (t *ccTransport) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}

// token returns the cached token, or a new one; the lock held while it is
// fetched makes concurrent requests wait for one fetch instead of each
// doing its own.
func (t *ccTransport) token(ctx context.Context) (*oauth2.Token, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tok.Valid() {
		return t.tok, nil
	}
	client := t.client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	if t.cc == nil {
		if now := t.clock(); now.Before(t.retryAt) {
			return nil, t.metaErr
		}
		m, err := metadata.FetchAuthorizationServerMetadata(ctx, client, t.cfg.Issuer)
		if err != nil || m.TokenEndpoint == "" {
			t.backoff = min(max(2*t.backoff, metadataBackoffMin), metadataBackoffMax)
			t.retryAt = t.clock().Add(t.backoff)
			t.metaErr = fmt.Errorf("%w: %v", errTokenEndpoint, err)
			return nil, t.metaErr
		}
		t.backoff, t.metaErr = 0, nil
		t.cc = &clientcredentials.Config{
			ClientID: t.g.ClientID, ClientSecret: t.g.ClientSecret, TokenURL: m.TokenEndpoint,
			Scopes: t.g.Scopes, EndpointParams: url.Values{"resource": {t.g.Resource}}, AuthStyle: oauth2.AuthStyleInHeader,
		}
	}
	// The token outlives this request: it is fetched with a context of its
	// own (the client's timeout bounds it).
	tok, err := t.cc.Token(context.WithValue(context.Background(), oauth2.HTTPClient, client))
	if err != nil {
		return nil, err
	}
	t.tok = tok
	return tok, nil
}

// drop forgets tok, if it is still the cached token.
func (t *ccTransport) drop(tok *oauth2.Token) {
	t.mu.Lock()
	if t.tok == tok {
		t.tok = nil
	}
	t.mu.Unlock()
}

func (t *ccTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.token(req.Context())
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return bearerretry.RoundTrip(t.base, req, tok, bearerretry.Tokens[*oauth2.Token]{
		Get:   t.token,
		Drop:  t.drop,
		Value: func(tok *oauth2.Token) string { return tok.AccessToken },
	})
}

// bodyDeadline bounds the time r's body takes to arrive (the server has no
// read timeout, which would cut event streams): a read deadline on the
// connection, lifted once the body is read to its end. A body that does not
// arrive in time fails to read; one the handler does not read holds the
// connection until the deadline at most, as the server discards it.
func bodyDeadline(w http.ResponseWriter, r *http.Request, d time.Duration) io.ReadCloser {
	rc := http.NewResponseController(w)
	if d <= 0 || rc.SetReadDeadline(time.Now().Add(d)) != nil {
		return r.Body
	}
	return &deadlineBody{ReadCloser: r.Body, rc: rc, left: r.ContentLength}
}

// deadlineBody lifts the read deadline of its connection when the body
// has been read: its Content-Length reached, or its end (chunked).
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	left int64 // bytes still due; -1 when unknown
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left >= 0 {
		b.left -= int64(n)
	}
	if !b.done && (err == io.EOF || b.left == 0) {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
