package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/examples/stack/launch"
)

// TestDeployConfigPassesCheckConfig runs `authserver check-config` on
// deploy/authserver.yaml with deploy/stack.env's environment, as compose
// does: a key the AS does not know, or a bad value, fails here with the
// field's name rather than at `docker compose up`.
func TestDeployConfigPassesCheckConfig(t *testing.T) {
	bin := filepath.Join(binaries(t), "authserver")
	env, err := launch.ReadEnvFile(filepath.Join(moduleRoot, "deploy", "stack.env"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", filepath.Join(moduleRoot, "deploy", "authserver.yaml"), "check-config")
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("check-config: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{"http://127.0.0.1:8080/mcp", "http://127.0.0.1:8081/api", "example-mcpserver", "reports:read"} {
		if !strings.Contains(text, want) {
			t.Errorf("effective configuration lacks %q:\n%s", want, text)
		}
	}
	for _, secret := range []string{env["AUTHSERVER_SECRET"], env["MCPSERVER_CLIENT_SECRET"], "$argon2id$"} {
		if strings.Contains(text, secret) {
			t.Errorf("check-config printed a secret (%.12s...)", secret)
		}
	}
}
