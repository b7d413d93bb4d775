package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"time"
)

// h1Transport is an HTTP/1.1 client (RFC 9112) for a plain-http upstream:
// keep-alive connections in a pool, each request written and its answer
// read on the calling goroutine. net/http's Transport runs a read loop and
// a write loop goroutine per connection and hands every request and answer
// between them and the caller; here the caller writes the request
// (Request.Write), parses the answer (http.ReadResponse) and reads its body
// from the connection itself, so a call costs no goroutine hand-offs and no
// background read of an idle connection.
//
//   - A connection goes back to the pool when its answer's body has been
//     read to the end (Content-Length or chunked framing, RFC 9112 §6) and
//     neither side asked to close it (RFC 9112 §9.6); a body closed early,
//     a close-delimited body or a failure closes it.
//   - The request's context closes the connection when it is done, which
//     ends a blocked write or read (a client that went away ends its event
//     stream to the upstream).
//   - ResponseHeaderTimeout bounds the wait for the answer's header, and
//     each wait of a large request body for the upstream to read on;
//     MaxResponseHeaderBytes bounds the header's size.
//   - Before a pooled connection is used it is checked for a close (or
//     stray bytes) that the upstream sent while it was idle; a request
//     whose answer then did not start on a reused connection (the upstream
//     closed it as it was sent) is sent once more on a new connection when
//     it can be replayed (RFC 9110 §9.2.2: idempotent methods, or a
//     request none of which was written).
//   - About once a second, returning a connection to the pool also closes
//     the idle ones the upstream has closed meanwhile (or that are past
//     IdleConnTimeout), so they do not stay half-open on this side.
//   - An upstream may answer before it has read the whole request body
//     and close the connection (RFC 9112 §9.3, §9.6: a 413 or 401 to a
//     large body), or answer and stop reading it: when writing the
//     request fails on the connection (or stalls for ResponseHeaderTimeout),
//     the answer is still read (within ResponseHeaderTimeout) and, if one
//     came, passed on; the connection is not used again.
//   - A connection is not used again after an answer whose framing is
//     suspect, so that no bytes the upstream sent past what the transport
//     read as the answer are taken for the next request's answer (RFC 9112
//     §11.1, response splitting): Transfer-Encoding with Content-Length
//     (the chunked framing is read and Content-Length dropped, RFC 9112
//     §6.1, §6.3 item 3), a 204 that declares a body (RFC 9110 §8.6, RFC
//     9112 §6.1), or bytes buffered past the answer's end.
//   - 1xx interim answers (RFC 9110 §15.2) are skipped; their headers and
//     the final answer's share MaxResponseHeaderBytes, as in net/http. The
//     transport never waits for 100 Continue (a request's Expect field is
//     sent as given, its body at once: RFC 9110 §10.1.1 lets a client send
//     it without waiting) and never upgrades.
type h1Transport struct {
	// Dial opens a connection to addr (host:port).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// ResponseHeaderTimeout bounds the wait for an answer's header once
	// the request is written, and each wait of a large request body for
	// the upstream to take in its next 32 KiB. Zero: no bound.
	ResponseHeaderTimeout time.Duration
	// MaxResponseHeaderBytes bounds an answer's header, together with those
	// of the 1xx interim answers before it. Zero: 1 MiB.
	MaxResponseHeaderBytes int64
	// MaxIdleConns is how many idle connections the pool keeps. Zero: 256.
	MaxIdleConns int
	// IdleConnTimeout closes a connection idle for longer. Zero: 90 s.
	IdleConnTimeout time.Duration

	now func() time.Time // zero value time.Now

	mu    sync.Mutex
	idle  []*h1Conn // most recently used last
	swept time.Time // the last look at the pool's oldest connections
}

// sweepEvery is how often a return to the pool also checks the
// connections idle longer than that, so that those the upstream closed
// (or that outlived IdleConnTimeout) do not stay open on this side.
const sweepEvery = time.Second

func (t *h1Transport) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}

// h1Conn is a connection of the pool with its buffers.
type h1Conn struct {
	t      *h1Transport
	conn   net.Conn
	lr     limitReader // under br: bounds the answer's header
	br     *bufio.Reader
	cw     connWriter // under bw: tells a failing connection from a failing body
	bw     *bufio.Writer
	addr   string
	idleAt time.Time
	reused bool
}

