package main

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// An upstream reached through net/http's transport (an https upstream)
// that answers 101 Switching Protocols to a request that asked for no
// upgrade (RFC 9110 §15.2.2, §7.8: a server switches only to a protocol
// the client's Upgrade names, and the gateway sends none) gets the client
// the forwarder's error answer (invalid status code), as h1Transport's
// upstreams do, not a connection closed without an answer.
func TestForwarderRefusesAnUnaskedProtocolSwitch(t *testing.T) {
	up := earlyGatewayUpstream(t, func(int, *http.Request) (string, bool) {
		return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", false
	})
	target, err := url.Parse(up)
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 1)
	f := &forwarder{target: target, transport: &http.Transport{}, onError: func(w http.ResponseWriter, r *http.Request, body []byte, err error) {
		failed <- err
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatalf("the client got no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("%d %q; want the error answer 502", resp.StatusCode, b)
	}
	if err := <-failed; !errors.Is(err, errUpstreamStatus) {
		t.Fatalf("the forwarder's error: %v, want an invalid status code", err)
	}
}
