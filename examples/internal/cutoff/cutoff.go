// Package cutoff checks, over real TCP connections, that an HTTP server cuts
// off clients that hold a connection without making progress: one that sends
// a request body a byte at a time, and one that keeps an idle keep-alive
// connection open. The example servers' tests use it; net/http has no read,
// write or idle timeouts unless the server sets them.
package cutoff

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// SlowBody sends a POST to path on addr whose body (Content-Length 4096)
// trickles in one byte every 50ms, and reports whether the server closed the
// connection within bound. A server without a read timeout waits for the body
// forever, so SlowBody returns an error once bound has passed.
func SlowBody(addr, path string, bound time.Duration) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	head := "POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n" +
		"Accept: application/json, text/event-stream\r\nContent-Length: 4096\r\n\r\n{"
	if _, err := io.WriteString(conn, head); err != nil {
		return err
	}
	closed := make(chan error, 1)
	go func() { closed <- readUntilClosed(conn, conn, bound) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-closed:
			return err
		case <-tick.C:
			// Once the server has closed its side, writes fail; keep
			// waiting for the reader's verdict.
			_, _ = conn.Write([]byte(" "))
		}
	}
}

// IdleKeepAlive sends one complete GET for path on a keep-alive connection,
// reads the response, then sends nothing more and reports whether the server
// closed the connection within bound.
func IdleKeepAlive(addr, path string, bound time.Duration) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: "+addr+"\r\nConnection: keep-alive\r\n\r\n"); err != nil {
		return err
	}
	br := bufio.NewReader(conn)
	conn.SetReadDeadline(time.Now().Add(bound))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("reading the response: %w", err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Errorf("reading the response body: %w", err)
	}
	resp.Body.Close()
	if resp.Close {
		return errors.New("the server closed the connection after the response; the idle test needs keep-alive")
	}
	return readUntilClosed(br, conn, bound)
}

// readUntilClosed reads r (conn, or a reader buffering it) and discards what
// it reads until the peer closes the connection (nil) or bound passes (an
// error).
func readUntilClosed(r io.Reader, conn net.Conn, bound time.Duration) error {
	conn.SetReadDeadline(time.Now().Add(bound))
	buf := make([]byte, 4096)
	for {
		_, err := r.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("the server kept the connection open for %v", bound)
		}
		if errors.Is(err, io.EOF) || strings.Contains(err.Error(), "connection reset") {
			return nil
		}
		return fmt.Errorf("reading: %w", err)
	}
}
