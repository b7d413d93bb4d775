package e2e

import (
	"bufio"
	"context"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

var (
	clientOnce sync.Once
	clientErr  error
)

// clientBinary builds examples/client next to the stack's binaries.
func clientBinary(t *testing.T) string {
	dir := binaries(t)
	clientOnce.Do(func() {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "client"), "../examples/client").CombinedOutput()
		if err != nil {
			clientErr = &buildError{err: err, out: string(out)}
		}
	})
	if clientErr != nil {
		t.Fatal(clientErr)
	}
	return filepath.Join(dir, "client")
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string {
	return "go build ./examples/client: " + e.err.Error() + "\n" + e.out
}

// TestExampleClient runs the examples/client program against the stack, as
// its README tells a user to: it prints authorization URLs, a person (here the
// form driver) logs in and consents, the browser's redirect reaches the
// program's loopback listener, and the program prints the tool's result.
func TestExampleClient(t *testing.T) {
	bin := clientBinary(t)
	s := startStack(t, stackOptions{})

	tests := []struct {
		name           string
		tool           string
		authorizations int
		want           []string
	}{
		{"whoami needs one authorization", "whoami", 1, []string{"whoami: ", `"sub":"` + demoUser + `"`}},
		{"admin_stats needs a second, step-up authorization", "admin_stats", 2, []string{"admin_stats: ", `"called_by":"` + demoUser + `"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "--server", s.MCPURL, "--tool", tc.tool, "--callback", "127.0.0.1:0", "--timeout", "90s")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			driver := newFormLogin(demoUser, demoPassword, "")
			driver.deliver = true
			var out []string
			var authorizations int
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				line := sc.Text()
				out = append(out, line)
				if !strings.HasPrefix(line, "Open this URL") || !sc.Scan() {
					continue
				}
				authURL := sc.Text()
				out = append(out, authURL)
				authorizations++
				u, err := url.Parse(authURL)
				if err != nil {
					t.Fatalf("the client printed %q: %v", authURL, err)
				}
				driver.redirectURI = u.Query().Get("redirect_uri")
				if !strings.HasPrefix(driver.redirectURI, "http://127.0.0.1:") {
					t.Errorf("redirect_uri %q is not a loopback IP literal", driver.redirectURI)
				}
				if _, err := driver.fetch(ctx, &auth.AuthorizationArgs{URL: authURL}); err != nil {
					t.Fatalf("authorizing: %v", err)
				}
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("client: %v\nstdout:\n%s\nstderr:\n%s", err, strings.Join(out, "\n"), stderr.String())
			}
			all := strings.Join(out, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("client output lacks %q:\n%s", w, all)
				}
			}
			if authorizations != tc.authorizations {
				t.Errorf("%d authorizations, want %d", authorizations, tc.authorizations)
			}
		})
	}
}
