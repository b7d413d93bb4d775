package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// bigInitialize is an initialize request of several MB, within the
// max_request_bytes of earlyConfig and larger than what the loopback
// socket buffers hold while the upstream does not read. (Made by each
// test: a package variable would sit in the heap of every benchmark.)
func bigInitialize() string {
	return strings.Replace(initialize, `"clientInfo"`, `"pad":"`+strings.Repeat("a", 8<<20)+`","clientInfo"`, 1)
}

const earlyLimits = "limits: {max_request_bytes: 16777216}\n"

// earlyConfig is baseConfig with the upstream at url.
func earlyConfig(url string) string {
	return strings.Replace(baseConfig, "upstream: UPSTREAM", "upstream: "+url+"/mcp", 1) + earlyLimits
}

// jsonAnswer is an upstream's 200 answer with a JSON-RPC result.
const jsonAnswer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 36\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"

// earlyGatewayUpstream serves the gateway's requests: answer(i, req)
// returns what to send for the i-th request (counted over all
// connections) and whether to send it after reading 1 KiB of the body and
// close (the rest unread), instead of after the whole body.
func earlyGatewayUpstream(t *testing.T, answer func(i int, req *http.Request) (string, bool)) string {
	var mu sync.Mutex
	next := 0
	return rawUpstream(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			mu.Lock()
			i := next
			next++
			mu.Unlock()
			a, early := answer(i, req)
			if early {
				io.CopyN(io.Discard, req.Body, 1<<10)
				io.WriteString(c, a)
				return
			}
			io.Copy(io.Discard, req.Body)
			io.WriteString(c, a)
		}
	})
}

// An upstream that refuses a large body with 413 before reading it and
// closes gets the client its 413 and its body, not a 502 of the gateway's.
func TestGatewayPassesOnAnUpstreamsEarly413(t *testing.T) {
	const body = `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"request too large for this server"}}`
	url := earlyGatewayUpstream(t, func(int, *http.Request) (string, bool) {
		return "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body, true
	})
	s := newStack(t, false, earlyConfig(url))
	big := bigInitialize()
	resp := rawPost(t, s, s.token(t, "user-bot"), "", big, nil)
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge || string(b) != body {
		t.Fatalf("%d %q (%v), want the upstream's 413 and body", resp.StatusCode, b, err)
	}
}

const early401 = "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer error=\"invalid_token\"\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"

