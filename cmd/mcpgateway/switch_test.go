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

// An upstream that answers 101 Switching Protocols to a request that
// asked for no upgrade (RFC 9110 §15.2.2, §7.8: a server switches only to
// a protocol the client's Upgrade names, and the gateway sends none) gets
// the client the forwarder's error answer (invalid status code), not a
// connection closed without an answer: net/http's transport hands the 101
// on with the connection as its body, which the forwarder refuses.
func TestForwarderRefusesAnUnaskedProtocolSwitch(t *testing.T) {
	up := earlyGatewayUpstream(t, func(int, *http.Request) (string, bool) {
		return switched, false
	})
	target, err := url.Parse(up)
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 1)
	f := &forwarder{target: target, transport: newTestTransport(t, Limits{}), onError: func(w http.ResponseWriter, r *http.Request, body []byte, err error) {
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

const switched = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"

// Through the gateway, the unasked 101 is a 502 with the JSON-RPC error
// -32603 under the request's id.
func TestGatewayAnswersAnUnaskedProtocolSwitchWith502(t *testing.T) {
	up := earlyGatewayUpstream(t, func(int, *http.Request) (string, bool) { return switched, false })
	s := newStack(t, false, earlyConfig(up))
	resp := rawPost(t, s, s.token(t, "user-bot"), "", initialize, nil)
	id, code, msg := rpcError(t, resp)
	if resp.StatusCode != http.StatusBadGateway || id != 1.0 || code != -32603 || !strings.Contains(msg, "invalid status code") {
		t.Fatalf("%d id=%v code=%d %q, want 502, -32603 under id 1", resp.StatusCode, id, code, msg)
	}
}
