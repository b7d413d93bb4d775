package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// spec describes one command or subcommand: its flags, its positional
// arguments and the usage `<command> --help` prints.
type spec struct {
	name  string // "serve", "clients create"
	args  string // positional arguments, for the usage line ("ID")
	nargs int    // how many positional arguments it takes; -1: one or more
	help  string // what it does
	flags func(fs *flag.FlagSet, c *command)
	// format: the command prints records and takes --format json|table.
	format bool
	// argsErr replaces the message for a wrong number of arguments.
	argsErr string
}

// verbs lists the subcommands of commands that have them, in usage order.
var verbs = map[string][]string{
	"migrate":   {"up", "status"},
	"keys":      {"list", "retire", "prune", "rotate"},
	"clients":   {"list", "show", "create", "delete"},
	"grants":    {"list", "revoke"},
	"users":     {"list", "show", "disable", "enable"},
	"approvals": {"list", "revoke"},
	"audit":     {"list", "verify"},
}

var specs = map[string]*spec{
	"serve": {name: "serve", help: "Run the authorization server (the default command).", flags: func(fs *flag.FlagSet, c *command) {
		fs.BoolVar(&c.noMigrate, "no-migrate", false, "do not apply migrations at start-up")
	}},
	"migrate up":     {name: "migrate up", help: "Apply pending database migrations."},
	"migrate status": {name: "migrate status", help: "List applied and pending migration versions."},
	"hash-password":  {name: "hash-password", help: "Read a password on stdin, print its argon2id hash for users[].password_hash.", argsErr: "hash-password reads the password from stdin and takes no arguments"},
	"healthcheck": {name: "healthcheck", help: "GET the running server's /readyz (or /healthz); exit 0 when it answers 2xx, 1 otherwise.",
		argsErr: "healthcheck takes no arguments (use --url)",
		flags: func(fs *flag.FlagSet, c *command) {
			fs.StringVar(&c.url, "url", "", "URL to GET instead of the configured listen address's /readyz")
		}},
	"gc":           {name: "gc", help: "Run one garbage-collection pass, then exit."},
	"check-config": {name: "check-config", help: "Validate the configuration and print it with defaults filled in and secrets redacted."},
	"version":      {name: "version", help: "Print the version."},
	"help":         {name: "help", help: "Print the usage."},

	"audit verify": {name: "audit verify", args: "LOG...", nargs: -1,
		help: "Check the chain of the audit lines in LOG (files of a rotated series, oldest first; other log lines are skipped) under the key derived from secret: print ok and the count, or the first line changed, removed, inserted or reordered and exit 1."},

	"audit list": {name: "audit list", format: true,
		help: "List the audit events the servers keep in storage (admin.audit_retention), newest first: of one person (--user), one client (--client), one event or, ending in \".\", events it prefixes (--event admin.). --before ID continues after the last event of a previous list.",
		flags: func(fs *flag.FlagSet, c *command) {
			fs.StringVar(&c.user, "user", "", "only this person's events (sub)")
			fs.StringVar(&c.client, "client", "", "only this client's events")
			fs.StringVar(&c.event, "event", "", "only this event, or the events it prefixes when it ends in .")
			fs.IntVar(&c.limit, "limit", 50, "how many events, at most 500")
			fs.Int64Var(&c.before, "before", 0, "only events older than the one with this id")
		}},

	"keys list": {name: "keys list", format: true,
		help: "List the stored signing keys, newest first: kid, algorithm, created, retired, whether it signs and whether this server's secret unseals it."},
	"keys retire": {name: "keys retire", args: "KID", nargs: 1, format: true,
		help: "Retire signing key KID: it stops signing and stays in the JWKS until its tokens expire. Retiring the key that signs first adds a new one (signing.algorithm). A KID (a base64url JWK thumbprint, RFC 7638) may start with -: write -- before it."},
	"keys prune": {name: "keys prune", format: true,
		help: "Delete keys retired longer than their tokens live. --unloadable also deletes every key this server's secret cannot unseal (keys written by an instance started with a wrong secret); refused when the secret unseals no key at all.",
		flags: func(fs *flag.FlagSet, c *command) {
			fs.BoolVar(&c.unloadable, "unloadable", false, "also delete keys the configured secret cannot unseal")
		}},
	"keys rotate": {name: "keys rotate", format: true, help: "Add a new signing key (signing.algorithm) and retire the others."},

	"clients list": {name: "clients list", format: true, help: "List the configured clients, then the stored ones (registered, CIMD, created here)."},
	"clients show": {name: "clients show", args: "ID", nargs: 1, format: true, help: "Show one client."},
	"clients create": {name: "clients create", format: true,
		help: "Create a client for the authorization code grant. Confidential unless --public; a confidential client's secret is printed once.",
		flags: func(fs *flag.FlagSet, c *command) {
			fs.StringVar(&c.clientName, "name", "", "client name shown on the consent page (required)")
			fs.Var(&c.redirectURIs, "redirect-uri", "redirect URI (required; repeat for several)")
			fs.BoolVar(&c.public, "public", false, "public client: no secret, PKCE only")
		}},
	"clients delete": {name: "clients delete", args: "ID", nargs: 1, format: true, help: "Delete a stored client. A client of the configuration file is refused: remove it from the file and reload with SIGHUP."},

	"grants list": {name: "grants list", format: true, help: "List live grants (authorizations with unexpired tokens), of one user and/or one client when given; orphaned ones (user or client gone) are marked.",
		flags: func(fs *flag.FlagSet, c *command) {
			fs.StringVar(&c.user, "user", "", "only this user's grants")
			fs.StringVar(&c.client, "client", "", "only this client's grants")
		}},
	"grants revoke": {name: "grants revoke", format: true,
		help: "Revoke every grant of a user (--user), of a client (--client), of a user for a client (both), or one grant (--grant): refresh tokens are refused at once, access tokens introspect inactive and are flagged in the token status list, remembered consents go.",
		flags: func(fs *flag.FlagSet, c *command) {
			fs.StringVar(&c.user, "user", "", "revoke this user's grants")
			fs.StringVar(&c.client, "client", "", "revoke this client's grants")
			fs.StringVar(&c.grant, "grant", "", "revoke this one grant (its id, from grants list)")
		}},

	"approvals list": {name: "approvals list", format: true,
		help: "List the approvals of held tool calls (of one user with --user), in id order: subject, client, resource, tool, status (pending, approved, denied, used), expiry. Arguments are never shown, only their digest.",
		flags: func(fs *flag.FlagSet, c *command) {
			fs.StringVar(&c.user, "user", "", "only this user's approvals")
		}},
	"approvals revoke": {name: "approvals revoke", args: "ID", nargs: 1, format: true,
		help: "Revoke approval ID: a pending one can no longer be approved, an approved one no longer used; the held call, retried, waits for a new approval. An ID (base64url) may start with -: write -- before it."},

	"users list": {name: "users list", format: true,
		help: "List the people the server knows: the configured local users (also those who never logged in) and every stored record (local logins, people who signed in through an upstream), in subject order."},
	"users show": {name: "users show", args: "SUBJECT", nargs: 1, format: true,
		help: "Show one person: source, upstream, name, email, groups, claims, first and last seen, whether disabled (by the configuration or an operator) and active."},
	"users disable": {name: "users disable", args: "SUBJECT", nargs: 1, format: true,
		help: "Disable a person: they cannot log in, every grant they gave is revoked (refresh tokens refused, access tokens inactive at introspection and flagged in the token status list, remembered consents gone) and their browser sessions end."},
	"users enable": {name: "users enable", args: "SUBJECT", nargs: 1, format: true,
		help: "Enable a person disabled with users disable. Nothing revoked comes back: they log in and consent again. A user disabled in the configuration file (users[].disabled) is refused: edit the file."},
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// helpError asks run to print text on stdout and exit 0.
type helpError struct{ text string }

func (e *helpError) Error() string        { return "help requested" }
func (e *helpError) Is(target error) bool { return target == flag.ErrHelp }

// usageOf is the usage text of a command (with verbs: of each of them).
func usageOf(name string, s *spec) string {
	var b strings.Builder
	if s == nil {
		fmt.Fprintf(&b, "usage: authserver [--config FILE] %s <subcommand> [flags]\n\nsubcommands:\n", name)
		// Every description starts in one column, past the longest
		// "verb ARGS" ("delete ID", "retire KID").
		width := 0
		for _, v := range verbs[name] {
			width = max(width, len(verbUsage(v, specs[name+" "+v])))
		}
		for _, v := range verbs[name] {
			sp := specs[name+" "+v]
			fmt.Fprintf(&b, "  %-*s  %s\n", width, verbUsage(v, sp), sp.help)
		}
		fmt.Fprintf(&b, "\n`authserver %s <subcommand> --help` describes one.\n", name)
		return b.String()
	}
	line := "usage: authserver [--config FILE] " + s.name + " [flags]"
	if s.args != "" {
		line += " " + s.args
	}
	fmt.Fprintf(&b, "%s\n\n%s\n\nflags:\n", line, s.help)
	fs, _ := newFlagSet(s, &command{})
	fs.SetOutput(&b)
	fs.PrintDefaults()
	return b.String()
}

// verbUsage is a subcommand with its positional arguments: "show ID".
func verbUsage(verb string, s *spec) string {
	if s.args == "" {
		return verb
	}
	return verb + " " + s.args
}

func newFlagSet(s *spec, c *command) (*flag.FlagSet, *command) {
	fs := flag.NewFlagSet(s.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.configPath, "config", c.configPath, "configuration file (default $AUTHSERVER_CONFIG, else development defaults)")
	if s.format {
		fs.StringVar(&c.format, "format", "table", "output format: json or table")
	}
	if s.flags != nil {
		s.flags(fs, c)
	}
	return fs, c
}

// findVerb returns the first positional argument of args (the subcommand)
// and args without it. Flags may come before it; --config takes a value.
func findVerb(args []string) (verb string, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") {
			if (a == "--config" || a == "-config") && i+1 < len(args) {
				i++
			}
			continue
		}
		return a, append(append([]string{}, args[:i]...), args[i+1:]...)
	}
	return "", args
}

