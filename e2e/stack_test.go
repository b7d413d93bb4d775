package e2e

import (
	"bufio"
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/examples/stack/launch"
)

// TestStackCommand runs `go run ./examples/stack` as a user would (on free
// ports instead of the defaults), waits for its banner, checks that the three
// servers answer, and stops it with an interrupt.
func TestStackCommand(t *testing.T) {
	binaries(t) // warms the build cache, and fails early if the stack does not build
	var addrs []string
	for range 3 {
		a, err := launch.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Build the command first so that the interrupt reaches it, not go run.
	bin := filepath.Join(t.TempDir(), "stack")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../examples/stack").CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/stack: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, bin, "--as", addrs[0], "--mcp", addrs[1], "--downstream", addrs[2], "--quiet")
	cmd.Dir = ".." // the module, as for `go run ./examples/stack`
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	var banner []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		banner = append(banner, sc.Text())
		if strings.HasPrefix(sc.Text(), "Press Ctrl-C") {
			break
		}
	}
	text := strings.Join(banner, "\n")
	if !strings.Contains(text, "The example stack is running") {
		t.Fatalf("no banner; stdout:\n%s\nstderr:\n%s", text, stderr.String())
	}
	for _, want := range []string{"http://" + addrs[0], "http://" + addrs[1] + "/mcp", "alice / alice-demo-password", "go run ./examples/client"} {
		if !strings.Contains(text, want) {
			t.Errorf("banner lacks %q:\n%s", want, text)
		}
	}
	for _, u := range []string{"http://" + addrs[0] + "/healthz", "http://" + addrs[1] + "/healthz", "http://" + addrs[2] + "/healthz"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Errorf("GET %s: %v", u, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %s", u, resp.Status)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() { // drain
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("stack exited with %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("stack did not stop within 30s of the interrupt")
	}
	for _, a := range addrs {
		if resp, err := http.Get("http://" + a + "/healthz"); err == nil {
			resp.Body.Close()
			t.Errorf("%s still answers after the stack stopped", a)
		}
	}
}
