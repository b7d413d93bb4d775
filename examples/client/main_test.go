package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/examples/internal/cutoff"
)

func TestRunRefusesBadFlags(t *testing.T) {
	tests := []struct {
		name string
		cfg  config
		want string
	}{
		{"arguments that are not a JSON object are refused", config{args: "[1]", callback: "127.0.0.1:0"}, "--args"},
		{"a callback on a non-loopback address is refused", config{args: "{}", callback: "0.0.0.0:0"}, "loopback"},
		{"a callback on a host name is refused", config{args: "{}", callback: "localhost:0"}, "loopback"},
		{"a CIMD URL that is not https is refused", config{args: "{}", callback: "127.0.0.1:0", clientMetadataURL: "http://example.com/client.json"}, "HTTPS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.server, tc.cfg.timeout = "http://127.0.0.1:1/mcp", 5*time.Second
			err := run(context.Background(), tc.cfg, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run() = %v, want an error about %q", err, tc.want)
			}
		})
	}
}

func TestCallbackReceivesTheAuthorizationResponse(t *testing.T) {
	tests := []struct {
		name    string
		query   string
		status  int
		wantErr string
		code    string
	}{
		{"a code with state and iss is handed over", "?code=abc&state=xyz&iss=http%3A%2F%2F127.0.0.1%3A9000", 200, "", "abc"},
		{"an error response is reported with its code", "?error=access_denied&error_description=no", 400, "access_denied", ""},
		{"a response without code is an error", "?state=xyz", 400, "without code", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cb, err := newCallback("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer cb.Close()
			resp, err := http.Get(cb.redirectURI + tc.query)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if strings.Contains(string(body), "<script") {
				t.Errorf("the callback page echoes markup: %s", body)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			res, err := cb.wait(ctx)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("wait() = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || res.Code != tc.code || res.State != "xyz" || res.Iss != "http://127.0.0.1:9000" {
				t.Fatalf("wait() = %+v, %v", res, err)
			}
		})
	}
}

func TestCallbackEscapesTheErrorDescription(t *testing.T) {
	cb, err := newCallback("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	resp, err := http.Get(cb.redirectURI + "?error=x&error_description=%3Cscript%3Ealert(1)%3C%2Fscript%3E")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), "<script>") || !strings.Contains(string(body), "&lt;script&gt;") {
		t.Errorf("error description not escaped: %s", body)
	}
}

// TestCallbackCutsOffSlowAndIdleClients: the redirect endpoint closes a
// connection whose body trickles in and an idle keep-alive connection.
func TestCallbackCutsOffSlowAndIdleClients(t *testing.T) {
	old := callbackTimeout
	callbackTimeout = 300 * time.Millisecond
	defer func() { callbackTimeout = old }()
	cb, err := newCallback("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	addr := strings.TrimSuffix(strings.TrimPrefix(cb.redirectURI, "http://"), "/callback")
	if err := cutoff.SlowBody(addr, "/callback", 10*time.Second); err != nil {
		t.Errorf("slow body: %v", err)
	}
	if err := cutoff.IdleKeepAlive(addr, "/callback?code=c&iss=x", 10*time.Second); err != nil {
		t.Errorf("idle keep-alive: %v", err)
	}
}
