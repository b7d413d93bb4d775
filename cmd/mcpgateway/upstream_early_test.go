package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// bigBody is larger than what the loopback socket buffers hold while the
// upstream does not read, so writing it fails once the upstream closes.
// (Made by each test: a package variable would sit in the heap of every
// benchmark.)
func bigBody() []byte { return bytes.Repeat([]byte("a"), 8<<20) }

const early413 = "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: 14\r\n\r\nbody too large"

// earlyUpstream answers a request to /early after reading 1 KiB of its
// body with answer and closes the connection (the rest of the body unread,
// so the close resets it); other requests get okAnswer after their body.
func earlyUpstream(t *testing.T, answer string, conns *atomic.Int32) string {
	return rawUpstream(t, func(n int, c net.Conn) {
		conns.Add(1)
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if req.URL.Path == "/early" {
				io.CopyN(io.Discard, req.Body, 1<<10)
				io.WriteString(c, answer)
				return
			}
			io.Copy(io.Discard, req.Body)
			io.WriteString(c, okAnswer)
		}
	})
}

func postBytes(t *testing.T, tr http.RoundTripper, url string, body []byte) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("POST %s of %d bytes: %v", url, len(body), err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatalf("POST %s: body: %v", url, err)
	}
	return res, string(b)
}

// An upstream may answer before it has read the whole body and close
// (RFC 9112 §9.3, §9.6): writing the rest fails, and the answer that came
// is passed on, on a new connection and on a reused one; neither
// connection is used again.
func TestUpstreamTransportPassesOnAnAnswerSentBeforeTheBodyWasRead(t *testing.T) {
	var conns atomic.Int32
	url := earlyUpstream(t, early413, &conns)
	tr := newTestTransport(t, Limits{UpstreamHeaderTimeout: 10 * time.Second})

	res, body := postBytes(t, tr, url+"/early", bigBody())
	if res.StatusCode != http.StatusRequestEntityTooLarge || body != "body too large" {
		t.Fatalf("on a new connection: %d %q, want the upstream's 413", res.StatusCode, body)
	}
	if _, body := get(t, tr, url+"/small"); body != "ok" {
		t.Fatalf("after the early answer: %q", body)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (none reused after an early answer)", n)
	}
	// The connection of /small is reused for the next large POST.
	res, body = postBytes(t, tr, url+"/early", bigBody())
	if res.StatusCode != http.StatusRequestEntityTooLarge || body != "body too large" {
		t.Fatalf("on a reused connection: %d %q, want the upstream's 413", res.StatusCode, body)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the POST on the pooled one, not sent again)", n)
	}
	if _, body := get(t, tr, url+"/small"); body != "ok" || conns.Load() != 3 {
		t.Errorf("after the second early answer: %q on %d connections, want a new one", body, conns.Load())
	}
}

// An upstream that closes without an answer while the body is written is
// an error, as before: no answer is made up.
func TestUpstreamTransportReportsAWriteFailureWithoutAnAnswer(t *testing.T) {
	var conns atomic.Int32
	url := earlyUpstream(t, "", &conns)
	tr := newTestTransport(t, Limits{})
	req, _ := http.NewRequest(http.MethodPost, url+"/early", bytes.NewReader(bigBody()))
	res, err := tr.RoundTrip(req)
	if err == nil {
		res.Body.Close()
		t.Fatalf("an upstream that closed without answering: %d, want an error", res.StatusCode)
	}
}

// answerUpstream answers each request on a connection with the next of
// answers (written as given, after the request's body), counting
// connections; a connection with no answer left reads and answers
// "unexpected" to show it was used again.
func answerUpstream(t *testing.T, conns *atomic.Int32, answers ...string) string {
	return rawUpstream(t, func(n int, c net.Conn) {
		conns.Add(1)
		br := bufio.NewReader(c)
		for i := 0; ; i++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			switch {
			case req.URL.Path == "/next":
				// Any connection answers /next: the one it came on tells.
				io.WriteString(c, okAnswer)
			case i < len(answers):
				io.WriteString(c, answers[i])
			default:
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nunexpected")
			}
		}
	})
}

