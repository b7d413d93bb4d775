package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
	"github.com/mcpauth/mcpauth/internal/password"
)

// runCLI runs the command in-process with the given stdin and environment.
func runCLI(t *testing.T, stdin string, environ map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := env{
		stdin:  strings.NewReader(stdin),
		stdout: &out,
		stderr: &errb,
		lookup: func(k string) (string, bool) { v, ok := environ[k]; return v, ok },
	}
	code = run(context.Background(), args, e)
	return code, out.String(), errb.String()
}

func TestHashPasswordOutputVerifies(t *testing.T) {
	for _, tc := range []struct{ name, stdin, pw string }{
		{"hashes a password ending in a newline", "correct horse battery\n", "correct horse battery"},
		{"hashes a password without a newline", "s3cret-s3cret", "s3cret-s3cret"},
		{"hashes a password ending in CRLF", "windows-line-end\r\n", "windows-line-end"},
		{"hashes only the first line", "first-line-password\nsecond line\n", "first-line-password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.stdin, nil, "hash-password")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			h := strings.TrimSpace(out)
			ok, err := password.Check(h, tc.pw)
			if err != nil || !ok {
				t.Fatalf("hash %q does not verify: %v", h, err)
			}
			if ok, _ := password.Check(h, tc.pw+"x"); ok {
				t.Fatal("hash verifies a different password")
			}
		})
	}
}

func TestCommandLineMistakes(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		stdin    string
		wantCode int
		wantErr  string
	}{
		{"rejects an unknown command", []string{"frobnicate"}, "", 2, `unknown command "frobnicate"`},
		{"rejects an unknown flag", []string{"serve", "--bogus"}, "", 2, "flag provided but not defined: -bogus"},
		{"rejects migrate without a direction", []string{"migrate"}, "", 2, "migrate needs up or status"},
		{"rejects migrate sideways", []string{"migrate", "sideways"}, "", 2, "migrate needs up or status"},
		{"rejects keys without a subcommand", []string{"keys"}, "", 2, "keys needs list, retire, prune or rotate"},
		{"rejects an unknown keys subcommand", []string{"keys", "sideways"}, "", 2, `keys needs list, retire, prune or rotate, not "sideways"`},
		{"rejects keys rotate with an extra argument", []string{"keys", "rotate", "--config", "x.yaml", "now"}, "", 2, "keys rotate takes no arguments"},
		{"rejects keys retire without a kid", []string{"keys", "retire"}, "", 2, "keys retire takes KID"},
		{"rejects clients show without an id", []string{"clients", "show"}, "", 2, "clients show takes ID"},
		{"rejects a format it does not know", []string{"clients", "list", "--format", "xml"}, "", 2, "--format must be json or table"},
		{"rejects a flag of another subcommand", []string{"clients", "list", "--public"}, "", 2, "flag provided but not defined: -public"},
		{"rejects a flag after an argument that it does not know", []string{"migrate", "up", "--fast"}, "", 2, "flag provided but not defined: -fast"},
		{"rejects an empty password", []string{"hash-password"}, "\n", 1, "empty password"},
		{"rejects a one-character password", []string{"hash-password"}, "x\n", 1, "the password has 1 characters; at least 12 are required"},
		{"rejects an 11-character password", []string{"hash-password"}, "ab-cd-ef-gh\n", 1, "the password has 11 characters; at least 12"},
		{"rejects a password longer than 4096 bytes", []string{"hash-password"}, strings.Repeat("p", 5000), 1, "longer than 4096 bytes"},
		{"rejects healthcheck arguments", []string{"healthcheck", "x"}, "", 2, "healthcheck takes no arguments"},
		{"rejects a healthcheck URL that is not http", []string{"healthcheck", "--url", "ftp://x/"}, "", 2, "not an absolute http(s) URL"},
		{"rejects a password given as an argument", []string{"hash-password", "pw"}, "", 2, "reads the password from stdin"},
		{"reports a missing config file", []string{"--config", "/nonexistent/x.yaml", "check-config"}, "", 1, "config: open /nonexistent/x.yaml"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.stdin, nil, tc.args...)
			if code != tc.wantCode || !strings.Contains(errOut, tc.wantErr) {
				t.Fatalf("exit %d, stderr %q; want exit %d with %q", code, errOut, tc.wantCode, tc.wantErr)
			}
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	code, out, _ := runCLI(t, "", nil, "--help")
	if code != 0 || !strings.Contains(out, "usage: authserver") {
		t.Fatalf("help: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "", nil, "version")
	if code != 0 || !strings.HasPrefix(out, "authserver ") {
		t.Fatalf("version: %d %q", code, out)
	}
}

func TestCheckConfigNamesTheBadField(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bad.yaml")
	os.WriteFile(p, []byte("storage: memory\nresources:\n  - uri: https://ok.example/mcp\n  - uri: mcp\n"), 0o600)
	code, _, errOut := runCLI(t, "", nil, "--config", p, "check-config")
	if code != 1 || !strings.Contains(errOut, "config: resources[1].uri: not an absolute http(s) URI") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	// AUTHSERVER_CONFIG is read when --config is absent.
	code, _, errOut = runCLI(t, "", map[string]string{"AUTHSERVER_CONFIG": p}, "check-config")
	if code != 1 || !strings.Contains(errOut, "resources[1].uri") {
		t.Fatalf("AUTHSERVER_CONFIG ignored: exit %d, stderr %q", code, errOut)
	}
}

func TestCheckConfigRedactsSecrets(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(p, []byte(`storage: memory
secret: ${AUTHSERVER_SECRET}
resources:
  - uri: https://mcp.example.com
    scopes: [a]
clients:
  - id: bot
    secret: ${BOT_SECRET}
`), 0o600)
	environ := map[string]string{"AUTHSERVER_SECRET": strings.Repeat("z", 40), "BOT_SECRET": "bot-secret-bot-secret"}
	code, out, errOut := runCLI(t, "", environ, "check-config", "--config", p)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out, "zzzz") || strings.Contains(out, "bot-secret") || !strings.Contains(out, "[redacted]") {
		t.Fatalf("secrets not redacted:\n%s", out)
	}
	if !strings.Contains(out, "grant_types:\n        - client_credentials") {
		t.Fatalf("effective config lacks the default grant:\n%s", out)
	}
}

func TestServerSecret(t *testing.T) {
	t.Run("persists a generated secret next to the sqlite database", func(t *testing.T) {
		dir := t.TempDir()
		cfg := &config.Config{Storage: "sqlite:" + filepath.Join(dir, "a.db")}
		k1, src, err := serverSecret(cfg)
		if err != nil || len(k1) < 32 || !strings.HasSuffix(src, "(new)") {
			t.Fatalf("%q %q %v", k1, src, err)
		}
		fi, err := os.Stat(filepath.Join(dir, "a.db.secret"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("secret file: %v %v", fi, err)
		}
		k2, _, err := serverSecret(cfg)
		if err != nil || !bytes.Equal(k1, k2) {
			t.Fatalf("restart got another secret: %v", err)
		}
	})
	t.Run("refuses a secret file others can read", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, "a.db.secret")
		os.WriteFile(p, []byte(strings.Repeat("q", 43)+"\n"), 0o644)
		os.Chmod(p, 0o644)
		_, _, err := serverSecret(&config.Config{Storage: "sqlite:" + filepath.Join(dir, "a.db")})
		if err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("refuses a secret file that is too short", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "a.db.secret"), []byte("short\n"), 0o600)
		_, _, err := serverSecret(&config.Config{Storage: "sqlite:" + filepath.Join(dir, "a.db")})
		if err == nil || !strings.Contains(err.Error(), "fewer than 32 bytes") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("uses a fresh random secret for memory storage", func(t *testing.T) {
		k1, _, err1 := serverSecret(&config.Config{Storage: "memory"})
		k2, _, err2 := serverSecret(&config.Config{Storage: "memory"})
		if err1 != nil || err2 != nil || len(k1) != 32 || bytes.Equal(k1, k2) {
			t.Fatalf("%x %x %v %v", k1, k2, err1, err2)
		}
	})
	t.Run("prefers the configured secret", func(t *testing.T) {
		k, src, err := serverSecret(&config.Config{Storage: "postgres://x", Secret: strings.Repeat("c", 32)})
		if err != nil || string(k) != strings.Repeat("c", 32) || src != "configuration" {
			t.Fatalf("%q %q %v", k, src, err)
		}
	})
}

func TestSampleConfigsAreValid(t *testing.T) {
	files, err := filepath.Glob("../../examples/config/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no sample configs: %v", err)
	}
	environ := map[string]string{
		"AUTHSERVER_SECRET":   strings.Repeat("s", 32),
		"CI_BOT_SECRET":       "ci-bot-secret-0123456789",
		"NIGHTLY_JOB_SECRET":  "nightly-secret-0123456789",
		"MCP_SERVER_SECRET":   "mcp-server-secret-0123456789",
		"OPS_BOT_SECRET":      "ops-bot-secret-0123456789",
		"CORP_CLIENT_SECRET":  "corp-client-secret-0123456789",
		"ALICE_PASSWORD_HASH": "$argon2id$v=19$m=65536,t=1,p=2$Zz8e+yM91/O4KtN11A676A$MToL7f9xED3i8T1YH07Z4xSi9FD7H8KQ+YQgfMZSOVE",
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			code, _, errOut := runCLI(t, "", environ, "check-config", "--config", f)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
		})
	}
}

