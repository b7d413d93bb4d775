// Command downstream is the example downstream API: a small HTTP API with its
// own resource URI (RFC 8707), protected by rsmiddleware. The example MCP
// server's fetch_report tool calls it with a token obtained by RFC 8693 token
// exchange, so this API sees a token minted for itself, carrying the user as
// "sub" and the MCP server as "act" — never the token the user gave the MCP
// server.
//
// Endpoints, for --resource http://127.0.0.1:8081/api:
//
//	GET /api/report   protected (scope reports:read): a small JSON report for the caller
//	GET /.well-known/oauth-protected-resource/api   RFC 9728 metadata
//	GET /healthz      liveness
//	GET /debug/seen   what reached /api: per request the outcome, sub, aud,
//	                  client_id, act, jti and a SHA-256 fingerprint of the
//	                  bearer token (never the token). A demo aid, read by the
//	                  end-to-end tests; do not expose it in production.
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
	flag.StringVar(&cfg.listen, "listen", "127.0.0.1:8081", "address to listen on")
	flag.StringVar(&cfg.resource, "resource", "http://127.0.0.1:8081/api", "canonical public URL of the API, also its resource URI")
	flag.StringVar(&cfg.issuer, "issuer", "http://127.0.0.1:9000", "issuer of the authorization server")
	flag.StringVar(&cfg.issuerInternal, "issuer-internal", "", "origin at which this API reaches the AS when it is not --issuer's (e.g. http://authserver:9000 in a container network); tokens are still checked against --issuer")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, logger); err != nil {
		fmt.Fprintln(os.Stderr, "downstream:", err)
		os.Exit(1)
	}
}

func serve(ctx context.Context, cfg config, logger *slog.Logger) error {
	h, err := newAPI(cfg, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	srv := newHTTPServer(h, defaultTimeouts)
	logger.Info("downstream API listening", "addr", ln.Addr().String(), "resource", cfg.resource, "issuer", cfg.issuer)
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

var defaultTimeouts = timeouts{
	readHeader: 10 * time.Second,
	read:       30 * time.Second,
	write:      30 * time.Second,
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
