package scaletest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/internal/freeport"
	"github.com/mcpauth/mcpauth/internal/password"
	"github.com/mcpauth/mcpauth/internal/syncbuf"
)

// The servers under test are the real binary, built once per test run.
var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(trivialEnv); addr != "" {
		// This binary was started as BenchmarkTable's trivial handler.
		fmt.Fprintln(os.Stderr, serveTrivial(addr))
		os.Exit(1)
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// authserverBin builds cmd/authserver (with the pprof overlay when
// -scale.pprof is set; see bench_test.go) and returns its path, or returns
// $SCALETEST_AUTHSERVER_BIN when set.
func authserverBin(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("builds and runs the authserver binary")
	}
	if bin := os.Getenv("SCALETEST_AUTHSERVER_BIN"); bin != "" && !*pprofFlag {
		return bin // a prebuilt binary (a release, an older commit)
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "scaletest-bin")
		if buildErr != nil {
			return
		}
		args := []string{"build", "-o", filepath.Join(binDir, "authserver")}
		if *pprofFlag {
			overlay, err := writeOverlay(binDir)
			if err != nil {
				buildErr = err
				return
			}
			args = append(args, "-overlay", overlay)
		}
		cmd := exec.Command("go", append(args, "github.com/mcpauth/mcpauth/cmd/authserver")...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return filepath.Join(binDir, "authserver")
}

// freeAddr is a loopback address for a server the test starts, reserved
// (freeport) until the test ends, so that no other listener or outgoing
// connection takes its port before the server binds it (or between a stop
// and a restart on the same address).
func freeAddr(tb testing.TB) string {
	tb.Helper()
	return freeport.Addr(tb)
}

// Credentials of the configured clients and user.
const (
	testSecret  = "scaletest-secret-scaletest-secret-0123456"
	botID       = "bot"
	botSecret   = "bot-secret-0123456789abcdef"
	appID       = "app"
	redirectURI = "http://127.0.0.1:7777/callback"
	username    = "alice"
	userPass    = "alice-password"
	resource    = "http://127.0.0.1:8080/mcp"
)

var (
	hashOnce sync.Once
	userHash string
)

func aliceHash(tb testing.TB) string {
	hashOnce.Do(func() {
		h, err := password.Hash(userPass)
		if err != nil {
			panic(err)
		}
		userHash = h
	})
	return userHash
}

// conf is the configuration of one instance.
type conf struct {
	issuer, listen, storage string
	grace                   string // tokens.refresh_grace; "" for the default
	extra                   string // appended YAML
}

func (c conf) yaml(tb testing.TB) string {
	s := fmt.Sprintf(`issuer: %s
listen: %s
storage: %s
secret: ${AUTHSERVER_SECRET}
resources:
  - uri: %s
    name: Example MCP server
    scopes: [mcp:tools]
    default: true
    introspection_clients: [%s]
clients:
  - id: %s
    secret: %s
    grant_types: [client_credentials]
    resources: [%s]
  - id: %s
    public: true
    redirect_uris: [%s]
users:
  - username: %s
    password_hash: %q
registration:
  allow_client_credentials: true
  rate_limit: {per_minute: 0, burst: 1}
log:
  level: warn
`, c.issuer, c.listen, c.storage, resource, botID, botID, botSecret, resource, appID, redirectURI, username, aliceHash(tb))
	if c.grace != "" {
		s += "tokens:\n  refresh_grace: " + c.grace + "\n"
	}
	return s + c.extra
}

// instance is one running `authserver serve`.
type instance struct {
	addr    string // where it listens
	issuer  string
	dir     string
	cfg     string // path of its configuration file
	storage string
	cmd     *exec.Cmd
	out     *syncBuffer
	done    chan error
}

type syncBuffer = syncbuf.Buffer

func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AUTHSERVER_") {
			env = append(env, kv)
		}
	}
	return append(env, "AUTHSERVER_SECRET="+testSecret)
}

// newInstance writes the configuration of an instance listening on a free
// port; issuer "" means its own address.
func newInstance(tb testing.TB, c conf) *instance {
	tb.Helper()
	in := &instance{addr: freeAddr(tb), dir: tb.TempDir(), storage: c.storage}
	c.listen = in.addr
	if c.issuer == "" {
		c.issuer = "http://" + in.addr
	}
	in.issuer = c.issuer
	in.cfg = filepath.Join(in.dir, "authserver.yaml")
	if err := os.WriteFile(in.cfg, []byte(c.yaml(tb)), 0o600); err != nil {
		tb.Fatal(err)
	}
	return in
}

