// Command mcpserver is an example MCP server built with the official Go SDK
// (Streamable HTTP at the path of --resource, e.g. /mcp) and protected by
// rsmiddleware, as the MCP authorization specification asks:
//
//   - RFC 9728 protected resource metadata at the path-inserted well-known URL
//     (/.well-known/oauth-protected-resource/mcp) and at the root form;
//   - 401 challenges naming that document; only tokens whose audience is
//     --resource are accepted;
//   - every request needs scope mcp:tools; tools/call of admin_stats needs
//     mcp:admin too, and a token without it gets a 403 insufficient_scope
//     step-up challenge (rsmiddleware's tool -> scope mapping);
//   - MCP sessions are bound to the user who opened them;
//   - fetch_report calls the downstream API with a token obtained by RFC 8693
//     token exchange (rsmiddleware's exchange RoundTripper), never with the
//     user's token, which the middleware strips before the handler runs.
//
// Usage: --resource and --issuer are all it needs,
//
//	mcpserver --resource http://127.0.0.1:8080/mcp --issuer http://127.0.0.1:9000
//
// and fetch_report is there only with --downstream and the secret of the
// server's own client at the AS (the example stack passes these; see
// deploy/stack.env):
//
//	MCPSERVER_CLIENT_SECRET=... mcpserver --listen 127.0.0.1:8080 \
//	    --resource http://127.0.0.1:8080/mcp --issuer http://127.0.0.1:9000 \
//	    --downstream http://127.0.0.1:8081/api --client-id example-mcpserver
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mcpauth/mcpauth/rsmiddleware"
)

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		os.Exit(2) // the flag package has printed the problem
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, logger); err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(1)
	}
}

// parseFlags reads the command line; the secret comes from the environment.
func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("mcpserver", flag.ContinueOnError)
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&cfg.resource, "resource", "http://127.0.0.1:8080/mcp", "canonical public URL of the MCP endpoint, also its resource URI")
	fs.StringVar(&cfg.issuer, "issuer", "http://127.0.0.1:9000", "issuer of the authorization server")
	fs.StringVar(&cfg.downstream, "downstream", "", "resource URI of the downstream API fetch_report calls (e.g. http://127.0.0.1:8081/api); without it there is no fetch_report")
	fs.StringVar(&cfg.clientID, "client-id", "example-mcpserver", "this server's client id at the AS, for token exchange (secret: env MCPSERVER_CLIENT_SECRET, or a file named by MCPSERVER_CLIENT_SECRET_FILE)")
	fs.StringVar(&cfg.issuerInternal, "issuer-internal", "", "origin at which this server reaches the AS when it is not --issuer's (e.g. http://authserver:9000 in a container network); tokens are still checked against --issuer")
	fs.StringVar(&cfg.downstreamInternal, "downstream-internal", "", "origin at which this server reaches the downstream API when it is not --downstream's (e.g. http://downstream:8081)")
	fs.BoolVar(&cfg.dpop, "dpop", false, "accepted for older command lines: DPoP-bound tokens (RFC 9449, the DPoP scheme with a proof for --resource, each proof usable once) are accepted by default")
	fs.BoolVar(&cfg.dpopRequired, "dpop-required", false, "accept DPoP-bound tokens only (implies --dpop); PRM says dpop_bound_access_tokens_required")
	fs.BoolVar(&cfg.dpopNonce, "dpop-nonce", false, "make every DPoP proof carry a server nonce (RFC 9449 §9; implies --dpop): stateless nonces sealed with env MCPSERVER_DPOP_NONCE_SECRET (at least 32 bytes, shared by instances; or a file named by MCPSERVER_DPOP_NONCE_SECRET_FILE), a random secret of this process when unset")
	fs.DurationVar(&cfg.statusMaxAge, "status-max-age", rsmiddleware.DefaultStatusMaxAge, "how stale the AS's token status list may be: a revoked token is refused at most this long after its revocation")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	secret, err := envOrFile("MCPSERVER_CLIENT_SECRET")
	if err != nil {
		fmt.Fprintln(fs.Output(), err)
		return config{}, err
	}
	cfg.clientSecret = secret
	if cfg.dpopNonce {
		if cfg.dpopNonceSecret, err = envOrFile("MCPSERVER_DPOP_NONCE_SECRET"); err != nil {
			fmt.Fprintln(fs.Output(), err)
			return config{}, err
		}
	}
	return cfg, nil
}

// envOrFile returns the environment variable name or, when it is not set,
// the content of the file named by name_FILE without one trailing newline
// (a mounted Docker or Kubernetes secret).
func envOrFile(name string) (string, error) {
	if v, ok := os.LookupEnv(name); ok {
		return v, nil
	}
	p := os.Getenv(name + "_FILE")
	if p == "" {
		return "", nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("%s_FILE: %w", name, err)
	}
	s := strings.TrimSuffix(string(b), "\n")
	return strings.TrimSuffix(s, "\r"), nil
}

func serve(ctx context.Context, cfg config, logger *slog.Logger) error {
	h, err := newServer(cfg, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	srv := newHTTPServer(h, defaultTimeouts)
	logger.Info("MCP server listening", "addr", ln.Addr().String(), "resource", cfg.resource, "issuer", cfg.issuer, "downstream", cfg.downstream)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// timeouts of the HTTP server. net/http has none by default, so without them
// a client that sends its request a byte at a time, or holds an idle
// keep-alive connection, keeps a connection and a goroutine forever.
type timeouts struct {
	readHeader time.Duration // request line and headers
	read       time.Duration // the whole request, body included
	write      time.Duration // from the end of the headers to the end of the response
	idle       time.Duration // between requests on a keep-alive connection
}

// defaultTimeouts: tool calls answer well within write (fetch_report's
// downstream call is bounded at 15s); a long-lived SSE stream (GET) ends
// after it, and Streamable HTTP clients open a new one.
var defaultTimeouts = timeouts{
	readHeader: 10 * time.Second,
	read:       30 * time.Second,
	write:      60 * time.Second,
	idle:       120 * time.Second,
}

func newHTTPServer(h http.Handler, t timeouts) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.readHeader,
		ReadTimeout:       t.read,
		WriteTimeout:      t.write,
		IdleTimeout:       t.idle,
		MaxHeaderBytes:    64 << 10,
	}
}
