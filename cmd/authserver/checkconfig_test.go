package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// warnLines returns the WARN lines of a text log without their time.
func warnLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "field=") {
			out = append(out, regexp.MustCompile(`^time=\S+ `).ReplaceAllString(l, ""))
		}
	}
	return out
}

// check-config prints the warnings serve logs, line for line: a weak secret,
// a plain http issuer off loopback, a weak password hash.
func TestCheckConfigPrintsTheWarningsServeLogs(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := writeConfig(t, dir, `issuer: http://auth.internal.example
listen: `+addr+`
storage: memory
secret: `+strings.Repeat("a", 32)+`
resources:
  - uri: https://mcp.example.com
    scopes: [a]
users:
  - username: alice
    password_hash: "$2b$04$abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0"
`)
	out, errOut, err := runBin(t, dir, nil, "", "check-config", "--config", cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	checked := warnLines(errOut)
	for _, want := range []string{"field=secret", "field=issuer", "field=users[0].password_hash"} {
		if !slicesContainsSubstring(checked, want) {
			t.Fatalf("check-config warnings lack %s:\n%s", want, errOut)
		}
	}
	if strings.Contains(out, "level=WARN") || !strings.Contains(out, "issuer: http://auth.internal.example") {
		t.Fatalf("stdout is not the configuration alone:\n%s", out)
	}

	// serve logs the same lines (start polls the listen address).
	p := start(t, dir, "http://"+addr, nil, "--config", cfg)
	p.stop(t)
	served := warnLines(p.stderr.String())
	for _, l := range checked {
		if !slicesContainsSubstring(served, l) {
			t.Fatalf("serve did not log %q:\n%s", l, p.stderr)
		}
	}
}

func slicesContainsSubstring(list []string, s string) bool {
	for _, l := range list {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

func TestCheckConfigNeverEchoesTheStoragePassword(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(p, []byte("secret: "+strings.Repeat("k9Zq", 8)+"\nresources:\n  - uri: https://mcp.example.com\n    scopes: [a]\n"), 0o600)
	for _, storage := range []string{"postgress://u:hunter2-pw@db/x", "postgres://u:hunter2@pw/x@db/x", "postgres://u:hunter2-pw@db/x?sslmode=disable"} {
		code, out, errOut := runCLI(t, "", map[string]string{"AUTHSERVER_STORAGE": storage}, "check-config", "--config", p)
		if strings.Contains(out+errOut, "hunter2") {
			t.Fatalf("storage %q: password in the output (exit %d):\n%s%s", storage, code, out, errOut)
		}
		if code == 0 && !strings.Contains(out, "storage: postgres://u:redacted@db/x") {
			t.Fatalf("storage %q not shown redacted:\n%s", storage, out)
		}
	}
}

// With no configuration and the container's listen address, serve refuses
// and says what to provide; AUTHSERVER_DEV=1 is the explicit opt-in.
func TestServeWithoutConfigOffLoopbackRefuses(t *testing.T) {
	code, _, errOut := runCLI(t, "", map[string]string{"AUTHSERVER_LISTEN": "0.0.0.0:9000"}, "serve")
	if code != 1 || !strings.Contains(errOut, "no configuration file") || !strings.Contains(errOut, "--config FILE or AUTHSERVER_CONFIG") ||
		!strings.Contains(errOut, "AUTHSERVER_DEV=1") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