// start runs `authserver serve` and waits until it answers; it reports
// failures with Errorf so that it may run off the test goroutine.
func (in *instance) start(tb testing.TB, env ...string) bool {
	tb.Helper()
	cmd := exec.Command(authserverBin(tb), "serve", "--config", in.cfg)
	cmd.Dir = in.dir
	cmd.Env = append(baseEnv(), env...)
	in.out = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = in.out, in.out
	in.cmd, in.done = cmd, make(chan error, 1)
	if err := cmd.Start(); err != nil {
		tb.Error(err)
		return false
	}
	done := in.done
	go func() { done <- cmd.Wait() }()
	tb.Cleanup(func() {
		in.stop(tb)
		if tb.Failed() {
			tb.Logf("--- output of the authserver at %s ---\n%s", in.addr, in.out)
		}
	})
	c := in.client()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := c.Get(in.issuer + "/.well-known/oauth-authorization-server")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		select {
		case err := <-done:
			done <- err
			tb.Errorf("authserver exited before serving (%v):\n%s", err, in.out)
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	tb.Errorf("authserver at %s did not serve in time:\n%s", in.addr, in.out)
	return false
}

// stop sends SIGTERM and waits for the exit.
func (in *instance) stop(tb testing.TB) {
	if in.cmd == nil || in.cmd.Process == nil {
		return
	}
	select {
	case err := <-in.done:
		in.done <- err
		return
	default:
	}
	in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-in.done:
		in.done <- err
	case <-time.After(30 * time.Second):
		in.cmd.Process.Kill()
		tb.Errorf("authserver at %s ignored SIGTERM", in.addr)
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (in *instance) kill(tb testing.TB) {
	tb.Helper()
	in.cmd.Process.Kill()
	err := <-in.done
	in.done <- err
}

// client is an HTTP client whose every connection goes to this instance,
// whatever host the URL names: a load balancer pinned to one backend. It
// does not follow redirects.
func (in *instance) client() *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return d.DialContext(ctx, network, in.addr)
			},
			MaxIdleConnsPerHost: 64,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// runBin runs a one-shot authserver command.
func runBin(tb testing.TB, dir string, args ...string) (string, error) {
	tb.Helper()
	cmd := exec.Command(authserverBin(tb), args...)
	cmd.Dir = dir
	cmd.Env = baseEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// answer is an RFC 6749 §5.1/§5.2 token answer or an RFC 7662 §2.2 one.
type answer struct {
	status       int
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	Error        string `json:"error"`
	Active       bool   `json:"active"`
	raw          string
}

// post sends a form to the instance's endpoint (path below the issuer),
// with client_secret_basic when id is not "".
func (in *instance) post(tb testing.TB, path string, form url.Values, id, secret string) answer {
	tb.Helper()
	a, err := in.tryPost(path, form, id, secret)
	if err != nil {
		tb.Fatalf("POST %s at %s: %v", path, in.addr, err)
	}
	return a
}

func (in *instance) tryPost(path string, form url.Values, id, secret string) (answer, error) {
	return postWith(in.client(), in.issuer+path, form, id, secret)
}

func postWith(c *http.Client, u string, form url.Values, id, secret string) (answer, error) {
	var a answer
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return a, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if id != "" {
		req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	}
	resp, err := c.Do(req)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return a, err
	}
	a.status, a.raw = resp.StatusCode, string(b)
	if err := json.Unmarshal(b, &a); err != nil {
		return a, fmt.Errorf("%s: not JSON: %.200q", resp.Status, b)
	}
	return a, nil
}

func (in *instance) clientCredentials(tb testing.TB) answer {
	tb.Helper()
	a := in.post(tb, "/token", url.Values{"grant_type": {"client_credentials"}}, botID, botSecret)
	if a.status != http.StatusOK || a.AccessToken == "" {
		tb.Fatalf("client credentials at %s: %d %s", in.addr, a.status, a.raw)
	}
	return a
}

func (in *instance) introspect(tb testing.TB, token string) bool {
	tb.Helper()
	a := in.post(tb, "/introspect", url.Values{"token": {token}}, botID, botSecret)
	if a.status != http.StatusOK {
		tb.Fatalf("introspection at %s: %d %s", in.addr, a.status, a.raw)
	}
	return a.Active
}

func (in *instance) refresh(tb testing.TB, token string) answer {
	tb.Helper()
	return in.post(tb, "/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}, "client_id": {appID}}, "", "")
}

func (in *instance) redeem(tb testing.TB, code, verifier string) answer {
	tb.Helper()
	return in.post(tb, "/token", codeForm(code, verifier), "", "")
}

func codeForm(code, verifier string) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI},
		"client_id": {appID}, "code_verifier": {verifier}}
}
