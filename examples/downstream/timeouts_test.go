package main

import (
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/examples/internal/cutoff"
)

// TestHTTPServerCutsOffSlowAndIdleClients runs the API's http.Server with
// short timeouts over real TCP: a body trickling in a byte at a time and an
// idle keep-alive connection are both closed by the server.
func TestHTTPServerCutsOffSlowAndIdleClients(t *testing.T) {
	for name, d := range map[string]time.Duration{"readHeader": defaultTimeouts.readHeader, "read": defaultTimeouts.read, "write": defaultTimeouts.write, "idle": defaultTimeouts.idle} {
		if d <= 0 {
			t.Errorf("default %s timeout is %v", name, d)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h, err := newAPI(config{resource: "http://" + ln.Addr().String() + "/api", issuer: "http://127.0.0.1:1"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(h, timeouts{readHeader: 300 * time.Millisecond, read: 300 * time.Millisecond, write: time.Second, idle: 300 * time.Millisecond})
	go srv.Serve(ln)
	defer srv.Close()

	if err := cutoff.SlowBody(ln.Addr().String(), "/api/report", 10*time.Second); err != nil {
		t.Errorf("slow body: %v", err)
	}
	if err := cutoff.IdleKeepAlive(ln.Addr().String(), "/healthz", 10*time.Second); err != nil {
		t.Errorf("idle keep-alive: %v", err)
	}
}
