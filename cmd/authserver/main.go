// Command authserver runs the mcpauth OAuth 2.1 authorization server for MCP
// deployments, and its maintenance tasks.
//
// Usage:
//
//	authserver [--config FILE] [command] [flags]
//
// Commands:
//
//	serve          run the server (the default when no command is given)
//	migrate up     apply pending database migrations
//	migrate status list applied and pending migrations
//	hash-password  read a password (prompted twice on a terminal, else one
//	               line of stdin), print its argon2id hash
//	keys rotate    add a new signing key and retire the others
//	keys list|retire KID|prune [--unloadable]
//	               list signing keys, retire one, delete retired or unloadable ones
//	clients list|show ID|create|delete ID
//	               manage stored clients
//	grants list|revoke
//	               list or revoke grants by user, client or id
//	users list|show SUBJECT|disable SUBJECT|enable SUBJECT
//	               list people, disable one (revoking their grants), enable
//	approvals list [--user S]|revoke ID
//	               list or revoke approvals of held tool calls
//	gc             one garbage-collection pass (expired records, idle clients)
//	check-config   validate the configuration, print warnings and the
//	               configuration with secrets redacted
//	healthcheck    GET the running server's /readyz (or /healthz), exit 0 or 1
//	version        print the version
//
// The configuration file comes from --config or AUTHSERVER_CONFIG; without
// one the server runs on development defaults (docs/CONFIGURATION.md), on a
// loopback listen address only unless AUTHSERVER_DEV=1.
// AUTHSERVER_ISSUER, AUTHSERVER_LISTEN, AUTHSERVER_STORAGE and
// AUTHSERVER_SECRET override the keys of the same name; each of them, like
// AUTHSERVER_ADMIN_PASSWORD and every ${VAR} of the file, may instead be given
// as a file named by NAME_FILE.
//
// This is the only package that reads flags, the environment and files; the
// libraries (as, dcr, storage backends) take plain config structs.
//
// The server it runs is an OAuth 2.1 authorization server (RFC 6749 with
// RFC 9700; PKCE RFC 7636), with RFC 8414 metadata, RFC 9068 access tokens,
// RFC 8707 resource indicators, RFC 7662 introspection, RFC 7009 revocation,
// RFC 8693 token exchange and RFC 7591/7592 registration; see package as and
// package dcr.
package main

import (
	"bufio"
	"context"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/term"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
	"github.com/mcpauth/mcpauth/internal/password"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = ""

// env is what the command reads from its surroundings; tests replace it.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	lookup         config.Lookup
	// tp records the spans of outbound fetches and storage calls; nil:
	// tracing is off.
	tp trace.TracerProvider
	// rootCAs, when set, replaces the system roots of the outbound fetches
	// (client metadata documents, jwks_uri); tests trust httptest's.
	rootCAs *x509.CertPool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, lookup: os.LookupEnv})
	stop()
	os.Exit(code)
}

// errUsage marks errors that come with usage text (exit status 2).
var errUsage = errors.New("usage")

// usageError is a command-line mistake; it wraps errUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == errUsage }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

