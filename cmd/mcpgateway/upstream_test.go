package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// newTestTransport is the gateway's transport to an http upstream under
// limits l (zero fields: DefaultLimits).
func newTestTransport(t *testing.T, l Limits) *http.Transport {
	if l.UpstreamDialTimeout == 0 {
		l.UpstreamDialTimeout = DefaultLimits.UpstreamDialTimeout
	}
	if l.UpstreamHeaderTimeout == 0 {
		l.UpstreamHeaderTimeout = DefaultLimits.UpstreamHeaderTimeout
	}
	tr := newUpstreamTransport(l, "http")
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// closeCounter counts the closes of the connections the transport dials.
type closeCounter struct {
	net.Conn
	closes *atomic.Int32
	once   *sync.Once
}

func (c closeCounter) Close() error {
	c.once.Do(func() { c.closes.Add(1) })
	return c.Conn.Close()
}

// countCloses has tr count the closes of its connections, each once.
func countCloses(tr *http.Transport) *atomic.Int32 {
	var closes atomic.Int32
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return closeCounter{c, &closes, &sync.Once{}}, nil
	}
	return &closes
}

// waitFor waits up to 10 s for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: not %s", what)
		}
	}
}

// countingServer is an httptest server that counts the connections it
// accepted.
func countingServer(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int32) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func get(t *testing.T, tr http.RoundTripper, url string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatalf("body: %v", err)
	}
	return res, string(b)
}

// Content-Length and chunked bodies (RFC 9112 §6) end the answer and keep
// the connection; a close-delimited body (an answer with neither) ends with
// the connection, which is not used again.
func TestUpstreamTransportReadsEveryFramingAndReusesWhatItCan(t *testing.T) {
	srv, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/length":
			w.Header().Set("Content-Length", "5")
			io.WriteString(w, "fixed")
		case "/chunked":
			for _, s := range []string{"chu", "nk", "ed"} {
				io.WriteString(w, s)
				w.(http.Flusher).Flush()
			}
		case "/trailer":
			w.Header().Set("Trailer", "X-Sum")
			w.(http.Flusher).Flush()
			io.WriteString(w, "body")
			w.Header().Set("X-Sum", "42")
		case "/close":
			// HTTP/1.0-style: no length, no chunking, the end is the close.
			conn, bw, _ := w.(http.Hijacker).Hijack()
			bw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end")
			bw.Flush()
			conn.Close()
		}
	}))
	tr := newTestTransport(t, Limits{})
	for i := range 3 {
		for _, c := range []struct{ path, want string }{{"/length", "fixed"}, {"/chunked", "chunked"}} {
			if _, got := get(t, tr, srv.URL+c.path); got != c.want {
				t.Fatalf("round %d %s: %q", i, c.path, got)
			}
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("six answers with a length or chunks took %d connections, want 1", n)
	}
	res, got := get(t, tr, srv.URL+"/trailer")
	if got != "body" || res.Trailer.Get("X-Sum") != "42" {
		t.Errorf("trailer answer: %q, trailer %v", got, res.Trailer)
	}
	if _, got := get(t, tr, srv.URL+"/close"); got != "until the end" {
		t.Errorf("close-delimited body: %q", got)
	}
	before := conns.Load()
	get(t, tr, srv.URL+"/length")
	if n := conns.Load(); n != before+1 {
		t.Errorf("after a close-delimited body: %d connections, want %d (a new one)", n, before+1)
	}
}

// rawUpstream accepts connections and hands each to serve.
func rawUpstream(t *testing.T, serve func(n int, c net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close() // connections the transport keeps idle
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); defer c.Close(); serve(n, c) }()
		}
	}()
	return "http://" + ln.Addr().String()
}

// readRequest reads one request and its body from br.
func readRequest(br *bufio.Reader) (*http.Request, string, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(req.Body)
	return req, string(b), err
}

const okAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

func post(t *testing.T, tr http.RoundTripper, url, body string, header http.Header) (*http.Response, error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if header != nil {
		req.Header = header
	}
	return tr.RoundTrip(req)
}

