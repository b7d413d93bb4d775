package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Hop-by-hop fields (RFC 9110 §7.6.1) stay on their hop in both directions;
// the upstream learns who the client is from X-Forwarded-*, never from what
// the client claims alone.
func TestGatewayDropsHopByHopFieldsAndSetsForwardedOnes(t *testing.T) {
	s := newStack(t, false, baseConfig)
	var got http.Header
	s.up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Connection", "X-Up-Hop")
		w.Header().Set("X-Up-Hop", "secret")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Up-End", "kept")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	})
	resp := rawPost(t, s, s.token(t, "user-bot"), "", initialize, map[string]string{
		"Connection":          "X-Client-Hop",
		"X-Client-Hop":        "drop me",
		"Proxy-Authorization": "Basic Zm9vOmJhcg==",
		"Te":                  "trailers, deflate",
		"Forwarded":           "for=203.0.113.9",
		"X-Forwarded-For":     "198.51.100.7",
		"X-Forwarded-Host":    "spoofed.example",
		"X-Forwarded-Proto":   "https",
		"DPoP":                "not-a-proof",
		"X-End-To-End":        "kept",
		"User-Agent":          "", // none: the upstream gets none either
		// Read as Mcp-Session-Id and Authorization by CGI and WSGI servers.
		"Mcp_Session_Id": "another-users-session",
		"Authorization_": "Bearer client-token",
	})
	io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for _, k := range []string{"Authorization", "Dpop", "X-Client-Hop", "Proxy-Authorization", "Forwarded", "Connection", "Keep-Alive"} {
		if v, ok := got[k]; ok {
			t.Errorf("the upstream got %s: %q", k, v)
		}
	}
	for k, v := range got {
		if strings.Contains(k, "_") {
			t.Errorf("the upstream got %s: %q", k, v)
		}
	}
	gwHost := strings.TrimPrefix(strings.TrimSuffix(s.resource, "/mcp"), "http://")
	for k, want := range map[string]string{
		"X-End-To-End":      "kept",
		"Te":                "trailers",
		"X-Forwarded-For":   "198.51.100.7, 127.0.0.1",
		"X-Forwarded-Host":  gwHost,
		"X-Forwarded-Proto": "http",
	} {
		if v := got.Values(k); len(v) != 1 || v[0] != want {
			t.Errorf("upstream %s = %q, want %q", k, v, want)
		}
	}
	if ua, ok := got["User-Agent"]; ok {
		t.Errorf("the client sent no User-Agent, the upstream got %q", ua)
	}
	for _, k := range []string{"X-Up-Hop", "Keep-Alive"} {
		if v, ok := resp.Header[k]; ok {
			t.Errorf("the client got %s: %q", k, v)
		}
	}
	if v := resp.Header.Get("X-Up-End"); v != "kept" {
		t.Errorf("X-Up-End = %q", v)
	}
}

// Calls made through the gateway reuse its keep-alive connections to the
// upstream: 8 clients calling concurrently need about 16 connections (the
// Go SDK's client also holds a GET stream open per session), not one per
// call. A call may start before the connection of the previous one is back
// in the pool (net/http's Transport then dials), hence the slack.
func TestGatewayReusesUpstreamConnections(t *testing.T) {
	s := newStack(t, false, baseConfig)
	inner := s.up.srv.Config.Handler
	var mu sync.Mutex
	conns := map[string]int{}
	s.up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr]++
		mu.Unlock()
		inner.ServeHTTP(w, r)
	})
	tok := s.token(t, "user-bot")
	const clients, calls = 8, 25
	sessions := make([]*mcp.ClientSession, clients)
	for i := range sessions {
		sessions[i] = s.connect(t, tok)
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for _, cs := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
				if err != nil || res.IsError {
					errs <- fmt.Errorf("echo: %v %+v", err, res)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	requests := 0
	for _, n := range conns {
		requests += n
	}
	if requests < clients*calls || len(conns) > 3*clients {
		t.Fatalf("%d requests over %d upstream connections, want at least %d over at most %d", requests, len(conns), clients*calls, 3*clients)
	}
}

// An upstream that sends an event stream's header and then works for a
// while: the client gets the header (and knows the stream is open) without
// waiting for the first event.
func TestGatewaySendsALateStreamsHeader(t *testing.T) {
	release := make(chan struct{})
	s := newStack(t, false, baseConfig)
	s.up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		fmt.Fprint(w, "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"content\":[]}}\n\n")
	})
	done := make(chan *http.Response, 1)
	go func() {
		done <- rawPost(t, s, s.token(t, "user-bot"), "", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, nil)
	}()
	var resp *http.Response
	select {
	case resp = <-done:
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("no response header while the upstream's first event was pending")
	}
	close(release)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || !strings.Contains(string(body), `"id":5`) {
		t.Fatalf("body %q %v", body, err)
	}
}

// An upstream that breaks off in the middle of a stream: the client's
// response breaks off too, it does not end as if the answer were complete.
func TestGatewayAbortsTheAnswerWhenTheUpstreamBreaksOff(t *testing.T) {
	s := newStack(t, false, baseConfig)
	s.up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"tick\"}}\n\n")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection is cut, no end chunk
	})
	resp := rawPost(t, s, s.token(t, "user-bot"), "", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, nil)
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "id: 1") {
		t.Fatalf("first line %q %v", first, err)
	}
	rest, err := io.ReadAll(br)
	if err == nil {
		t.Fatalf("the stream ended cleanly after %q", rest)
	}
	// The call is audited all the same, as one that got no answer.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(s.audit.String(), `"result":"no_response"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no audit line for the broken-off call: %s", s.audit.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(s.audit.String(), `"event":"tool.call"`) {
		t.Fatalf("audit: %s", s.audit.String())
	}
}

// Trailers pass through, except an Mcp-Session-Id: the client only ever
// holds session IDs the gateway signed, never the upstream's own, whether
// declared in advance or sent as an undeclared trailer (http.TrailerPrefix).
func TestGatewayPassesNoSessionIDInTrailers(t *testing.T) {
	s := newStack(t, false, baseConfig)
	s.up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Trailer", "Mcp-Session-Id, X-Up-Checksum")
		// An event stream is passed on as it arrives, chunked, so
		// trailers can follow it.
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
		w.(http.Flusher).Flush()
		w.Header().Set("Mcp-Session-Id", "upstream-raw-session")
		w.Header().Set("X-Up-Checksum", "abc")
		w.Header().Set(http.TrailerPrefix+"mcp-session-id", "upstream-raw-session-2")
	})
	resp := rawPost(t, s, s.token(t, "user-bot"), "", initialize, nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got := resp.Trailer.Get("X-Up-Checksum"); got != "abc" {
		t.Errorf("trailer X-Up-Checksum = %q, want it passed on", got)
	}
	for k, v := range resp.Trailer {
		if strings.EqualFold(k, "Mcp-Session-Id") {
			t.Errorf("the client got the trailer %s: %q", k, v)
		}
	}
	for _, v := range resp.Header.Values("Mcp-Session-Id") {
		if strings.Contains(v, "upstream-raw-session") {
			t.Errorf("the client got the upstream's raw session ID in the header: %q", v)
		}
	}
}