const usage = `usage: authserver [--config FILE] [command] [flags]

commands:
  serve [--no-migrate]   run the authorization server (default)
  migrate up|status      apply or list database migrations
  hash-password          read a password (twice on a terminal, without echo;
                         else the first line of stdin), print its argon2id hash
  keys list|retire KID|prune [--unloadable]|rotate
                         list, retire, delete or add signing keys
  clients list|show ID|create --name N --redirect-uri U [--public]|delete ID
                         manage clients in storage
  grants list [--user U] [--client C]
  grants revoke --user U | --client C | --grant ID
                         list or revoke grants
  users list|show SUBJECT|disable SUBJECT|enable SUBJECT
                         list people, disable one (revoking their grants
                         and ending their sessions) or enable one
  approvals list [--user S]|revoke ID
                         list or revoke people's approvals of held tool calls
  gc                     run one garbage-collection pass
  audit list [--user S] [--client C] [--event E] [--limit N] [--before ID]
                         list the audit events kept in storage, newest first
  audit verify LOG...    check the chain of the audit lines in LOG (a file
                         or a rotated series, oldest first)
  check-config           validate the configuration, print warnings and the
                         configuration with secrets redacted
  healthcheck [--url U]  GET the running server's /readyz (or /healthz);
                         exit 0 when it answers 2xx, 1 otherwise
  version                print the version

Every command has its own --help; commands that print records take
--format json|table.

The configuration file is --config FILE or $AUTHSERVER_CONFIG; without one the
server runs on development defaults, on loopback only unless AUTHSERVER_DEV=1.
AUTHSERVER_ISSUER, AUTHSERVER_LISTEN, AUTHSERVER_STORAGE and AUTHSERVER_SECRET
override the keys of the same name. Every such variable, AUTHSERVER_ADMIN_PASSWORD
and each ${VAR} in the file may instead be a file named by NAME_FILE.
`

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, e env) int {
	err := dispatch(ctx, args, e)
	var help *helpError
	var sub *subcommandError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		fmt.Fprint(e.stdout, help.text)
		return 0
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(e.stdout, usage)
		return 0
	case errors.As(err, &sub):
		fmt.Fprintf(e.stderr, "authserver: %v\n\n%s", err, sub.usage)
		return 2
	case errors.Is(err, errUsage):
		fmt.Fprintf(e.stderr, "authserver: %v\n\n%s", err, usage)
		return 2
	default:
		fmt.Fprintf(e.stderr, "authserver: %v\n", err)
		return 1
	}
}

// command is one parsed command line.
type command struct {
	name       string   // serve, migrate, ...
	verb       string   // the subcommand of migrate, keys, clients, grants
	args       []string // positional arguments after the command's flags
	configPath string
	noMigrate  bool
	url        string // healthcheck --url
	format     string // json or table, for commands that print records

	clientName   string
	redirectURIs multiFlag
	public       bool
	user, client string
	grant        string
	unloadable   bool
	event        string // audit list --event
	limit        int    // audit list --limit
	before       int64  // audit list --before
}