// An upstream that closes an idle keep-alive connection (as Node's server
// does after 5 s) costs no request: the pooled connection is found closed
// before it is used, and the request goes on a new one.
func TestUpstreamTransportReplacesAConnectionTheUpstreamClosedWhileIdle(t *testing.T) {
	closed := make(chan struct{}, 4)
	var bodies sync.Map
	url := rawUpstream(t, func(n int, c net.Conn) {
		br := bufio.NewReader(c)
		_, body, err := readRequest(br)
		if err != nil {
			return
		}
		bodies.Store(n, body)
		io.WriteString(c, okAnswer)
		c.Close() // while the gateway thinks it idle
		closed <- struct{}{}
	})
	tr := newTestTransport(t, Limits{})
	for i := range 3 {
		res, err := post(t, tr, url, fmt.Sprintf(`{"n":%d}`, i), nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if b, _ := io.ReadAll(res.Body); string(b) != "ok" {
			t.Fatalf("request %d: %q", i, b)
		}
		res.Body.Close()
		<-closed
	}
	for i := range 3 {
		if b, _ := bodies.Load(i); b != fmt.Sprintf(`{"n":%d}`, i) {
			t.Errorf("connection %d got %q", i, b)
		}
	}
}

// A reused connection that the upstream closes as a request is sent (the
// race the idle check cannot see) gets an idempotent request sent once more
// on a new connection; a POST that may have been received is not sent
// twice, and the error says so.
func TestUpstreamTransportRetriesOnlyReplayableRequestsOnAStaleConnection(t *testing.T) {
	var mu sync.Mutex
	var got []string
	url := rawUpstream(t, func(n int, c net.Conn) {
		br := bufio.NewReader(c)
		// Every connection answers one request, then reads the next and
		// closes without an answer.
		for i := 0; ; i++ {
			req, body, err := readRequest(br)
			if err != nil {
				return
			}
			mu.Lock()
			got = append(got, fmt.Sprintf("conn %d: %s %s", n, req.Method, body))
			mu.Unlock()
			if i == 1 {
				return
			}
			io.WriteString(c, okAnswer)
		}
	})
	tr := newTestTransport(t, Limits{})
	first := func() {
		t.Helper()
		_, body := get(t, tr, url+"/first")
		if body != "ok" {
			t.Fatalf("first answer %q", body)
		}
	}
	first()
	_, body := get(t, tr, url+"/again")
	if body != "ok" {
		t.Fatalf("the GET on a stale connection: %q", body)
	}
	// The retried GET's connection is now the pooled one, and is dropped
	// by its next request in the same way.
	res, err := post(t, tr, url, `{"call":1}`, nil)
	if err == nil {
		res.Body.Close()
		t.Fatal("a POST on a connection closed under it succeeded; want an error, not a second send")
	}
	if !errors.Is(err, io.EOF) {
		t.Errorf("error %v, want the upstream's close (io.EOF)", err)
	}
	// A new connection answers; its next request, with an Idempotency-Key,
	// is sent once more.
	for i, h := range []http.Header{nil, {"Idempotency-Key": {"k3"}}} {
		res, err = post(t, tr, url, fmt.Sprintf(`{"call":%d}`, i+2), h)
		if err != nil {
			t.Fatalf("POST %d: %v", i+2, err)
		}
		if b, _ := io.ReadAll(res.Body); string(b) != "ok" {
			t.Fatalf("POST %d: %q", i+2, b)
		}
		res.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"conn 0: GET ", "conn 0: GET ", "conn 1: GET ",
		`conn 1: POST {"call":1}`,
		`conn 2: POST {"call":2}`, `conn 2: POST {"call":3}`, `conn 3: POST {"call":3}`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the upstream saw\n%q\nwant\n%q", got, want)
	}
}

// An answer that ends before its declared length is an error to the
// reader, and its connection is not used again.
func TestUpstreamTransportReportsAnUpstreamClosingMidBody(t *testing.T) {
	var conns atomic.Int32
	url := rawUpstream(t, func(n int, c net.Conn) {
		conns.Add(1)
		br := bufio.NewReader(c)
		for {
			req, _, err := readRequest(br)
			if err != nil {
				return
			}
			if req.URL.Path == "/short" {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..")
				return
			}
			if req.URL.Path == "/chunks" {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
				return
			}
			io.WriteString(c, okAnswer)
		}
	})
	tr := newTestTransport(t, Limits{})
	for _, path := range []string{"/short", "/chunks"} {
		req, _ := http.NewRequest(http.MethodGet, url+path, nil)
		res, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: read %q, error %v; want io.ErrUnexpectedEOF", path, b, err)
		}
	}
	before := conns.Load()
	get(t, tr, url+"/ok")
	if n := conns.Load(); n != before+1 {
		t.Errorf("after broken bodies: %d connections, want %d", n, before+1)
	}
}