// Answers that end the connection (Connection: close, HTTP/1.0 without
// keep-alive, RFC 9112 §9.3) close it; an answer with bytes after its end
// has its connection closed by the transport's read of the idle
// connection ("Unsolicited response"), and the next request goes on a new
// one. An answer with both Transfer-Encoding and Content-Length is read
// chunked without Content-Length (RFC 9112 §6.3 item 3), a 204 with no
// body whatever its framing fields say (RFC 9110 §15.3.5); net/http keeps
// those connections, and the next answer is read from them correctly.
func TestUpstreamTransportKeepsOnlyConnectionsWhoseAnswerEndedCleanly(t *testing.T) {
	const smuggled = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled"
	for _, c := range []struct {
		name, method, answer, body string
		status                     int
		length                     int64
		reuse                      bool
	}{
		{"an HTTP/1.0 answer without keep-alive closes", "GET", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", "ok", 200, 2, false},
		{"an HTTP/1.0 answer with keep-alive keeps", "GET", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", "ok", 200, 2, true},
		{"Connection: close on a 200 closes", "GET", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", "ok", 200, 2, false},
		{"Connection: close on a 204 closes", "DELETE", "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n", "", 204, 0, false},
		{"an HTTP/1.0 204 closes", "DELETE", "HTTP/1.0 204 No Content\r\n\r\n", "", 204, 0, false},
		{"Transfer-Encoding with Content-Length is read chunked", "GET",
			"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "hello", 200, -1, true},
		{"Content-Length after Transfer-Encoding, in another case, is dropped too", "GET",
			"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncONTENT-lENGTH: 40\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "hello", 200, -1, true},
		{"a chunked answer alone keeps", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "hello", 200, -1, true},
		{"a 204 with Content-Length has no body", "DELETE", "HTTP/1.1 204 No Content\r\nContent-Length: 8\r\n\r\n", "", 204, 0, true},
		{"a 204 with Transfer-Encoding has no body", "DELETE", "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n", "", 204, 0, true},
		{"a 204 with a body in the same write closes", "DELETE", "HTTP/1.1 204 No Content\r\n\r\n" + smuggled, "", 204, 0, false},
		{"a 204 with Content-Length: 0 keeps", "DELETE", "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", "", 204, 0, true},
		{"a 304 with the representation's Content-Length keeps", "GET", "HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\n\r\n", "", 304, 0, true},
		{"a HEAD answer with Content-Length keeps and reads no body", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", "", 200, 1000, true},
		{"a HEAD answer with Transfer-Encoding keeps", "HEAD", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "", 200, -1, true},
		{"bytes after the answer's end close", "GET", okAnswer + smuggled, "ok", 200, 2, false},
		{"bytes after a chunked answer's end close", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n" + smuggled, "ok", 200, -1, false},
		{"100 Continue, then the answer, keeps", "POST", "HTTP/1.1 100 Continue\r\n\r\n" + okAnswer, "ok", 200, 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var conns atomic.Int32
			url := answerUpstream(t, &conns, c.answer)
			tr := newTestTransport(t, Limits{})
			closes := countCloses(tr)
			var rd io.Reader
			if c.method == http.MethodPost {
				rd = strings.NewReader(`{"x":1}`)
			}
			req, _ := http.NewRequest(c.method, url+"/first", rd)
			res, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil || string(b) != c.body || res.StatusCode != c.status || res.ContentLength != c.length {
				t.Fatalf("%d %q (length %d), %v; want %d %q (length %d)", res.StatusCode, b, res.ContentLength, err, c.status, c.body, c.length)
			}
			if res.Header.Get("Transfer-Encoding") != "" || res.ContentLength < 0 && res.Header.Get("Content-Length") != "" {
				t.Errorf("framing fields passed on: %v", res.Header)
			}
			if !c.reuse {
				// Closed by the transport's reader, which may run after
				// the body's end has reached the caller.
				waitFor(t, "the connection closed", func() bool { return closes.Load() == 1 })
			}
			if _, body := get(t, tr, url+"/next"); body != "ok" {
				t.Fatalf("the next request got %q", body)
			}
			if reused := conns.Load() == 1; reused != c.reuse {
				t.Errorf("connection reused: %v, want %v (%d connections)", reused, c.reuse, conns.Load())
			}
		})
	}
}

// Bytes the upstream sends on an idle connection, after an answer the
// transport has read, are seen by its read of the idle connection, which
// closes it; the next request goes on a new one. (A request that takes the
// connection from the pool before that read has run would get them as its
// answer: net/http does not look at a pooled connection before it uses
// it, so the test waits for the close.)
func TestUpstreamTransportClosesAnIdleConnectionThatSendsStrayBytes(t *testing.T) {
	const smuggled = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled"
	var conns atomic.Int32
	read := make(chan struct{})
	sent := make(chan struct{})
	url := rawUpstream(t, func(n int, c net.Conn) {
		conns.Add(1)
		br := bufio.NewReader(c)
		for i := 0; ; i++ {
			if _, _, err := readRequest(br); err != nil {
				return
			}
			io.WriteString(c, okAnswer)
			if n == 0 && i == 0 {
				<-read
				io.WriteString(c, smuggled)
				close(sent)
			}
		}
	})
	tr := newTestTransport(t, Limits{})
	closes := countCloses(tr)
	if _, body := get(t, tr, url); body != "ok" {
		t.Fatalf("first answer %q", body)
	}
	close(read)
	<-sent
	waitFor(t, "the connection closed", func() bool { return closes.Load() == 1 })
	if _, body := get(t, tr, url); body != "ok" {
		t.Fatalf("the next request got %q", body)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the one with stray bytes closed)", n)
	}
}

// The headers of 1xx interim answers count against MaxResponseHeaderBytes
// with the final answer's, as in net/http: an upstream cannot keep the
// transport reading interim answers without end.
func TestUpstreamTransportBoundsTheHeadersOfInterimAnswers(t *testing.T) {
	var conns atomic.Int32
	hints := strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n", 100)
	url := answerUpstream(t, &conns, hints+okAnswer)
	tr := newTestTransport(t, Limits{})
	tr.MaxResponseHeaderBytes = 4 << 10
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if res, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "exceeded 4096 bytes") {
		if res != nil {
			res.Body.Close()
		}
		t.Errorf("100 interim answers of %d bytes under a 4 KiB limit: %v, want the limit's error", len(hints), err)
	}
	url = answerUpstream(t, &conns, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"+okAnswer)
	if res, body := get(t, tr, url); res.StatusCode != 200 || body != "ok" {
		t.Errorf("one interim answer: %d %q", res.StatusCode, body)
	}
}

// A request with Expect: 100-continue goes out with its body at once (RFC
// 9110 §10.1.1: the client need not wait); the upstream's 100 Continue is
// skipped and its final answer read, over a connection kept.
func TestUpstreamTransportSendsAnExpectContinueRequestAtOnce(t *testing.T) {
	var conns atomic.Int32
	got := make(chan string, 2)
	url := rawUpstream(t, func(n int, c net.Conn) {
		conns.Add(1)
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			// Go's server: the 100 Continue goes out when the handler
			// reads the body; here it goes out first, as many do.
			if req.Header.Get("Expect") == "100-continue" {
				io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n")
			}
			b, _ := io.ReadAll(req.Body)
			got <- req.Header.Get("Expect") + " " + string(b)
			io.WriteString(c, okAnswer)
		}
	})
	tr := newTestTransport(t, Limits{})
	for range 2 {
		res, err := post(t, tr, url, `{"x":1}`, http.Header{"Expect": {"100-continue"}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || string(b) != "ok" {
			t.Fatalf("%d %q", res.StatusCode, b)
		}
		if s := <-got; s != `100-continue {"x":1}` {
			t.Errorf("the upstream got %q", s)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// An upstream that answers early and then neither reads the rest of the
// body nor closes fails the body's write after ResponseHeaderTimeout
// without progress; its answer is passed on. One that does not answer
// either is a timeout.
func TestUpstreamTransportPassesOnAnEarlyAnswerOfAnUpstreamThatStopsReading(t *testing.T) {
	for _, c := range []struct{ name, answer string }{{"with an answer", early413}, {"without", ""}} {
		t.Run(c.name, func(t *testing.T) {
			var conns atomic.Int32
			release := make(chan struct{})
			url := rawUpstream(t, func(n int, conn net.Conn) {
				conns.Add(1)
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err != nil {
					return
				}
				io.CopyN(io.Discard, req.Body, 1<<10)
				io.WriteString(conn, c.answer)
				<-release // neither reads nor closes
			})
			t.Cleanup(func() { close(release) })
			tr := newTestTransport(t, Limits{UpstreamHeaderTimeout: 200 * time.Millisecond})
			req, _ := http.NewRequest(http.MethodPost, url+"/early", bytes.NewReader(bigBody()))
			res, err := tr.RoundTrip(req)
			if c.answer == "" {
				var ne net.Error
				if !errors.As(err, &ne) || !ne.Timeout() {
					if res != nil {
						res.Body.Close()
					}
					t.Fatalf("no answer: %v (%T), want a timeout", err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil || res.StatusCode != http.StatusRequestEntityTooLarge || string(b) != "body too large" {
				t.Fatalf("%d %q %v, want the upstream's 413", res.StatusCode, b, err)
			}
		})
	}
}
