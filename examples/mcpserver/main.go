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
// Usage (the example stack passes these; see deploy/stack.env):
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
	"syscall"
	"time"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.listen, "listen", "127.0.0.1:8080", "address to listen on")
	flag.StringVar(&cfg.resource, "resource", "http://127.0.0.1:8080/mcp", "canonical public URL of the MCP endpoint, also its resource URI")
	flag.StringVar(&cfg.issuer, "issuer", "http://127.0.0.1:9000", "issuer of the authorization server")
	flag.StringVar(&cfg.downstream, "downstream", "http://127.0.0.1:8081/api", "resource URI of the downstream API fetch_report calls")
	flag.StringVar(&cfg.clientID, "client-id", "example-mcpserver", "this server's client id at the AS, for token exchange (secret: env MCPSERVER_CLIENT_SECRET)")
	flag.Parse()
	cfg.clientSecret = os.Getenv("MCPSERVER_CLIENT_SECRET")

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, logger); err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(1)
	}
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
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
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
