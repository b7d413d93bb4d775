package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpauth/mcpauth/examples/internal/cutoff"
)

// TestStartsWithResourceAndIssuerOnly: no --downstream and no
// MCPSERVER_CLIENT_SECRET is a working server without fetch_report, and the
// log says how to turn it on.
func TestStartsWithResourceAndIssuerOnly(t *testing.T) {
	t.Setenv("MCPSERVER_CLIENT_SECRET", "")
	cfg, err := parseFlags([]string{"--resource", "http://127.0.0.1:8080/mcp", "--issuer", unreachableIssuer})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	_, server, err := build(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("the server does not start with --resource and --issuer only: %v", err)
	}
	if !strings.Contains(logs.String(), "fetch_report is off") || !strings.Contains(logs.String(), "--downstream") || !strings.Contains(logs.String(), "MCPSERVER_CLIENT_SECRET") {
		t.Errorf("the log does not say how to enable fetch_report:\n%s", logs.String())
	}
	var names []string
	for _, tool := range listTools(t, server) {
		names = append(names, tool.Name)
	}
	if strings.Join(names, " ") != "admin_stats whoami" {
		t.Errorf("tools = %q, want admin_stats and whoami (no fetch_report without a downstream API)", names)
	}

	t.Run("with --downstream the secret is still required", func(t *testing.T) {
		cfg, err := parseFlags([]string{"--resource", "http://127.0.0.1:8080/mcp", "--issuer", unreachableIssuer, "--downstream", "http://127.0.0.1:8081/api"})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := build(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "MCPSERVER_CLIENT_SECRET") {
			t.Errorf("err = %v, want one naming MCPSERVER_CLIENT_SECRET", err)
		}
	})
	t.Run("with --downstream and the secret fetch_report is there", func(t *testing.T) {
		t.Setenv("MCPSERVER_CLIENT_SECRET", "s3cret-s3cret-s3cret")
		cfg, err := parseFlags([]string{"--resource", "http://127.0.0.1:8080/mcp", "--issuer", unreachableIssuer, "--downstream", "http://127.0.0.1:8081/api"})
		if err != nil {
			t.Fatal(err)
		}
		_, server, err := build(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, tool := range listTools(t, server) {
			found = found || tool.Name == "fetch_report"
		}
		if !found {
			t.Errorf("fetch_report is missing with --downstream and a secret")
		}
	})
}

func listTools(t *testing.T, server *mcp.Server) []*mcp.Tool {
	t.Helper()
	res, err := connectInMemory(t, server).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Tools
}

// TestHTTPServerCutsOffSlowAndIdleClients runs the server's http.Server with
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
	resource := "http://" + ln.Addr().String() + "/mcp"
	h, err := newServer(config{resource: resource, issuer: unreachableIssuer}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(h, timeouts{readHeader: 300 * time.Millisecond, read: 300 * time.Millisecond, write: time.Second, idle: 300 * time.Millisecond})
	go srv.Serve(ln)
	defer srv.Close()

	if err := cutoff.SlowBody(ln.Addr().String(), "/mcp", 10*time.Second); err != nil {
		t.Errorf("slow body: %v", err)
	}
	if err := cutoff.IdleKeepAlive(ln.Addr().String(), "/healthz", 10*time.Second); err != nil {
		t.Errorf("idle keep-alive: %v", err)
	}
}
