// Command loadgen drives an mcpauth authorization server on this machine
// with N concurrent keep-alive connections and prints requests per second,
// p50 and p99 latency and errors.
//
// Usage:
//
//	loadgen -issuer http://127.0.0.1:9000 -grant client_credentials \
//	        -client-id ci-bot -client-secret $SECRET -c 32 -n 20000
//
// Grants: client_credentials, authorization_code, refresh_token,
// introspection (see package scaletest/load for what each measures; the
// code and refresh grants log in once on the server's pages with -user and
// -password and mint their codes before the timed phase). The run is bounded
// by -n requests, or by -d when -n is 0. Only loopback targets are accepted.
//
// Exit status: 0 when every timed request succeeded, 1 when some failed or
// the setup failed, 2 for a command-line mistake.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/mcpauth/mcpauth/scaletest/load"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg load.Config
	var grant string
	var asJSON bool
	fs.StringVar(&cfg.Issuer, "issuer", "http://127.0.0.1:9000", "issuer of the AS (its metadata names the endpoints)")
	fs.StringVar(&cfg.Connect, "connect", "", "host:port to dial instead of the issuer's (one instance of several sharing an issuer)")
	fs.StringVar(&grant, "grant", "client_credentials", "client_credentials, authorization_code, refresh_token or introspection")
	fs.IntVar(&cfg.Connections, "c", 32, "concurrent connections")
	fs.IntVar(&cfg.Requests, "n", 0, "timed requests in all (0: run for -d)")
	fs.DurationVar(&cfg.Duration, "d", 10*time.Second, "duration of the timed phase when -n is 0")
	fs.StringVar(&cfg.ClientID, "client-id", "", "confidential client (client_credentials; caller of introspection)")
	fs.StringVar(&cfg.ClientSecret, "client-secret", os.Getenv("LOADGEN_CLIENT_SECRET"), "its secret (default $LOADGEN_CLIENT_SECRET)")
	fs.StringVar(&cfg.Scope, "scope", "", "scope to request")
	fs.StringVar(&cfg.Resource, "resource", "", "resource indicator (RFC 8707) to request")
	fs.StringVar(&cfg.PublicClientID, "public-client", "", "public client of the code and refresh grants")
	fs.StringVar(&cfg.RedirectURI, "redirect-uri", "", "its registered redirect URI")
	fs.StringVar(&cfg.Username, "user", "", "user that logs in for the code and refresh grants")
	fs.StringVar(&cfg.Password, "password", os.Getenv("LOADGEN_PASSWORD"), "the user's password (default $LOADGEN_PASSWORD)")
	fs.DurationVar(&cfg.Timeout, "timeout", 30*time.Second, "per-request timeout")
	fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loadgen: unexpected arguments %q\n", fs.Args())
		return 2
	}
	cfg.Grant = load.Grant(grant)
	res, err := load.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n", err)
		if res == nil {
			return 1
		}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(jsonResult(res))
	} else {
		fmt.Fprintln(stdout, res)
	}
	if err != nil || res.Errors > 0 {
		return 1
	}
	return 0
}

// jsonOut is the -json output; durations in milliseconds.
type jsonOut struct {
	Grant       string         `json:"grant"`
	Connections int            `json:"connections"`
	Requests    int            `json:"requests"`
	Errors      int            `json:"errors"`
	Status      map[string]int `json:"status"`
	ElapsedMS   float64        `json:"elapsed_ms"`
	PerSecond   float64        `json:"per_second"`
	P50MS       float64        `json:"p50_ms"`
	P99MS       float64        `json:"p99_ms"`
	MaxMS       float64        `json:"max_ms"`
	FirstError  string         `json:"first_error,omitempty"`
}

func jsonResult(r *load.Result) jsonOut {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	st := map[string]int{}
	for k, v := range r.Status {
		st[fmt.Sprint(k)] = v
	}
	return jsonOut{string(r.Grant), r.Connections, r.Requests, r.Errors, st, ms(r.Elapsed), r.PerSecond,
		ms(r.P50), ms(r.P99), ms(r.Max), r.FirstError}
}
