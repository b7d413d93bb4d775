package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/mcpauth/mcpauth/internal/freeport"
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
			out, authorizations := runExampleClient(t, bin, "--server", s.MCPURL, "--tool", tc.tool)
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("client output lacks %q:\n%s", w, out)
				}
			}
			if authorizations != tc.authorizations {
				t.Errorf("%d authorizations, want %d", authorizations, tc.authorizations)
			}
		})
	}
}

// TestExampleClientThroughTheGateway runs the whole chain of the README's
// ten-minute tour (step 2, the gateway in front of a TypeScript server) on one
// machine: the AS of deploy/authserver.yaml, the TypeScript SDK server of
// the tests answering in event streams (its defaults), cmd/mcpgateway with
// deploy/mcpgateway.yaml (upstream_auth included) in front of it, and the
// examples/client program with the README's flags, signing in as the demo
// user. echo needs one authorization (the token gets mcp:tools, the scope of
// the gateway's 401 challenge); admin_stats gets the 403 insufficient_scope
// challenge for mcp:admin (RFC 6750 §3.1) and a second, step-up
// authorization. Each call reaches the upstream once, with the gateway's own
// exchanged token (RFC 8693), never the client's.
func TestExampleClientThroughTheGateway(t *testing.T) {
	bin := clientBinary(t)
	logs := &lockedBuffer{}
	gw, ts := freeport.Addr(t), freeport.Addr(t)
	upstream := startTSServer(t, logs, ts, false)
	s := startStack(t, stackOptions{editConfig: func(c string) string {
		return strings.NewReplacer(gatewayAddr, gw, tsServerAddr, ts).Replace(c)
	}})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- gateway and upstream output ---\n%s", logs)
		}
	})
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	startGateway(t, s, logs, gatewayConfig(t, s, gw, ts, auditFile, true), gw, ts)
	resource := "http://" + gw + "/mcp"

	tests := []struct {
		name           string
		tool, args     string
		authorizations int
		want           string
	}{
		{"echo needs one authorization", "echo", `{"text":"hi"}`, 1, "echo: hi"},
		{"admin_stats needs a second, step-up authorization", "admin_stats", "{}", 2, "admin_stats: sessions: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(upstream.calls(t))
			out, authorizations := runExampleClient(t, bin, "--server", resource, "--tool", tc.tool, "--args", tc.args)
			if !strings.Contains(out, tc.want) {
				t.Errorf("client output lacks %q:\n%s", tc.want, out)
			}
			if authorizations != tc.authorizations {
				t.Errorf("%d authorizations, want %d:\n%s", authorizations, tc.authorizations, out)
			}
			if got := upstream.calls(t)[before:]; !slices.Equal(got, []string{tc.tool}) {
				t.Errorf("the upstream ran %v, want [%s]", got, tc.tool)
			}
			if !auditedCall(t, auditFile, tc.tool, demoUser) {
				t.Errorf("no audited tool.call of %s by %s:\n%s", tc.tool, demoUser, readFile(t, auditFile))
			}
		})
	}
	for _, r := range upstream.seen(t) {
		if r.Method == "POST" && !strings.HasPrefix(r.Authorization, "Bearer ") {
			t.Errorf("the upstream got a POST without the gateway's token: %+v", r)
		}
	}
}

// auditedCall reports whether the gateway's JSON audit file has a tool.call
// line for tool by sub that succeeded.
func auditedCall(t *testing.T, auditFile, tool, sub string) bool {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, auditFile)), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if e["event"] == "tool.call" && e["tool"] == tool && e["sub"] == sub && e["result"] == "ok" {
			return true
		}
	}
	return false
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// runExampleClient runs the examples/client binary with args, a free
// loopback callback port and a timeout, and answers every authorization URL
// it prints with the form driver as the demo user, delivering the redirect
// to the program's listener. It returns the program's output and the number
// of authorizations; a failed run fails t.
func runExampleClient(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--callback", "127.0.0.1:0", "--timeout", "90s")...)
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
	return strings.Join(out, "\n"), authorizations
}