// limitReader reads from r at most n bytes before it fails, as
// http.Transport bounds an answer's header.
type limitReader struct {
	r      io.Reader
	n      int64
	max    int64
	before func() // called before each read, if set
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.before != nil {
		l.before()
	}
	if l.n <= 0 {
		return 0, errHeaderTooLarge(l.max)
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// connWriter writes to the connection and keeps the first error, so that
// a write of the request that fails can be told from a request body that
// fails to read (Request.Write reports both). A large body goes out in
// pieces, each under a write deadline of timeout: an upstream that stops
// reading it (having answered early, or hung) fails the write instead of
// holding it until the client goes away.
type connWriter struct {
	conn    net.Conn
	timeout time.Duration // bounds each piece of a large body; zero: none
	err     error
}

// writePiece is the most a write sends under one deadline.
const writePiece = 32 << 10

func (w *connWriter) Write(p []byte) (int, error) {
	if w.timeout <= 0 || len(p) <= writePiece {
		n, err := w.conn.Write(p)
		w.note(err)
		return n, err
	}
	n := 0
	for n < len(p) {
		m, err := w.writeTimed(p[n:min(len(p), n+writePiece)])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, w.untimed()
}

// ReadFrom copies a body (bufio.Writer hands it what it does not buffer)
// through a 32 KiB buffer, as net.TCPConn's ReadFrom does for a reader
// that is no file or socket, each piece under its deadline. A failing
// read is returned as it is, and is not the connection's.
func (w *connWriter) ReadFrom(r io.Reader) (int64, error) {
	buf := copyBufferPool.Get().(*[]byte)
	defer copyBufferPool.Put(buf)
	var n int64
	timed := false
	for {
		k, rerr := r.Read(*buf)
		if k > 0 {
			var m int
			var err error
			if w.timeout > 0 {
				timed = true
				m, err = w.writeTimed((*buf)[:k])
			} else {
				m, err = w.conn.Write((*buf)[:k])
				w.note(err)
			}
			n += int64(m)
			if err != nil {
				return n, err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return n, rerr
		}
	}
	if timed {
		return n, w.untimed()
	}
	return n, nil
}

func (w *connWriter) writeTimed(p []byte) (int, error) {
	if err := w.conn.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
		w.note(err)
		return 0, err
	}
	n, err := w.conn.Write(p)
	w.note(err)
	return n, err
}

func (w *connWriter) untimed() error {
	err := w.conn.SetWriteDeadline(time.Time{})
	w.note(err)
	return err
}

func (w *connWriter) note(err error) {
	if err != nil && w.err == nil {
		w.err = err
	}
}

func errHeaderTooLarge(max int64) error {
	return fmt.Errorf("mcpgateway: upstream answer header larger than %d bytes", max)
}

const (
	defaultMaxResponseHeaderBytes = 1 << 20
	defaultMaxIdleConns           = 256
	defaultIdleConnTimeout        = 90 * time.Second
)

// errUpstreamClosed is a reused connection's end before the answer began.
var errUpstreamClosed = errors.New("mcpgateway: upstream closed the connection before answering")

// RoundTrip implements http.RoundTripper for http URLs.
func (t *h1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" {
		closeBody(req)
		return nil, fmt.Errorf("mcpgateway: unsupported scheme %q for the HTTP/1.1 upstream transport", req.URL.Scheme)
	}
	ctx := req.Context()
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	for retried := false; ; retried = true {
		c, err := t.get(ctx, addr, retried)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		res, written, err := c.roundTrip(req)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			closeBody(req)
			return nil, ctx.Err()
		}
		if retried || !c.reused || !errors.Is(err, errUpstreamClosed) || !replayable(req, written) {
			closeBody(req)
			return nil, err
		}
		if written && req.GetBody != nil {
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, err
			}
			req = req.Clone(ctx)
			req.Body = body
		}
	}
}