// subcommandError is a command-line mistake in one subcommand: its usage
// is printed instead of the global one.
type subcommandError struct {
	msg, usage string
}

func (e *subcommandError) Error() string        { return e.msg }
func (e *subcommandError) Is(target error) bool { return target == errUsage }

func hasHelpFlag(args []string) bool {
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help", "-h=true", "--help=true":
			return true
		case "--":
			return false
		}
	}
	return false
}

// parseCommand parses what follows the command name.
func parseCommand(cmd *command, rest []string) error {
	key := cmd.name
	if vs, ok := verbs[cmd.name]; ok {
		verb, r := findVerb(rest)
		if verb == "" {
			if hasHelpFlag(rest) {
				return &helpError{usageOf(cmd.name, nil)}
			}
			return &subcommandError{fmt.Sprintf("%s needs %s", cmd.name, orList(vs)), usageOf(cmd.name, nil)}
		}
		if _, ok := specs[cmd.name+" "+verb]; !ok {
			return &subcommandError{fmt.Sprintf("%s needs %s, not %q", cmd.name, orList(vs), verb), usageOf(cmd.name, nil)}
		}
		cmd.verb, key, rest = verb, cmd.name+" "+verb, r
	}
	s, ok := specs[key]
	if !ok {
		return usagef("unknown command %q", cmd.name)
	}
	fs, _ := newFlagSet(s, cmd)
	// Flags may come before, between or after positional arguments
	// (`keys rotate --config f`, `migrate --config f up`).
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return &helpError{usageOf(key, s)}
			}
			return &subcommandError{err.Error(), usageOf(key, s)}
		}
		rest = fs.Args()
		if len(rest) == 0 {
			break
		}
		cmd.args = append(cmd.args, rest[0])
		rest = rest[1:]
	}
	if len(cmd.args) != s.nargs && !(s.nargs < 0 && len(cmd.args) > 0) {
		want := "no arguments"
		if s.nargs > 0 {
			want = s.args
		}
		msg := fmt.Sprintf("%s takes %s, got %d argument(s)", key, want, len(cmd.args))
		if s.argsErr != "" {
			msg = s.argsErr
		}
		return &subcommandError{msg, usageOf(key, s)}
	}
	if s.format && cmd.format != "json" && cmd.format != "table" {
		return &subcommandError{fmt.Sprintf("--format must be json or table, got %q", cmd.format), usageOf(key, s)}
	}
	return nil
}

func orList(vs []string) string {
	if len(vs) == 1 {
		return vs[0]
	}
	return strings.Join(vs[:len(vs)-1], ", ") + " or " + vs[len(vs)-1]
}