// An upstream that refuses the gateway's client credentials token with a
// 401 before reading a large body, and closes, still has the token
// dropped and the request sent once more, whole, with a new one.
func TestGatewayRetriesAnEarly401WithANewClientCredentialsToken(t *testing.T) {
	var mu sync.Mutex
	var seen []string // token and body length of each request
	url := earlyGatewayUpstream(t, func(i int, req *http.Request) (string, bool) {
		mu.Lock()
		seen = append(seen, req.Header.Get("Authorization")+" "+strconv.FormatInt(req.ContentLength, 10))
		mu.Unlock()
		if i == 0 {
			return early401, true
		}
		return jsonAnswer, false
	})
	s := newStack(t, false, earlyConfig(url)+`
upstream_auth:
  client_credentials: {client_id: gw, client_secret: "${GW_SECRET}", resource: UPSTREAM}
`)
	big := bigInitialize()
	resp := rawPost(t, s, s.token(t, "user-bot"), "", big, nil)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"result"`) {
		t.Fatalf("%d %s, want the answer to the request sent again", resp.StatusCode, b)
	}
	mu.Lock()
	defer mu.Unlock()
	length := " " + strconv.Itoa(len(big))
	if len(seen) != 2 || seen[0] == seen[1] || !strings.HasPrefix(seen[0], "Bearer ") || !strings.HasSuffix(seen[0], length) ||
		!strings.HasPrefix(seen[1], "Bearer ") || !strings.HasSuffix(seen[1], length) {
		t.Fatalf("the upstream saw %.60q, want two requests of %d bytes with two tokens", seen, len(big))
	}
}

// With token exchange, an early 401 is the upstream refusing the
// gateway's credentials (its challenge is not passed on), not an
// unreachable upstream.
func TestGatewaySeesAnEarly401OfTheExchangedToken(t *testing.T) {
	url := earlyGatewayUpstream(t, func(int, *http.Request) (string, bool) { return early401, true })
	s := newStack(t, false, earlyConfig(url)+`
upstream_auth:
  exchange: {client_id: gw, client_secret: "${GW_SECRET}", resource: UPSTREAM, scopes: [upstream:call]}
`)
	big := bigInitialize()
	resp := rawPost(t, s, s.token(t, "user-bot"), "", big, nil)
	id, code, msg := rpcError(t, resp)
	if resp.StatusCode != http.StatusBadGateway || id != 1.0 || code != -32603 || !strings.Contains(msg, "refused the gateway's credentials") {
		t.Fatalf("%d id=%v code=%d %q", resp.StatusCode, id, code, msg)
	}
	if h := resp.Header.Get("WWW-Authenticate"); h != "" {
		t.Errorf("the upstream's challenge reached the client: %q", h)
	}
}

// A client's Expect: 100-continue gets its 100 Continue from the gateway
// (net/http's server sends it as the body is read) and its answer from the
// upstream, which gets the field and the body at once.
func TestGatewayAnswersARequestThatExpects100Continue(t *testing.T) {
	var mu sync.Mutex
	var expect []string
	url := earlyGatewayUpstream(t, func(_ int, req *http.Request) (string, bool) {
		mu.Lock()
		expect = append(expect, req.Header.Get("Expect"))
		mu.Unlock()
		if req.Header.Get("Expect") != "" {
			return "HTTP/1.1 100 Continue\r\n\r\n" + jsonAnswer, false
		}
		return jsonAnswer, false
	})
	s := newStack(t, false, earlyConfig(url))
	tok := s.token(t, "user-bot")
	for i := range 2 {
		var continued atomic.Bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{Got100Continue: func() { continued.Store(true) }})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.resource, strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Expect", "100-continue")
		// ExpectContinueTimeout set: the client waits for the 100 Continue
		// before it sends the body.
		client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Minute}, Timeout: 2 * time.Minute}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"result"`) || !continued.Load() {
			t.Fatalf("request %d: %d %s, 100 Continue seen: %v", i, resp.StatusCode, b, continued.Load())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(expect) != "[100-continue 100-continue]" {
		t.Fatalf("the upstream saw Expect %q", expect)
	}
}

// An upstream that stops reading a large body, with an answer sent or
// not, holds the client no longer than limits.upstream_header_timeout per
// stall: its 413 is passed on, its silence is a 504.
func TestGatewayBoundsAnUpstreamThatStopsReadingTheBody(t *testing.T) {
	for _, c := range []struct {
		answer string
		status int
	}{{early413, http.StatusRequestEntityTooLarge}, {"", http.StatusGatewayTimeout}} {
		release := make(chan struct{})
		url := rawUpstream(t, func(_ int, conn net.Conn) {
			req, err := http.ReadRequest(bufio.NewReader(conn))
			if err != nil {
				return
			}
			io.CopyN(io.Discard, req.Body, 1<<10)
			io.WriteString(conn, c.answer)
			<-release // neither reads nor closes
		})
		t.Cleanup(func() { close(release) })
		s := newStack(t, false, strings.Replace(earlyConfig(url), earlyLimits,
			"limits: {max_request_bytes: 16777216, upstream_header_timeout: 300ms}\n", 1))
		resp := rawPost(t, s, s.token(t, "user-bot"), "", bigInitialize(), nil)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.status {
			t.Errorf("answer %.30q: %d %.200s, want %d", c.answer, resp.StatusCode, b, c.status)
		}
	}
}
