package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpauth/mcpauth/internal/tracing"
)

// forwarder sends each request to the upstream and copies the answer back:
// the part of a reverse proxy that MCP Streamable HTTP (RFC 9112 messages,
// JSON and text/event-stream answers) needs, in one pass and without the
// per-request timers, traces and header copies of httputil.ReverseProxy.
//
//   - Hop-by-hop headers (RFC 9110 §7.6.1: Connection and the fields it
//     names, Keep-Alive, Proxy-Connection, Proxy-Authenticate,
//     Proxy-Authorization, TE, Trailer, Transfer-Encoding, Upgrade) are
//     removed in both directions; "TE: trailers" is passed on when the
//     client sent it. Protocol upgrades are not proxied.
//   - Fields whose names hold an underscore are dropped, as nginx does by
//     default: CGI and WSGI servers read "Mcp_Session_Id" as
//     Mcp-Session-Id (both become HTTP_MCP_SESSION_ID), a field the
//     gateway checks under its own name only.
//   - The upstream is asked for uncompressed answers (Accept-Encoding:
//     identity), which MCPFilter can read.
//   - Authorization and DPoP never reach the upstream; Forwarded and the
//     client's X-Forwarded-* are replaced by X-Forwarded-For (the prior
//     list and the client's address), X-Forwarded-Host and
//     X-Forwarded-Proto. Without a User-Agent of the client none is sent.
//   - An event stream (and an answer of unknown length) is flushed
//     whenever the upstream pauses for flushDelay, so each event reaches
//     the client as it arrives, and what arrives together (the header and
//     the first event, the last event and the end of the stream) leaves
//     together. A GET stream's header is sent at once.
//   - A failure before the answer goes to onError; a failure in the middle
//     of an answer aborts the client's response (http.ErrAbortHandler), so
//     the client sees a broken stream, never a cleanly ended one.
type forwarder struct {
	target    *url.URL
	transport http.RoundTripper
	// onError answers a request whose upstream exchange failed before the
	// answer (no status sent yet); body is the request body (nil for
	// other methods than POST).
	onError func(w http.ResponseWriter, r *http.Request, body []byte, err error)
	// refused reports an answer the client must not see (the upstream
	// refusing the gateway's own credentials); it goes to onError.
	refused func(*http.Response) error
	// tracer starts the client span of the upstream hop, whose context
	// goes upstream in the traceparent and tracestate headers and in
	// params._meta of a JSON-RPC request; nil: tracing is off.
	tracer trace.Tracer
}

// dropped are the request fields the upstream never gets from the client.
var dropped = map[string]bool{
	"Authorization": true, "Dpop": true,
	"Forwarded": true, "X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true,
}

// isHop reports whether the canonical field name k is hop-by-hop (RFC 9110
// §7.6.1, and the ones RFC 2616 §13.5.1 listed).
func isHop(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// outHeader is the header of the request to the upstream.
func outHeader(r *http.Request) http.Header {
	in := r.Header
	h := make(http.Header, len(in)+3)
	for k, v := range in {
		if !isHop(k) && !dropped[k] && !strings.Contains(k, "_") {
			h[k] = v
		}
	}
	removeConnectionFields(h, in["Connection"])
	// The answer is filtered (lists trimmed), which needs it uncompressed;
	// the client's own Accept-Encoding would let the upstream compress it.
	h["Accept-Encoding"] = []string{"identity"}
	if hasToken(in["Te"], "trailers") {
		h["Te"] = []string{"trailers"}
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := in["X-Forwarded-For"]; len(prior) > 0 {
			ip = strings.Join(prior, ", ") + ", " + ip
		}
		h["X-Forwarded-For"] = []string{ip}
	}
	h["X-Forwarded-Host"] = []string{r.Host}
	if r.TLS == nil {
		h["X-Forwarded-Proto"] = []string{"http"}
	} else {
		h["X-Forwarded-Proto"] = []string{"https"}
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // not Go's default
	}
	return h
}

// removeConnectionFields deletes the fields a Connection header names.
func removeConnectionFields(h http.Header, conn []string) {
	for _, v := range conn {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
}

// hasToken reports whether the comma-separated values hold token (ASCII
// case-insensitive).
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(textproto.TrimString(f), token) {
				return true
			}
		}
	}
	return false
}

