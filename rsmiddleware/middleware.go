package rsmiddleware

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"strings"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcpauth/mcpauth/dpop"
	"github.com/mcpauth/mcpauth/internal/tracing"
	"github.com/mcpauth/mcpauth/metadata"
)

// MiddlewareConfig configures a Middleware.
type MiddlewareConfig struct {
	// Verifier checks tokens (required); usually a *Verifier.
	Verifier TokenVerifier
	// ResourceMetadataURL is the URL of this server's RFC 9728 document,
	// sent in every challenge (required; see ResourceMetadataURL()).
	ResourceMetadataURL string
	// Scopes maps requests to required scopes.
	Scopes Scopes
	// MaxBodyBytes bounds the JSON-RPC body read to find methods and tools
	// (only when Scopes has Methods or Tools). Larger bodies get 413.
	// Zero value: 4 MiB.
	MaxBodyBytes int64
	// Logger receives verification failures (never the token).
	// Zero value: slog.Default().
	Logger *slog.Logger
	// OnInsufficientScope, when set, is called before the 403
	// insufficient_scope answer to a request whose verified token lacks
	// scopes it needs, with the JSON-RPC body read to decide (nil when the
	// scopes did not need it). MCPFilter.AuditDenied audits such requests.
	OnInsufficientScope func(r *http.Request, p *Principal, body []byte)
	// OnRefused, when set, is called before every other refusal the
	// Middleware answers instead of passing the request on, with the
	// status of the answer. p is nil for a request refused before a token
	// was verified: no token, a malformed Authorization header, an
	// invalid, expired or wrong-audience token or DPoP proof (401, or 400
	// for RFC 6750 §3.1 invalid_request), or the AS unreachable (503).
	// Otherwise the request was refused for its form (a body that is not
	// JSON-RPC or not plain UTF-8 JSON, mirrored headers that differ from it, a body too large);
	// a body the Middleware read is readable again from r.Body.
	// MCPFilter.AuditRefused audits such requests.
	OnRefused func(r *http.Request, p *Principal, status int)
	// DPoP, when set, accepts DPoP-bound tokens under the DPoP scheme
	// (RFC 9449 §7) and adds a DPoP challenge beside the Bearer one. Nil:
	// the same with the defaults (dpop.DefaultAlgs, each proof usable once
	// at this process, not required) and the Verifier's resource URI as
	// the proofs' htu, when the Verifier names one (a *Verifier does); a
	// client that sent a proof to the AS holds a DPoP-bound token, which
	// a server refusing the scheme would lock out. A DPoP-bound token is
	// refused either way when it is sent as Bearer (§7.2).
	DPoP *DPoP
	// BearerOnly refuses the DPoP scheme when DPoP is nil, as before
	// DPoP-bound tokens were accepted by default.
	BearerOnly bool
	// TracerProvider starts the OpenTelemetry spans: a server span per
	// request that has none yet (continuing the caller's W3C traceparent),
	// and a span of the token's verification. Nil: the global provider
	// (otel.GetTracerProvider), which records nothing until a program sets
	// one.
	TracerProvider trace.TracerProvider
}

// resourceNamer is a TokenVerifier that names its resource URI.
type resourceNamer interface{ Resource() string }

// Middleware is the Bearer token guard of an MCP server.
type Middleware struct {
	v       TokenVerifier
	prmURL  string
	scopes  Scopes
	maxBody int64
	log     *slog.Logger
	denied  func(*http.Request, *Principal, []byte)
	refused func(*http.Request, *Principal, int)
	dpop    *DPoP
	traces  traces
}

// ResourceMetadataURL returns the path-inserted RFC 9728 §3.1 URL of the
// metadata of resource (canonicalised first).
func ResourceMetadataURL(resource string) (string, error) {
	c, err := metadata.CanonicalResource(resource)
	if err != nil {
		return "", err
	}
	return metadata.WellKnownURL(c, metadata.SuffixProtectedResource)
}

