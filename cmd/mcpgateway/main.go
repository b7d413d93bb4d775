// Command mcpgateway is an authorizing reverse proxy for MCP servers that
// speak Streamable HTTP, written in any language. In front of such a server
// it does what rsmiddleware does for a Go server: it publishes the RFC 9728
// protected resource metadata, answers RFC 6750 / RFC 9728 challenges
// (401, and 403 insufficient_scope for a step-up), checks the access
// tokens' issuer, audience and type (RFC 9068), binds MCP sessions to the
// user who opened them and never forwards the caller's token. It also cuts
// tools/list (and resources/list, prompts/list) answers to what the caller's
// scopes allow and writes one audit line per JSON-RPC request, with a
// SHA-256 of the canonical arguments instead of the arguments. With
// upstream_auth it presents a token of its own to the upstream: one
// obtained by RFC 8693 token exchange (the caller as sub, the gateway in
// act) or by client credentials.
//
//	mcpgateway --config FILE [--check]
//	mcpgateway audit verify --config FILE LOG...
//
// SIGHUP reopens audit.file (after logrotate moved it); `audit verify`
// checks the chain of the audit lines (audit.chain_key) of a file or of a
// rotated series, oldest first.
//
//	mcpgateway pins list|diff NAME|approve NAME...|approve --all --config FILE
//
// Traces go to an OpenTelemetry collector when OTEL_EXPORTER_OTLP_ENDPOINT
// (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; the other standard
// OTEL_* variables apply (internal/otelsetup).
//
// The configuration keys are documented in docs/GATEWAY.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcpauth/mcpauth/internal/otelsetup"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mcpgateway:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "audit" {
		return auditCommand(args[1:], os.LookupEnv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "pins" {
		return runPins(args[1:], os.LookupEnv, stdout)
	}
	fs := flag.NewFlagSet("mcpgateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration file (YAML)")
	check := fs.Bool("check", false, "check the configuration and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("usage: mcpgateway --config FILE [--check]")
	}
	data, err := os.ReadFile(*path)
	if err != nil {
		return err
	}
	cfg, err := ParseConfig(data, os.LookupEnv)
	if err != nil {
		return err
	}
	if *check {
		fmt.Fprintf(stdout, "%s: ok (resource %s, upstream %s)\n", *path, cfg.Resource, cfg.Upstream)
		return nil
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	tp, err := otelsetup.New(ctx, "mcpgateway", os.LookupEnv)
	if err != nil {
		return err
	}
	defer tp.Flush(logger) // the spans still buffered are exported at the exit
	g, err := NewGateway(cfg, Options{Logger: logger, TracerProvider: tp.TracerProvider})
	if err != nil {
		return err
	}
	defer g.Close()
	srv := g.Server()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// SIGHUP reopens audit.file and rereads the pins file; set before the
	// gateway says it listens, so a SIGHUP after that line never ends the
	// process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
			}
			if err := g.ReopenAudit(); err != nil {
				logger.Error("mcpgateway: reopening the audit file", "err", err)
			}
			if err := g.ReloadPins(); err != nil {
				logger.Warn("mcpgateway: pins file not reloaded; the previous pins stay", "error", err)
			} else if cfg.Pins != nil {
				logger.Info("mcpgateway: pins file reloaded", "file", cfg.Pins.File)
			}
		}
	}()
	logger.Info("mcpgateway: listening", "addr", ln.Addr().String(), "resource", cfg.Resource, "upstream", cfg.Upstream)

	errc := make(chan error, 2)
	if h := g.MetricsHandler(); h != nil {
		mln, err := net.Listen("tcp", cfg.Metrics.Listen)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("metrics.listen: %w", err)
		}
		msrv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
		defer msrv.Close()
		logger.Info("mcpgateway: metrics listening", "addr", mln.Addr().String())
		go func() {
			if err := msrv.Serve(mln); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("metrics: %w", err)
			}
		}()
	}
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		// Event streams do not end by themselves: close what is left.
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