// cleanQuery re-encodes a query the upstream might split differently from
// the gateway (a ';' or a bad %-escape), as httputil.ReverseProxy does.
func cleanQuery(q string) string {
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case ';':
			v, _ := url.ParseQuery(q)
			return v.Encode()
		case '%':
			if i+2 >= len(q) || !isHex(q[i+1]) || !isHex(q[i+2]) {
				v, _ := url.ParseQuery(q)
				return v.Encode()
			}
			i += 2
		}
	}
	return q
}

// errUpstreamStatus is an upstream answer whose status code is invalid.
var errUpstreamStatus = errors.New("mcpgateway: the upstream answered with an invalid status code")

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	outBody := io.ReadCloser(http.NoBody)
	var length int64
	if r.Method == http.MethodPost && r.Body != nil && r.Body != http.NoBody {
		// Keep the (already bounded) body, so an error answer can carry
		// the request's id.
		b, err := readAll(r)
		if err != nil {
			writeUnreadableBody(w)
			return
		}
		body, length = b, int64(len(b))
		if length > 0 {
			// A *bytes.Reader (under io.NopCloser) is one net/http knows
			// to be in memory: the header and the body go out in one
			// write. Another type has the header flushed first.
			outBody = io.NopCloser(bytes.NewReader(b))
		}
	} else if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		outBody, length = io.NopCloser(r.Body), r.ContentLength
	}
	// The target is shared by every request without a query; transports
	// read a request's URL and never change it (a copy is a Clone).
	target := f.target
	if r.URL.RawQuery != "" {
		u := *f.target
		u.RawQuery = cleanQuery(r.URL.RawQuery)
		target = &u
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, "", nil)
	if err != nil {
		f.onError(w, r, body, err)
		return
	}
	out.URL, out.Host, out.Header = target, "", outHeader(r)
	out.Body, out.ContentLength = outBody, length
	if outBody == http.NoBody {
		out.Body = nil
	}
	var span trace.Span
	if f.tracer != nil {
		var ctx context.Context
		ctx, span = tracing.StartClient(r.Context(), f.tracer, "upstream", out)
		defer span.End()
		out = out.WithContext(ctx)
		tracing.Inject(ctx, out.Header)
		if b, ok := injectMeta(ctx, body); ok {
			sent := b
			out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(sent)), int64(len(sent))
			out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(sent)), nil }
		}
	}
	if body != nil && out.GetBody == nil {
		// The upstream's credentials may send it again (a refused token).
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}

	res, err := f.transport.RoundTrip(out)
	if span != nil {
		tracing.EndClient(span, res, err)
	}
	if err == nil && (res.StatusCode < 100 || res.StatusCode > 599 || res.StatusCode == http.StatusSwitchingProtocols) {
		// RFC 9110 §15: a status code outside 100..599 is invalid (an
		// HTTP/1.1 status line's three digits may read 000); the server
		// cannot write it (WriteHeader panics below 100). 101 switches to
		// a protocol the request's Upgrade named (RFC 9110 §7.8), and the
		// gateway sends none: net/http's transport hands it on with the
		// connection as its body, which no client here asked for.
		res.Body.Close()
		res, err = nil, fmt.Errorf("%w: status code %d", errUpstreamStatus, res.StatusCode)
	}
	if err == nil && f.refused != nil {
		if err = f.refused(res); err != nil {
			res.Body.Close()
		}
	}
	if err != nil {
		f.onError(w, r, body, err)
		return
	}
	defer res.Body.Close()

	h := w.Header()
	for k, v := range res.Header {
		if !isHop(k) {
			h[k] = v
		}
	}
	removeConnectionFields(h, res.Header["Connection"])
	// An Mcp-Session-Id is only ever a header field: the session binding
	// signs the one in the header, and one sent as a trailer would hand
	// the client the upstream's own ID. It is not passed on as a trailer.
	delete(res.Trailer, "Mcp-Session-Id")
	if len(res.Trailer) > 0 {
		keys := make([]string, 0, len(res.Trailer))
		for k := range res.Trailer {
			keys = append(keys, k)
		}
		h["Trailer"] = []string{strings.Join(keys, ", ")}
	}
	w.WriteHeader(res.StatusCode)

	stream := isEventStream(res.Header.Get("Content-Type")) || res.ContentLength == -1
	buf := copyBufferPool.Get().(*[]byte)
	defer copyBufferPool.Put(buf)
	if err := copyAnswer(w, res.Body, *buf, stream, r.Method == http.MethodGet); err != nil {
		// The status is sent: all that is left is to abort the response.
		panic(http.ErrAbortHandler)
	}
	if len(res.Trailer) > 0 {
		delete(res.Trailer, "Mcp-Session-Id")
		for k, v := range res.Trailer {
			h[http.TrailerPrefix+k] = v
		}
	}
}

