package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// A POST body that does not arrive within limits.read_body_timeout is
// answered 408 and its connection closed, so a client trickling bodies
// cannot hold the gateway's connections (it has no read timeout, which
// would cut event streams); an answer streaming longer than the timeout,
// and the next request on the connection, are not affected.
func TestGatewayBoundsTheTimeABodyTakes(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s := newStack(t, false, baseConfig+fmt.Sprintf("limits: {read_body_timeout: %s}\n", timeout))
	s.up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		// The answer takes longer than a body may.
		time.Sleep(3 * timeout)
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
	})
	tok := s.token(t, "user-bot")
	u, _ := url.Parse(s.resource)
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// A bound on a gateway that never answers, not a measurement.
		c.SetDeadline(time.Now().Add(30 * time.Second))
		return c, bufio.NewReader(c)
	}
	head := func(length int) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
			"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n", u.Path, u.Host, tok, length)
	}

	t.Run("answers 408 to a body that stops arriving, and closes", func(t *testing.T) {
		c, br := dial()
		io.WriteString(c, head(len(initialize))+initialize[:10])
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Errorf("status %d, want 408", resp.StatusCode)
		}
		if _, err := br.ReadByte(); err == nil {
			t.Errorf("the connection is still open")
		}
	})

	t.Run("keeps a stream longer than the timeout, and the connection after it", func(t *testing.T) {
		c, br := dial()
		for i := 0; i < 2; i++ {
			io.WriteString(c, head(len(initialize))+initialize)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 || !strings.Contains(string(b), `"result":{}`) {
				t.Fatalf("request %d: %d %q %v", i, resp.StatusCode, b, err)
			}
		}
	})
}