// A client that stops reading an endless event stream (its context ends)
// ends the upstream's request: the connection is closed, the upstream's
// handler sees its context done, and the reader gets the context's error.
func TestUpstreamTransportEndsAnEventStreamTheClientCancels(t *testing.T) {
	ended := make(chan struct{})
	srv, _ := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, "data: %d\n\n", i); err != nil {
				break
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				close(ended)
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		close(ended)
	}))
	tr := newTestTransport(t, Limits{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(res.Body)
	for range 3 {
		if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") && line != "\n" {
			t.Fatalf("stream: %q %v", line, err)
		}
	}
	cancel()
	if _, err := io.Copy(io.Discard, br); !errors.Is(err, context.Canceled) {
		t.Errorf("reading after the cancel: %v, want context.Canceled", err)
	}
	res.Body.Close()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream's handler still runs 10 s after the client cancelled")
	}
}

// A body closed before its end closes the connection (what is left of it
// would be read as the next answer), as does an answer with Connection:
// close (RFC 9112 §9.6); 1xx interim answers are skipped; an
// oversized header and a missing header (ResponseHeaderTimeout) are errors.
func TestUpstreamTransportEdges(t *testing.T) {
	var conns atomic.Int32
	url := rawUpstream(t, func(n int, c net.Conn) {
		conns.Add(1)
		br := bufio.NewReader(c)
		for {
			req, _, err := readRequest(br)
			if err != nil {
				return
			}
			switch req.URL.Path {
			case "/big":
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789")
			case "/closing":
				// Says it closes, and does not (yet).
				io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
			case "/early":
				io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"+okAnswer)
			case "/huge":
				io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Pad: "+strings.Repeat("a", 8<<10)+"\r\n\r\n")
			case "/hang":
				io.Copy(io.Discard, c)
				return
			default:
				io.WriteString(c, okAnswer)
			}
		}
	})
	tr := newTestTransport(t, Limits{UpstreamHeaderTimeout: 50 * time.Millisecond})
	tr.MaxResponseHeaderBytes = 4 << 10

	req, _ := http.NewRequest(http.MethodGet, url+"/big", nil)
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 3)
	io.ReadFull(res.Body, b)
	res.Body.Close()
	before := conns.Load()
	if _, body := get(t, tr, url+"/"); body != "ok" {
		t.Errorf("after a body closed early: %q", body)
	}
	if n := conns.Load(); n != before+1 {
		t.Errorf("a body closed early left its connection in the pool (%d connections, want %d)", n, before+1)
	}

	get(t, tr, url+"/closing")
	before = conns.Load()
	get(t, tr, url+"/")
	if n := conns.Load(); n != before+1 {
		t.Errorf("an answer with Connection: close left its connection in the pool (%d connections, want %d)", n, before+1)
	}

	if res, body := get(t, tr, url+"/early"); res.StatusCode != 200 || body != "ok" {
		t.Errorf("after a 103: %d %q", res.StatusCode, body)
	}

	req, _ = http.NewRequest(http.MethodGet, url+"/huge", nil)
	if res, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "exceeded 4096 bytes") {
		if res != nil {
			res.Body.Close()
		}
		t.Errorf("an 8 KiB header under a 4 KiB limit: %v", err)
	}

	req, _ = http.NewRequest(http.MethodGet, url+"/hang", nil)
	var ne net.Error
	if res, err := tr.RoundTrip(req); !errors.As(err, &ne) || !ne.Timeout() {
		if res != nil {
			res.Body.Close()
		}
		t.Errorf("an upstream that never answers: %v, want a timeout", err)
	}
}