// NewMiddleware checks cfg and returns a Middleware.
func NewMiddleware(cfg MiddlewareConfig) (*Middleware, error) {
	if cfg.Verifier == nil {
		return nil, errors.New("rsmiddleware: MiddlewareConfig.Verifier is required")
	}
	if cfg.ResourceMetadataURL == "" {
		return nil, errors.New("rsmiddleware: MiddlewareConfig.ResourceMetadataURL is required")
	}
	m := &Middleware{v: cfg.Verifier, prmURL: cfg.ResourceMetadataURL, scopes: cfg.Scopes, maxBody: cfg.MaxBodyBytes, log: cfg.Logger,
		denied: cfg.OnInsufficientScope, refused: cfg.OnRefused, dpop: cfg.DPoP}
	if m.maxBody <= 0 {
		m.maxBody = 4 << 20
	}
	if rn, ok := cfg.Verifier.(resourceNamer); ok && m.dpop == nil && !cfg.BearerOnly && rn.Resource() != "" {
		dp, err := NewDPoP(DPoPConfig{PublicURL: rn.Resource(), JTIs: dpop.NewMemoryJTIs(0)})
		if err != nil {
			return nil, err
		}
		m.dpop = dp
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	m.traces = newTraces(cfg.TracerProvider)
	return m, nil
}

// Wrap returns next protected by the bearer token check:
//
//   - A CORS preflight (OPTIONS with Origin and Access-Control-Request-Method)
//     passes through unauthenticated.
//   - access_token in the query string is refused (400 invalid_request,
//     RFC 6750 §2.3 is not supported, per OAuth 2.1 and MCP).
//   - No token: 401 with resource_metadata and scope (RFC 9728 §5.1).
//   - Bad token: 401 error="invalid_token" (RFC 6750 §3.1).
//   - AS unreachable and no cached key can decide: 503 with Retry-After.
//   - Missing scopes for the request (base, method, tool, prompt,
//     resource; batch: union):
//     403 error="insufficient_scope" with every scope the request needs,
//     and only those, in one challenge.
//   - A POST whose scopes are read from the body and whose body is no
//     JSON-RPC 2.0 message: 400 with the JSON-RPC error -32700 (not JSON),
//     -32600 (JSON that is no Request or Response object, an empty batch)
//     or -32602 (a request whose params do not name its tool, prompt or
//     resource unambiguously), with the request's id when it can be read
//     (JSON-RPC 2.0 §5.1; a batch gets an array, §6). A batch of more
//     than MaxBatchRequests messages: 400 with -32600, id null, its
//     messages past the bound unread (and so before its scopes are
//     checked).
//   - A request of a stateless MCP revision (Stateless) whose scopes are
//     read from the body and whose Mcp-Method or Mcp-Name header is missing
//     or differs from the body: 400 with JSON-RPC error -32020
//     (ErrCodeHeaderMismatch) and the request's id; a batch, which that
//     revision does not have: 400 with -32600, id null.
//   - A POST whose scopes are read from the body and whose body is not
//     plain UTF-8 JSON (a charset other than UTF-8, a content coding,
//     several or a malformed Content-Type): 415 with JSON-RPC error -32600,
//     so that the server behind decodes the bytes that were authorized.
//
// On success the Principal (and, privately, the raw token for Exchanger) is
// in the request context, the Authorization header is removed, and the body
// is intact for next.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	h := m.wrap(next)
	if m.traces.off() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tp := m.traces.provider()
		if tp == nil || trace.SpanContextFromContext(r.Context()).IsValid() {
			h.ServeHTTP(w, r) // no tracing, or a server span of the caller's
			return
		}
		tracing.ServeSpan(tp, w, r, h, tracing.HandlerConfig{})
	})
}

