package main

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// Pool sizes and bounds of the upstream hop. The gateway has one upstream,
// so the per-host limit is the pool's.
const (
	upstreamMaxIdleConns           = 256
	upstreamIdleConnTimeout        = 90 * time.Second
	upstreamMaxResponseHeaderBytes = 1 << 20
)

// newUpstreamTransport is net/http's Transport for the hop to the upstream:
//
//   - a pool of keep-alive connections (RFC 9112 §9.3), each read in the
//     background while idle, so one the upstream closes (Node closes idle
//     connections after 5 s) is closed on this side when its close arrives;
//   - limits.upstream_dial_timeout bounds the connect and the TLS
//     handshake, limits.upstream_header_timeout the wait for an answer's
//     header once the request is written, and upstreamMaxResponseHeaderBytes
//     its size (with those of the 1xx interim answers before it);
//   - the answer is asked for and passed on uncompressed (the forwarder
//     sends Accept-Encoding: identity; the transport adds no gzip of its
//     own), and the request's Expect: 100-continue is sent with its body at
//     once (RFC 9110 §10.1.1: the body is in memory, and a client need not
//     wait);
//   - a request is sent again on a new connection only when a reused one
//     closed before its answer and RFC 9110 §9.2.2 makes that safe (GET,
//     HEAD, OPTIONS, TRACE or an Idempotency-Key, with a body that can be
//     had again; or nothing of it was written);
//   - an https upstream is spoken to in HTTP/2 when it offers it (ALPN).
//
// An http upstream's connections are upstreamConns: each write of a
// request has limits.upstream_header_timeout, and an answer sent before
// the body was read whole is passed on.
func newUpstreamTransport(l Limits, scheme string) *http.Transport {
	dialer := &net.Dialer{Timeout: l.UpstreamDialTimeout, KeepAlive: 30 * time.Second}
	dial := dialer.DialContext
	if scheme == "http" && l.UpstreamHeaderTimeout > 0 {
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return newUpstreamConn(c, l.UpstreamHeaderTimeout), nil
		}
	}
	return &http.Transport{
		DialContext:            dial,
		TLSHandshakeTimeout:    l.UpstreamDialTimeout,
		ResponseHeaderTimeout:  l.UpstreamHeaderTimeout,
		MaxResponseHeaderBytes: upstreamMaxResponseHeaderBytes,
		MaxIdleConns:           upstreamMaxIdleConns,
		MaxIdleConnsPerHost:    upstreamMaxIdleConns,
		IdleConnTimeout:        upstreamIdleConnTimeout,
		DisableCompression:     true,
		ForceAttemptHTTP2:      true,
	}
}

// upstreamConn is a connection to an http upstream. net/http's Transport
// writes a request on one goroutine while another reads the answer; it
// bounds neither the write nor a race between the two when the upstream
// answers before it has read the whole body (RFC 9112 §9.3, §9.6: a 413
// or a 401 to a large body) and then stops reading or closes. So:
//
//   - each write has timeout to complete (a large body goes out in 32 KiB
//     writes), and an upstream that stops reading fails the write instead
//     of holding the request until the client goes away;
//   - a write that failed returns its error only once the Transport has
//     closed the connection, or timeout has passed: the Transport's reader
//     closes it once it has passed on the upstream's answer, or found the
//     connection's end without one, so the answer the upstream sent, if
//     any, reaches the caller instead of the write's error.
type upstreamConn struct {
	net.Conn
	timeout   time.Duration
	closed    chan struct{}
	closeOnce sync.Once
}

func newUpstreamConn(c net.Conn, timeout time.Duration) *upstreamConn {
	return &upstreamConn{Conn: c, timeout: timeout, closed: make(chan struct{})}
}

func (c *upstreamConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(p)
	if err != nil {
		t := time.NewTimer(c.timeout)
		select {
		case <-c.closed:
		case <-t.C:
		}
		t.Stop()
	}
	return n, err
}

func (c *upstreamConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}