// The subcommand list of `authserver keys --help` etc. starts every
// description in one column, also after a verb with arguments ("delete ID").
func TestSubcommandUsageAligned(t *testing.T) {
	for name, vs := range verbs {
		code, out, _ := runCLI(t, "", nil, name, "--help")
		if code != 0 {
			t.Fatalf("%s --help: exit %d", name, code)
		}
		col := -1
		for _, v := range vs {
			help := specs[name+" "+v].help
			var line string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "  "+v+" ") {
					line = l
				}
			}
			i := strings.Index(line, help)
			if i < 0 {
				t.Fatalf("%s --help: no line for %q in\n%s", name, v, out)
			}
			if col >= 0 && i != col {
				t.Errorf("%s --help: %q's description starts at column %d, the others at %d:\n%s", name, v, i, col, out)
			}
			col = i
		}
	}
}

// TestAKidStartingWithADashIsAnArgumentAfterTwoDashes: a kid is a
// base64url JWK thumbprint (RFC 7638), and one in 64 starts with '-'.
// After -- it is the KID, before or after the flags.
func TestAKidStartingWithADashIsAnArgumentAfterTwoDashes(t *testing.T) {
	for _, args := range [][]string{
		{"keys", "retire", "--config", "x.yaml", "--", "-0ZOBcQHSH5l5LUBFUODY4pEpgpQ"},
		{"keys", "retire", "--", "-0ZOBcQHSH5l5LUBFUODY4pEpgpQ", "--config", "x.yaml"},
	} {
		cmd, err := parseArgs(args, env{lookup: func(string) (string, bool) { return "", false }})
		if err != nil || cmd.verb != "retire" || len(cmd.args) != 1 || cmd.args[0] != "-0ZOBcQHSH5l5LUBFUODY4pEpgpQ" || cmd.configPath != "x.yaml" {
			t.Errorf("%q: %+v, %v", args, cmd, err)
		}
	}
}