func (m *Middleware) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsPreflight(r) {
			next.ServeHTTP(w, r)
			return
		}
		if r.URL.RawQuery != "" && r.URL.Query().Has("access_token") {
			m.forScheme(SchemeBearer).challenge(w, r, m.scopes.Base, ErrCodeInvalidRequest, "access tokens are accepted in the Authorization header only")
			return
		}
		values := r.Header.Values("Authorization")
		if len(values) > 1 {
			m.forScheme(SchemeBearer).challenge(w, r, m.scopes.Base, ErrCodeInvalidRequest, "more than one Authorization header")
			return
		}
		var header string
		if len(values) == 1 {
			header = values[0]
		}
		scheme, token, err := ParseAuthorizationScheme(header)
		if scheme == SchemeDPoP && m.dpop == nil {
			// Another scheme than the one this server accepts.
			token, err = "", ErrNoToken
		}
		m := m.forScheme(scheme)
		switch {
		case errors.Is(err, ErrNoToken):
			m.challenge(w, r, m.scopes.Base, "", "")
			return
		case err != nil:
			m.challenge(w, r, m.scopes.Base, ErrCodeInvalidRequest, "malformed Authorization header")
			return
		}
		vctx, span := m.traces.start(r.Context(), "verify token")
		p, err := m.v.Verify(vctx, token)
		if err == nil {
			err = m.dpop.Check(vctx, r, scheme, token, p)
			endVerify(span, err)
			var de *DPoPError
			if errors.As(err, &de) {
				m.log.Debug("rsmiddleware: DPoP refused", "err", err)
				if de.Code == ErrCodeUseDPoPNonce {
					w.Header().Set("DPoP-Nonce", m.dpop.Nonce())
				}
				m.forScheme(de.Scheme).challenge(w, r, m.scopes.Base, de.Code, de.Description)
				return
			}
		} else {
			endVerify(span, err)
		}
		if err != nil {
			if errors.Is(err, ErrUnavailable) {
				m.log.Warn("rsmiddleware: cannot verify token", "err", err)
				m.refuse(r, nil, http.StatusServiceUnavailable)
				w.Header().Set("Retry-After", "5")
				http.Error(w, "authorization server unavailable", http.StatusServiceUnavailable)
				return
			}
			m.log.Debug("rsmiddleware: token refused", "err", err)
			m.challenge(w, r, m.scopes.Base, ErrCodeInvalidToken, "the access token is invalid, expired, or not for this resource")
			return
		}
		need := m.scopes.Base
		var body []byte
		if m.scopes.needsBody() && r.Method == http.MethodPost && r.Body != nil && r.Body != http.NoBody {
			if msg := undecodedBody(r.Header); msg != "" {
				// The scopes are read from these bytes as UTF-8 JSON; a
				// server that decodes them otherwise (Express's JSON
				// parser honours charset=utf-7 and inflates gzip) would
				// execute another request than the one authorized.
				m.refuse(r, p, http.StatusUnsupportedMediaType)
				writeRPCError(w, http.StatusUnsupportedMediaType, "null", -32600, msg)
				return
			}
			body, err = readBody(r, m.maxBody)
			if err != nil {
				m.refuse(r, p, bodyStatus(err))
				bodyError(w, err)
				return
			}
			calls, err := peekJSONRPC(body)
			if errors.Is(err, errBatchTooLong) {
				// Refused as MCPFilter refuses it, its messages past
				// MaxBatchRequests unread: -32600 with id null.
				text := batchTooLongText
				if Stateless(r) {
					text = noBatchesText
				}
				r.Body = newBufferedBody(body, false, r.Body)
				m.refuse(r, p, http.StatusBadRequest)
				writeRPCError(w, http.StatusBadRequest, "null", codeInvalidRequest, text)
				return
			}
			if err != nil {
				r.Body = newBufferedBody(body, false, r.Body)
				m.refuse(r, p, http.StatusBadRequest)
				writeRPCAnswer(w, http.StatusBadRequest, errorAnswer(body, 0, ""))
				return
			}
			stateless := Stateless(r)
			if stateless && isBatch(body) {
				// Not a message of this revision (batchesRefused), as
				// MCPFilter answers it.
				r.Body = newBufferedBody(body, true, r.Body)
				m.refuse(r, p, http.StatusBadRequest)
				writeRPCError(w, http.StatusBadRequest, "null", codeInvalidRequest, noBatchesText)
				return
			}
			if stateless && !checkMirroredHeaders(r, body, calls) {
				// The scopes were read from the body; a request whose
				// headers say otherwise could be routed or logged by an
				// intermediary as something it is not. The answer has the
				// request's id (MCP Streamable HTTP, "Server Validation").
				r.Body = newBufferedBody(body, true, r.Body)
				m.refuse(r, p, http.StatusBadRequest)
				writeRPCAnswer(w, http.StatusBadRequest, errorAnswer(body, ErrCodeHeaderMismatch, "Header mismatch: Mcp-Method and Mcp-Name must mirror the request body"))
				return
			}
			need = m.scopes.required(calls)
			r.Body = newBufferedBody(body, true, r.Body)
		}
		if len(p.MissingScopes(need)) > 0 {
			if m.denied != nil {
				m.denied(r, p, body)
			}
			m.challenge(w, r, need, ErrCodeInsufficientScope, "the access token lacks scopes this request needs")
			return
		}
		r = r.WithContext(ContextWithPrincipal(r.Context(), p, token))
		r.Header.Del("Authorization")
		r.Header.Del("DPoP")
		next.ServeHTTP(w, r)
	})
}