// isEventStream reports whether the Content-Type ct is text/event-stream
// (RFC 9110 §8.3.1: the media type, case-insensitive, before any
// parameters).
func isEventStream(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(textproto.TrimString(mt), "text/event-stream")
}

// copyAnswer copies src to w; a stream is flushed whenever the upstream
// pauses: after a read, what was written is flushed if the next read has
// brought nothing within flushDelay, and is otherwise sent with what it
// brought. So an answer's last event goes out with the end of the stream
// in one write instead of two, and the header with the first event.
func copyAnswer(w http.ResponseWriter, src io.Reader, buf []byte, stream, headerNow bool) error {
	if !stream {
		_, err := io.CopyBuffer(writerOnly{w}, src, buf)
		return err
	}
	rc := http.NewResponseController(w)
	if headerNow {
		if err := rc.Flush(); err != nil {
			return err
		}
	}
	df := &delayedFlush{rc: rc, pending: !headerNow}
	df.arm()
	defer df.stop()
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if err := df.write(w, buf[:n]); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil // the server sends the rest with the end of the answer
		}
		if rerr != nil {
			// What did arrive goes out before the answer is aborted.
			df.fire()
			return rerr
		}
	}
}

// flushDelay is how long a stream's written but unsent bytes (its header,
// an event) wait for more before they are sent alone.
const flushDelay = 2 * time.Millisecond

// delayedFlush flushes a stream's response from a timer while the handler
// waits for the upstream.
type delayedFlush struct {
	mu      sync.Mutex
	rc      *http.ResponseController
	t       *time.Timer // nil until first armed
	pending bool        // written and not flushed
	armed   bool        // the timer will fire
	done    bool        // the handler is finishing: the timer touches nothing
	err     error
}

func (df *delayedFlush) fire() {
	df.mu.Lock()
	defer df.mu.Unlock()
	df.armed = false
	if df.pending && !df.done {
		df.pending = false
		df.err = df.rc.Flush()
	}
}

// arm starts the timer for what is pending, unless it runs already.
func (df *delayedFlush) arm() {
	df.mu.Lock()
	df.armLocked()
	df.mu.Unlock()
}

func (df *delayedFlush) armLocked() {
	if !df.pending || df.armed || df.done {
		return
	}
	df.armed = true
	if df.t == nil {
		df.t = time.AfterFunc(flushDelay, df.fire)
	} else {
		df.t.Reset(flushDelay)
	}
}

// write writes b and arms the timer for it.
func (df *delayedFlush) write(w io.Writer, b []byte) error {
	df.mu.Lock()
	defer df.mu.Unlock()
	if df.err != nil {
		return df.err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	df.pending = true
	df.armLocked()
	return nil
}

// stop ends the timer's work; once it returns the handler owns the
// ResponseWriter alone.
func (df *delayedFlush) stop() {
	df.mu.Lock()
	df.done = true
	t := df.t
	df.mu.Unlock()
	if t != nil {
		t.Stop()
	}
}

// writerOnly hides the ReaderFrom of a ResponseWriter from io.CopyBuffer,
// which would otherwise copy with a buffer of its own.
type writerOnly struct{ io.Writer }
