package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigWarnsOfAnIssuerOnAnotherLoopbackPort: the effective
// configuration goes to stdout as before, the warning to stderr, exit 0.
func TestCheckConfigWarnsOfAnIssuerOnAnotherLoopbackPort(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	write := func(issuer, listen string) {
		t.Helper()
		err := os.WriteFile(p, []byte("issuer: "+issuer+"\nlisten: "+listen+"\nstorage: memory\nresources:\n  - uri: http://127.0.0.1:8080/mcp\n    scopes: [mcp:tools]\n"), 0o600)
		if err != nil {
			t.Fatal(err)
		}
	}
	write("http://127.0.0.1:9000", "127.0.0.1:9500")
	code, out, errOut := runCLI(t, "", nil, "check-config", "--config", p)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "WARN") || !strings.Contains(errOut, "field=issuer") || !strings.Contains(errOut, "http://127.0.0.1:9000") || !strings.Contains(errOut, "127.0.0.1:9500") {
		t.Errorf("stderr does not warn about the port:\n%s", errOut)
	}
	if !strings.Contains(out, "issuer: http://127.0.0.1:9000") || strings.Contains(out, "WARN") {
		t.Errorf("stdout is not the configuration alone:\n%s", out)
	}

	write("http://127.0.0.1:9500", "127.0.0.1:9500")
	code, _, errOut = runCLI(t, "", nil, "check-config", "--config", p)
	if code != 0 || errOut != "" {
		t.Errorf("matching ports: exit %d, stderr %q", code, errOut)
	}
}

// TestCheckConfigWithoutAFileFollowsListen: the development issuer is the
// AUTHSERVER_LISTEN address.
func TestCheckConfigWithoutAFileFollowsListen(t *testing.T) {
	code, out, errOut := runCLI(t, "", map[string]string{"AUTHSERVER_LISTEN": "127.0.0.1:9500", "AUTHSERVER_STORAGE": "memory"}, "check-config")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "issuer: http://127.0.0.1:9500") || strings.Contains(errOut, "WARN") {
		t.Errorf("issuer does not follow AUTHSERVER_LISTEN:\n%s\nstderr: %s", out, errOut)
	}
}