func parseArgs(args []string, e env) (*command, error) {
	global := flag.NewFlagSet("authserver", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	var cmd command
	global.StringVar(&cmd.configPath, "config", "", "configuration file")
	if err := global.Parse(args); err != nil {
		return nil, usageErr(err)
	}
	rest := global.Args()
	cmd.name = "serve"
	if len(rest) > 0 {
		cmd.name, rest = rest[0], rest[1:]
	}
	if _, ok := specs[cmd.name]; !ok {
		if _, ok := verbs[cmd.name]; !ok {
			return nil, usagef("unknown command %q", cmd.name)
		}
	}
	if err := parseCommand(&cmd, rest); err != nil {
		return nil, err
	}
	if cmd.configPath == "" {
		if v, ok := e.lookup("AUTHSERVER_CONFIG"); ok {
			cmd.configPath = v
		}
	}
	return &cmd, nil
}

func usageErr(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usagef("%v", err)
}

func dispatch(ctx context.Context, args []string, e env) error {
	cmd, err := parseArgs(args, e)
	if err != nil {
		return err
	}
	switch cmd.name {
	case "help":
		return flag.ErrHelp
	case "version":
		fmt.Fprintln(e.stdout, "authserver", versionString())
		return nil
	case "hash-password":
		return hashPassword(e)
	case "healthcheck":
		return healthcheck(ctx, cmd, e)
	}

	cfg, err := config.Load(cmd.configPath, e.lookup)
	if err != nil {
		return err
	}
	logger := newLogger(cfg.Log, e.stderr)
	switch cmd.name {
	case "serve", "keys", "clients", "grants", "users", "approvals", "gc":
		// These write audit events: chained under the secret's key.
		if key, ok, err := auditKey(cfg); err == nil && ok {
			logger = newChainedLogger(cfg.Log, e.stderr, key)
		}
	}
	switch cmd.name {
	case "audit":
		if cmd.verb == "list" {
			return operate(ctx, cfg, cmd, logger, e)
		}
		return auditVerify(cfg, cmd.args, e)
	case "check-config":
		out, err := cfg.Redacted()
		if err != nil {
			return err
		}
		// The warnings serve would log at start-up, through the same logger.
		logWarnings(logger, cfg)
		_, err = e.stdout.Write(out)
		return err
	case "serve":
		return serve(ctx, cfg, !cmd.noMigrate && cfg.MigrateEnabled(), logger, e, cmd.configPath)
	case "migrate":
		return migrate(ctx, cfg, cmd.verb, e)
	case "keys":
		if cmd.verb == "rotate" {
			return rotateKey(ctx, cfg, e, cmd.format == "json")
		}
		return operate(ctx, cfg, cmd, logger, e)
	case "clients", "grants", "users", "approvals":
		return operate(ctx, cfg, cmd, logger, e)
	case "gc":
		return gcOnce(ctx, cfg, logger, e)
	}
	return usagef("unknown command %q", cmd.name)
}

// minPasswordLength is the shortest password hash-password accepts, in
// characters (NIST SP 800-63B §5.1.1.2 asks for at least 8; a password that
// only a machine types can be longer).
const minPasswordLength = 12

// maxPasswordBytes bounds a password read by hash-password.
const maxPasswordBytes = 4096

// hashPassword reads a password and prints its argon2id hash for
// users[].password_hash. On a terminal it prompts twice on stderr, without
// echo, and refuses two different answers; otherwise (a pipe, a file) it
// reads the first line of stdin, without its line ending, for scripts.
func hashPassword(e env) error {
	var pw string
	if f, ok := e.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		first, err := promptPassword(f, e.stderr, "Password: ")
		if err != nil {
			return err
		}
		if err := checkPasswordLength(first); err != nil {
			return err
		}
		again, err := promptPassword(f, e.stderr, "Repeat the password: ")
		if err != nil {
			return err
		}
		if subtle.ConstantTimeCompare([]byte(first), []byte(again)) != 1 {
			return errors.New("hash-password: the two passwords differ")
		}
		pw = first
	} else {
		line, err := firstLine(e.stdin)
		if err != nil {
			return err
		}
		if line == "" {
			return errors.New("hash-password: empty password on stdin")
		}
		pw = line
	}
	if err := checkPasswordLength(pw); err != nil {
		return err
	}
	h, err := password.Hash(pw)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, h)
	return nil
}

func checkPasswordLength(pw string) error {
	if n := utf8.RuneCountInString(pw); n < minPasswordLength {
		return fmt.Errorf("hash-password: the password has %d characters; at least %d are required", n, minPasswordLength)
	}
	return nil
}

// promptPassword writes prompt to w and reads a line from the terminal f
// with echo off.
func promptPassword(f *os.File, w io.Writer, prompt string) (string, error) {
	fmt.Fprint(w, prompt)
	b, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(w)
	if err != nil {
		return "", fmt.Errorf("hash-password: reading the password: %w", err)
	}
	if len(b) > maxPasswordBytes {
		return "", fmt.Errorf("hash-password: password longer than %d bytes", maxPasswordBytes)
	}
	return string(b), nil
}

// firstLine reads r up to the first newline and returns what came before
// it, without a trailing carriage return.
func firstLine(r io.Reader) (string, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, maxPasswordBytes+2), maxPasswordBytes+2)
	line, err := br.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if len(line) > maxPasswordBytes {
		return "", fmt.Errorf("hash-password: password longer than %d bytes", maxPasswordBytes)
	}
	return line, nil
}

func versionString() string {
	v := version
	info, ok := debug.ReadBuildInfo()
	if v == "" && ok && info.Main.Version != "" {
		v = info.Main.Version
	}
	if v == "" {
		v = "(devel)"
	}
	if ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " " + s.Value[:12]
			}
		}
		v += " " + info.GoVersion
	}
	return v
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	switch c.Level {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