// replayable reports whether req may be sent again after a reused
// connection closed under it: when nothing of it was written, if its body
// (if any) can be had again; otherwise only an idempotent method (RFC 9110
// §9.2.2) with such a body.
func replayable(req *http.Request, written bool) bool {
	rewind := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	if !rewind {
		return false
	}
	if !written {
		return true
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return req.Header["Idempotency-Key"] != nil || req.Header["X-Idempotency-Key"] != nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// get returns an idle connection to addr that the upstream has not closed,
// or a new one (always a new one when fresh is set).
func (t *h1Transport) get(ctx context.Context, addr string, fresh bool) (*h1Conn, error) {
	timeout := t.IdleConnTimeout
	if timeout == 0 {
		timeout = defaultIdleConnTimeout
	}
	for !fresh {
		t.mu.Lock()
		var c *h1Conn
		for i := len(t.idle) - 1; i >= 0; i-- {
			if t.idle[i].addr == addr {
				c = t.idle[i]
				t.idle = append(t.idle[:i], t.idle[i+1:]...)
				break
			}
		}
		t.mu.Unlock()
		if c == nil {
			break
		}
		if t.clock().Sub(c.idleAt) > timeout || !alive(c.conn) {
			_ = c.conn.Close()
			continue
		}
		c.reused = true
		return c, nil
	}
	conn, err := t.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &h1Conn{t: t, conn: conn, addr: addr}
	c.lr.r = conn
	c.br = bufio.NewReaderSize(&c.lr, 4<<10)
	c.cw.conn, c.cw.timeout = conn, t.ResponseHeaderTimeout
	c.bw = bufio.NewWriterSize(&c.cw, 4<<10)
	return c, nil
}

// put returns c to the pool, or closes it when the pool is full. Once per
// sweepEvery it also takes out the connections idle for longer, closes
// those found closed by the upstream or past IdleConnTimeout, and puts the
// others back, oldest first.
func (t *h1Transport) put(c *h1Conn) {
	limit := t.MaxIdleConns
	if limit == 0 {
		limit = defaultMaxIdleConns
	}
	now := t.clock()
	c.idleAt = now
	var old []*h1Conn
	t.mu.Lock()
	if len(t.idle) < limit {
		t.idle = append(t.idle, c)
		c = nil
	}
	if now.Sub(t.swept) >= sweepEvery {
		t.swept = now
		n := 0
		for n < len(t.idle) && now.Sub(t.idle[n].idleAt) >= sweepEvery {
			n++
		}
		old = append(old, t.idle[:n]...)
		t.idle = append(t.idle[:0], t.idle[n:]...)
	}
	t.mu.Unlock()
	if c != nil {
		_ = c.conn.Close()
	}
	if len(old) == 0 {
		return
	}
	timeout := t.IdleConnTimeout
	if timeout == 0 {
		timeout = defaultIdleConnTimeout
	}
	keep := old[:0]
	for _, o := range old {
		if now.Sub(o.idleAt) > timeout || !alive(o.conn) {
			_ = o.conn.Close()
		} else {
			keep = append(keep, o)
		}
	}
	t.mu.Lock()
	room := max(0, limit-len(t.idle))
	for _, o := range keep[min(room, len(keep)):] {
		_ = o.conn.Close()
	}
	keep = keep[:min(room, len(keep))]
	t.idle = append(keep, t.idle...)
	t.mu.Unlock()
}

// CloseIdleConnections closes the connections of the pool.
func (t *h1Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, c := range idle {
		_ = c.conn.Close()
	}
}

// roundTrip sends req on c and reads the answer's header; written reports
// whether any of the request may have reached the upstream.
func (c *h1Conn) roundTrip(req *http.Request) (res *http.Response, written bool, err error) {
	// The context closes the connection: a blocked write or read ends.
	stop := context.AfterFunc(req.Context(), func() { _ = c.conn.Close() })
	fail := func(err error) (*http.Response, bool, error) {
		stop()
		_ = c.conn.Close()
		return nil, written, err
	}
	werr := req.Write(c.bw)
	if werr == nil {
		werr = c.bw.Flush()
	}
	// What reached the connection is unknown once a write began.
	written = true
	early := false
	if werr != nil {
		if c.cw.err == nil || req.Context().Err() != nil {
			// The body failed to read (Request.Write reports that as it
			// is), or the context closed the connection.
			return fail(c.ended(werr))
		}
		// The connection failed: the upstream may have answered before it
		// read the whole body and closed (RFC 9112 §9.3, §9.6). That
		// answer, if it came, is the request's; the connection is done.
		early = true
	}
	max := c.t.MaxResponseHeaderBytes
	if max == 0 {
		max = defaultMaxResponseHeaderBytes
	}
	if d := c.t.ResponseHeaderTimeout; d > 0 {
		if err := c.conn.SetReadDeadline(time.Now().Add(d)); err != nil {
			return fail(err)
		}
	}
	c.lr.n, c.lr.max = max, max
	var head []byte // the final answer's header as it arrived, if unchanged
	for {
		// What has arrived of the answer, to look at its framing fields
		// after ReadResponse, which drops Content-Length when the answer
		// is chunked. A read error is left to ReadResponse.
		_, _ = c.br.Peek(1)
		head, _ = c.br.Peek(c.br.Buffered())
		left := c.lr.n
		res, err = http.ReadResponse(c.br, req)
		if err != nil && c.lr.n <= 0 {
			// The limit cut a line, which ReadResponse may report as a
			// malformed one.
			err = errHeaderTooLarge(max)
		}
		if err != nil {
			if early {
				// No answer: the connection's write error says what
				// happened (Request.Write reports it as the body's).
				return fail(c.ended(c.cw.err))
			}
			return fail(c.ended(err))
		}
		if c.lr.n != left {
			// ReadResponse read more from the connection, which may have
			// moved what head shows.
			head = nil
		}
		// 1xx interim answers (RFC 9110 §15.2) have no body; the final
		// answer follows. 101 would switch protocols, never asked for.
		if res.StatusCode >= 200 || res.StatusCode < 100 {
			break
		}
		if res.StatusCode == http.StatusSwitchingProtocols {
			return fail(errors.New("mcpgateway: upstream switched protocols unasked"))
		}
	}
	c.lr.n = math.MaxInt64
	if c.t.ResponseHeaderTimeout > 0 {
		if err := c.conn.SetReadDeadline(time.Time{}); err != nil {
			res.Body.Close()
			return fail(err)
		}
	}
	keep := !early && !res.Close && !req.Close && (res.ContentLength >= 0 || isChunked(res) || res.Body == http.NoBody) &&
		!suspectFraming(res, head)
	b := &h1Body{c: c, ctx: req.Context(), rc: res.Body, stop: stop, keep: keep}
	if res.Body == http.NoBody {
		// Nothing to read: the exchange ends here, and the connection is
		// kept only as an answer with a body would be (not after
		// Connection: close or an HTTP/1.0 answer, RFC 9112 §9.3).
		b.release(keep)
		return res, written, nil
	}
	res.Body = b
	return res, written, nil
}

// ended turns the end of a reused connection before any of the answer
// (EOF, reset, broken pipe) into errUpstreamClosed.
func (c *h1Conn) ended(err error) error {
	if !c.reused || c.br.Buffered() > 0 {
		return err
	}
	var ne net.Error
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isConnReset(err) || (errors.As(err, &ne) && !ne.Timeout() && !errors.Is(err, net.ErrClosed)) {
		return fmt.Errorf("%w: %v", errUpstreamClosed, err)
	}
	return err
}

// suspectFraming reports an answer after which the connection may hold
// bytes the upstream meant as part of it: a chunked answer whose header
// (head, as it arrived; nil when unknown) also has Content-Length (RFC
// 9112 §6.3 item 3: Transfer-Encoding overrides it, and such a message
// "ought to be handled as an error"), or a 204 with Transfer-Encoding or a
// nonzero Content-Length (which it must not send, RFC 9110 §8.6, RFC 9112
// §6.1). A 304 and an answer to HEAD may carry both fields without a body
// (RFC 9110 §8.6, RFC 9112 §6.1).
func suspectFraming(res *http.Response, head []byte) bool {
	if res.Body == http.NoBody {
		if res.StatusCode != http.StatusNoContent {
			return false
		}
		cl := res.Header["Content-Length"]
		return len(res.TransferEncoding) > 0 || len(cl) > 0 && cl[0] != "0"
	}
	if !isChunked(res) {
		return false
	}
	hasLength, whole := headerHasContentLength(head)
	return hasLength || !whole
}

// headerHasContentLength reports whether the header section at the start
// of head (a status line, then field lines up to an empty line, RFC 9112
// §2.1) has a Content-Length field, and whether the section ends within
// head.
func headerHasContentLength(head []byte) (has, whole bool) {
	const name = "content-length:"
	first := true
	for len(head) > 0 {
		i := bytes.IndexByte(head, '\n')
		if i < 0 {
			return has, false
		}
		line := bytes.TrimSuffix(head[:i], []byte("\r"))
		head = head[i+1:]
		if first {
			first = false
			continue
		}
		if len(line) == 0 {
			return has, true
		}
		if len(line) >= len(name) && bytes.EqualFold(line[:len(name)], []byte(name)) {
			has = true
		}
	}
	return has, false
}

func isChunked(res *http.Response) bool {
	return len(res.TransferEncoding) > 0 && res.TransferEncoding[0] == "chunked"
}

// h1Body is an answer's body: at its end the connection goes back to the
// pool (or is closed); closed before its end, the connection is closed.
type h1Body struct {
	c    *h1Conn
	ctx  context.Context
	rc   io.ReadCloser
	stop func() bool
	keep bool
	done bool
	err  error
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.done {
		if b.err != nil {
			return 0, b.err
		}
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.release(b.keep)
		return n, io.EOF
	}
	if err != nil {
		// What ended the body, unless the request's context did.
		if ctxErr := b.ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		b.release(false)
		b.err = err
	}
	return n, err
}

// beforeNetRead has f called before each read of the body from the
// connection (reads from what is buffered do not call it).
func (b *h1Body) beforeNetRead(f func()) {
	if !b.done {
		b.c.lr.before = f
	}
}

func (b *h1Body) Close() error {
	if !b.done {
		b.release(false)
	}
	return nil
}

// release ends the exchange: the connection goes back to the pool when
// keep is set, the body ended cleanly, nothing follows it in the buffer
// and the request's context has not closed it.
func (b *h1Body) release(keep bool) {
	b.done = true
	b.c.lr.before = nil
	stopped := b.stop()
	if keep && stopped && b.c.br.Buffered() == 0 {
		b.c.reused = false
		b.c.t.put(b.c)
		return
	}
	_ = b.c.conn.Close()
}