// The request on the wire is what net/http writes: the header as given (no
// Accept-Encoding or User-Agent of the transport's own), the body with its
// length.
func TestUpstreamTransportWritesTheRequestAsGiven(t *testing.T) {
	got := make(chan string, 1)
	url := rawUpstream(t, func(n int, c net.Conn) {
		br := bufio.NewReader(c)
		var buf bytes.Buffer
		tp := io.TeeReader(br, &buf)
		req, err := http.ReadRequest(bufio.NewReader(tp))
		if err != nil {
			return
		}
		io.ReadAll(req.Body)
		got <- buf.String()
		io.WriteString(c, okAnswer)
	})
	tr := newTestTransport(t, Limits{})
	res, err := post(t, tr, url+"/mcp?a=1", `{"x":1}`, http.Header{"User-Agent": {""}, "Mcp-Session-Id": {"s1"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	host := strings.TrimPrefix(url, "http://")
	want := "POST /mcp?a=1 HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 7\r\nMcp-Session-Id: s1\r\n\r\n{\"x\":1}"
	if s := <-got; s != want {
		t.Errorf("on the wire:\n%q\nwant\n%q", s, want)
	}
}

// What a stream has sent reaches the client while the upstream pauses:
// the header alone, and an event before the next.
func TestForwarderFlushesWhatArrivedWhileTheUpstreamPauses(t *testing.T) {
	release := make(chan struct{}, 2)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for i := 1; i <= 2; i++ {
			select {
			case <-release:
			case <-time.After(10 * time.Second):
				return // the client is stuck: it sees the stream end early
			}
			fmt.Fprintf(w, "id: %d\ndata: {}\n\n", i)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(up.Close)
	target, _ := url.Parse(up.URL)
	f := &forwarder{target: target, transport: newTestTransport(t, Limits{}), onError: func(w http.ResponseWriter, _ *http.Request, _ []byte, err error) {
		t.Errorf("upstream: %v", err)
		w.WriteHeader(http.StatusBadGateway)
	}}
	gw := httptest.NewServer(f)
	t.Cleanup(gw.Close)
	res, err := http.Post(gw.URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err) // no header while the first event is pending
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	for i := 1; i <= 2; i++ {
		release <- struct{}{}
		var ev strings.Builder
		for !strings.HasSuffix(ev.String(), "\n\n") {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("event %d: %q %v", i, ev.String(), err)
			}
			ev.WriteString(line)
		}
		if want := fmt.Sprintf("id: %d\ndata: {}\n\n", i); ev.String() != want {
			t.Fatalf("event %d: %q, want %q", i, ev.String(), want)
		}
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Errorf("after the events: %q %v", rest, err)
	}
}

// A connection the upstream closes while it is idle in the pool is closed
// on this side when the close arrives (the transport reads every idle
// connection), not left half-open until a request reaches it; the
// connections to an upstream that keeps them open stay in the pool.
func TestUpstreamTransportClosesIdleConnectionsTheUpstreamClosed(t *testing.T) {
	closeNow := make(chan struct{})
	var answered sync.WaitGroup
	answered.Add(3)
	closing := rawUpstream(t, func(n int, c net.Conn) {
		if _, _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, okAnswer)
		answered.Done()
		<-closeNow
		c.Close()
	})
	var stayingConns atomic.Int32
	staying := rawUpstream(t, func(n int, c net.Conn) {
		stayingConns.Add(1)
		br := bufio.NewReader(c)
		for {
			if _, _, err := readRequest(br); err != nil {
				return
			}
			io.WriteString(c, okAnswer)
		}
	})
	tr := newTestTransport(t, Limits{})
	closes := countCloses(tr)
	// Five answers at once, three from the upstream that then closes and
	// two from the other: five connections, then idle in the pool.
	var bodies []io.ReadCloser
	for _, u := range []string{staying, closing, closing, closing, staying} {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		res, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, res.Body)
	}
	for _, b := range bodies {
		io.ReadAll(b)
		b.Close()
	}
	answered.Wait()
	if n := closes.Load(); n != 0 {
		t.Fatalf("%d connections closed before the upstream closed any", n)
	}
	close(closeNow) // the upstream closes all three
	waitFor(t, "three connections closed", func() bool { return closes.Load() == 3 })
	for range 2 {
		if _, body := get(t, tr, staying); body != "ok" {
			t.Fatalf("answer %q", body)
		}
	}
	if c, n := closes.Load(), stayingConns.Load(); c != 3 || n != 2 {
		t.Errorf("%d connections closed, %d to the upstream that stays; want 3 and 2 (those two used again)", c, n)
	}
}

// writeCounter counts the writes to a connection.
type writeCounter struct {
	net.Conn
	writes *atomic.Int32
}

func (c writeCounter) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A forwarded POST reaches the upstream in one write, its header and its
// body together (one TCP segment for the upstream to read, not two).
func TestForwarderSendsARequestInOneWrite(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}))
	t.Cleanup(up.Close)
	var writes atomic.Int32
	tr := newTestTransport(t, Limits{})
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return writeCounter{c, &writes}, nil
	}
	target, _ := url.Parse(up.URL)
	gw := httptest.NewServer(&forwarder{target: target, transport: tr, onError: func(w http.ResponseWriter, _ *http.Request, _ []byte, err error) {
		t.Errorf("upstream: %v", err)
		w.WriteHeader(http.StatusBadGateway)
	}})
	t.Cleanup(gw.Close)
	for i := range 3 {
		res, err := http.Post(gw.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(res.Body)
		res.Body.Close()
		if n := writes.Load(); n != int32(i+1) {
			t.Fatalf("after %d requests the upstream connection took %d writes", i+1, n)
		}
	}
}