// undecodedBody returns why the body of a request with header h may not
// be read as the UTF-8 JSON text it is forwarded as, or "" when it may:
// more than one Content-Type, one that does not parse, a charset other
// than UTF-8 (RFC 8259 §8.1: JSON exchanged between systems is UTF-8;
// application/json defines no charset parameter, RFC 8259 §11), or a
// Content-Encoding other than identity (RFC 9110 §8.4; an MCP client sends
// none).
func undecodedBody(h http.Header) string {
	switch cts := h.Values("Content-Type"); {
	case len(cts) > 1:
		return "Invalid Request: more than one Content-Type"
	case len(cts) == 1:
		_, params, err := mime.ParseMediaType(cts[0])
		if err != nil {
			return "Invalid Request: malformed Content-Type"
		}
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
			return "Invalid Request: JSON-RPC messages are UTF-8 (RFC 8259 §8.1)"
		}
	}
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return "Invalid Request: content codings are not accepted"
			}
		}
	}
	return ""
}

// IsPreflight reports whether r is a CORS preflight (Fetch Standard,
// CORS protocol): OPTIONS with Origin and Access-Control-Request-Method.
// Middleware passes it on without a token, and SessionBinding and
// MCPFilter pass it on without a Principal, so that the handler (or the
// server behind a gateway) answers it.
func IsPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// readBody reads the body, in one allocation when the Content-Length is
// known, and at most max+1 bytes of it: a longer one is errBodyTooLarge.
func readBody(r *http.Request, max int64) ([]byte, error) {
	var b []byte
	var err error
	if n := r.ContentLength; n > 0 && n <= max {
		b = make([]byte, n)
		_, err = io.ReadFull(r.Body, b)
	} else {
		b, err = io.ReadAll(io.LimitReader(r.Body, max+1))
	}
	// A body past max, or past the limit of an http.MaxBytesReader the
	// server put around it (a chunked body has no Content-Length to refuse
	// it by first), is too large rather than unreadable.
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) || err == nil && int64(len(b)) > max {
		return nil, errBodyTooLarge
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

// refuse tells OnRefused of a refusal.
func (m *Middleware) refuse(r *http.Request, p *Principal, status int) {
	if m.refused != nil {
		m.refused(r, p, status)
	}
}

// errBodyTooLarge: the request body is larger than allowed.
var errBodyTooLarge = errors.New("rsmiddleware: request body too large")

// bodyError answers a request whose body readBody could not return: 413
// when it is too large (RFC 9110 §15.5.14), 408 when it did not arrive
// before the connection's read deadline (§15.5.9), 400 otherwise, each with
// a JSON-RPC error of id null (JSON-RPC 2.0 §5.1: the id cannot be read):
// -32600 Invalid Request for a body too large or late, -32700 Parse error
// for one that could not be read.
func bodyError(w http.ResponseWriter, err error) {
	if errors.Is(err, errBodyTooLarge) {
		WriteBodyTooLarge(w)
		return
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// A read deadline the server set on the connection (RFC 9110
		// §15.5.9).
		writeRPCError(w, http.StatusRequestTimeout, "null", -32600, "Invalid Request: the request body did not arrive in time")
		return
	}
	writeRPCError(w, http.StatusBadRequest, "null", -32700, "Parse error: the request body could not be read")
}

// WriteBodyTooLarge answers 413 (RFC 9110 §15.5.14) with the JSON-RPC error
// -32600 Invalid Request, id null, as the Middleware and MCPFilter answer
// a request body larger than their MaxBodyBytes.
func WriteBodyTooLarge(w http.ResponseWriter) {
	writeRPCError(w, http.StatusRequestEntityTooLarge, "null", -32600, "Invalid Request: the request body is larger than the server accepts")
}

// bodyStatus is the status bodyError answers err with.
func bodyStatus(err error) int {
	if errors.Is(err, errBodyTooLarge) {
		return http.StatusRequestEntityTooLarge
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return http.StatusRequestTimeout
	}
	return http.StatusBadRequest
}

// bufferedBody serves a request body read whole by readBody and closes the
// original; a handler further in (MCPFilter after Middleware) takes the
// bytes from it instead of reading and checking them again.
type bufferedBody struct {
	bytes.Reader
	b []byte
	// peeked: b passed peekJSONRPC.
	peeked bool
	c      io.Closer
}

func newBufferedBody(b []byte, peeked bool, orig io.Closer) *bufferedBody {
	bb := &bufferedBody{b: b, peeked: peeked, c: orig}
	bb.Reset(b)
	return bb
}

func (bb *bufferedBody) Close() error { return bb.c.Close() }

// unreadBody returns the body of r when it is a bufferedBody nothing has
// read from yet.
func unreadBody(r *http.Request) (*bufferedBody, bool) {
	bb, ok := r.Body.(*bufferedBody)
	if !ok || bb.Len() != len(bb.b) {
		return nil, false
	}
	return bb, true
}

// schemed is the Middleware answering a request made under one scheme:
// the error goes in that scheme's challenge (RFC 9449 §7.2).
type schemed struct {
	*Middleware
	scheme string
}

func (m *Middleware) forScheme(scheme string) schemed { return schemed{m, scheme} }

// challenge answers with a Bearer challenge, and with DPoP configured a
// DPoP one too (only the DPoP one when DPoP is required): the error, if
// any, in the challenge of the scheme the request used, listed first.
//
// Every challenge but insufficient_scope (which OnInsufficientScope hears
// of) refuses a request whose token was not verified: OnRefused hears of it.
func (m schemed) challenge(w http.ResponseWriter, r *http.Request, scopes []string, code, desc string) {
	if code != ErrCodeInsufficientScope {
		m.refuse(r, nil, statusOf[code])
	}
	bearer := Challenge{ResourceMetadata: m.prmURL, Scopes: scopes}
	if m.dpop == nil {
		bearer.Error, bearer.Description = code, desc
		writeChallenges(w, r, bearer)
		return
	}
	dp := Challenge{Scheme: SchemeDPoP, Algs: m.dpop.algs, ResourceMetadata: m.prmURL, Scopes: scopes}
	if m.dpop.required {
		dp.Error, dp.Description = code, desc
		writeChallenges(w, r, dp)
		return
	}
	if m.scheme == SchemeDPoP {
		dp.Error, dp.Description = code, desc
		writeChallenges(w, r, dp, bearer)
		return
	}
	bearer.Error, bearer.Description = code, desc
	writeChallenges(w, r, bearer, dp)
}

// endVerify ends the span of a token's verification, an error status
// naming the refusal's kind only (never the token or the cause's text).
func endVerify(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		msg := "token refused"
		if errors.Is(err, ErrUnavailable) {
			msg = "authorization server unavailable"
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End()
}

// traces is the TracerProvider option of the Middleware and MCPFilter: an
// explicit provider (nil when it is the no-op one), or the global one,
// looked up per request so that a program may set it after building them.
type traces struct {
	tp     trace.TracerProvider
	tracer trace.Tracer
	global bool
}

func newTraces(tp trace.TracerProvider) traces {
	if tp == nil {
		return traces{global: true}
	}
	if !tracing.Enabled(tp) {
		return traces{}
	}
	return traces{tp: tp, tracer: tp.Tracer(tracing.ScopeName)}
}

// off reports that no span is ever started.
func (t traces) off() bool { return t.tp == nil && !t.global }

// provider returns the provider of this request; nil: none records.
func (t traces) provider() trace.TracerProvider {
	if t.global {
		return tracing.Global()
	}
	return t.tp
}

// start starts a span named name under ctx's; without a provider it
// returns ctx and a no-op span, allocating nothing.
func (t traces) start(ctx context.Context, name string) (context.Context, trace.Span) {
	if t.tracer != nil {
		return t.tracer.Start(ctx, name)
	}
	if t.global {
		if tp := tracing.Global(); tp != nil {
			return tp.Tracer(tracing.ScopeName).Start(ctx, name)
		}
	}
	return ctx, noopSpan
}

// tracedClient returns c (a copy of the caller's, see noRedirects) with a
// client span per request, named "authorization server"; with tracing off
// c unchanged.
func tracedClient(c *http.Client, t traces) *http.Client {
	const name = "authorization server"
	switch {
	case t.off():
		return c
	case t.global:
		base := c.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		c.Transport = &globalTransport{base: base, name: name}
	default:
		c.Transport = tracing.Transport(t.tp, c.Transport, name)
	}
	return c
}

// globalTransport starts its client spans with the global provider of the
// moment, so that a program may set it after building the Verifier.
type globalTransport struct {
	base http.RoundTripper
	name string
}

func (g *globalTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tp := tracing.Global()
	if tp == nil {
		return g.base.RoundTrip(req)
	}
	return tracing.Transport(tp, g.base, g.name).RoundTrip(req)
}

// noopSpan stands for the spans not started when tracing is off.
var noopSpan trace.Span = noop.Span{}