// The pool holds connections to several upstreams: a request takes an
// idle connection to its own address, whichever upstream was used last.
func TestUpstreamTransportPoolsConnectionsOfSeveralUpstreams(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	a, aConns := countingServer(t, h)
	b, bConns := countingServer(t, h)
	tr := newTestTransport(t, Limits{})
	for _, url := range []string{a.URL, b.URL, a.URL, b.URL, a.URL} {
		if _, body := get(t, tr, url); body != "ok" {
			t.Fatalf("GET %s: %q", url, body)
		}
	}
	if na, nb := aConns.Load(), bConns.Load(); na != 1 || nb != 1 {
		t.Errorf("%d and %d connections, want one to each upstream", na, nb)
	}
}

// A request is sent again only on a reused connection that closed before
// its answer, and only when its body can be had again: a fresh
// connection's close is the upstream's answer to this request, and a PUT
// whose body was read once cannot be sent whole a second time.
func TestUpstreamTransportSendsAgainOnlyOnAReusedConnectionWithABodyToResend(t *testing.T) {
	t.Run("fresh connection", func(t *testing.T) {
		var conns atomic.Int32
		u := rawUpstream(t, func(n int, c net.Conn) {
			conns.Add(1)
			readRequest(bufio.NewReader(c)) // then close, unanswered
		})
		tr := newTestTransport(t, Limits{})
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if res, err := tr.RoundTrip(req); err == nil {
			res.Body.Close()
			t.Fatalf("status %d, want the connection's error", res.StatusCode)
		}
		if got := conns.Load(); got != 1 {
			t.Errorf("%d connections, want 1: a GET unanswered on a fresh connection is not sent again", got)
		}
	})
	t.Run("reused connection, body without GetBody", func(t *testing.T) {
		var conns, puts atomic.Int32
		u := rawUpstream(t, func(n int, c net.Conn) {
			conns.Add(1)
			br := bufio.NewReader(c)
			for {
				req, _, err := readRequest(br)
				if err != nil {
					return
				}
				if req.Method == http.MethodPut {
					puts.Add(1)
					return // close, unanswered
				}
				io.WriteString(c, okAnswer)
			}
		})
		tr := newTestTransport(t, Limits{})
		if _, body := get(t, tr, u); body != "ok" {
			t.Fatalf("first answer %q", body)
		}
		// A body of unknown length, sent chunked: sent again, it would
		// go out empty and still be a well-formed PUT.
		req, _ := http.NewRequest(http.MethodPut, u, io.NopCloser(strings.NewReader(`{"v":1}`)))
		if req.GetBody != nil || req.ContentLength != 0 {
			t.Fatal("the test needs a body of unknown length that cannot be had again")
		}
		res, err := tr.RoundTrip(req)
		if err == nil {
			res.Body.Close()
			t.Fatalf("status %d, want the connection's error", res.StatusCode)
		}
		if !errors.Is(err, io.EOF) {
			t.Errorf("error %v, want the upstream's close before its answer (io.EOF)", err)
		}
		if c, p := conns.Load(), puts.Load(); c != 1 || p != 1 {
			t.Errorf("%d connections and %d PUTs, want 1 and 1: a PUT whose body was read is not sent again", c, p)
		}
	})
}
