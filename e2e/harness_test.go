package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/examples/stack/launch"
	"github.com/mcpauth/mcpauth/internal/syncbuf"
)

// moduleRoot is the module's directory, seen from this package's.
const moduleRoot = ".."

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// binaries builds authserver, mcpserver and downstream once per test binary.
func binaries(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "mcpauth-e2e-bin-")
		if buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		buildErr = launch.Build(ctx, moduleRoot, buildDir)
	})
	if buildErr != nil {
		t.Fatalf("building the stack: %v", buildErr)
	}
	return buildDir
}

// requireCI fails the test when CI is set and skips it otherwise: for
// prerequisites (PostgreSQL, chromium) that CI must provide.
func requireCI(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set, so this is a failure)", msg)
	}
	t.Skip(msg)
}

// stackOptions adjust one test's stack.
type stackOptions struct {
	storage    string
	cimdHost   string // host:port allowed to serve CIMD documents from loopback
	extraEnv   []string
	editConfig func(string) string
	mcpArgs    []string // extra examples/mcpserver flags
	// logs, when set, collects the processes' output for the test to read.
	logs *lockedBuffer
}

// lockedBuffer collects the processes' output for the test log.
type lockedBuffer = syncbuf.Buffer

// startStack runs the example stack as processes on free ports and stops it
// when the test ends; the processes' output is logged when the test fails.
func startStack(t testing.TB, so stackOptions) *launch.Stack {
	t.Helper()
	bin := binaries(t)
	var addrs [3]string
	for i := range addrs {
		a, err := launch.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = a
	}
	logs := so.logs
	if logs == nil {
		logs = &lockedBuffer{}
	}
	o := launch.Options{
		Root:           moduleRoot,
		BinDir:         bin,
		WorkDir:        t.TempDir(),
		ASAddr:         addrs[0],
		MCPAddr:        addrs[1],
		DownstreamAddr: addrs[2],
		Storage:        so.storage,
		Env:            so.extraEnv,
		Log:            logs,
		MCPServerArgs:  so.mcpArgs,
		EditConfig: func(s string) string {
			if so.cimdHost != "" {
				s = strings.Replace(s, "allow_hosts: []", fmt.Sprintf("allow_hosts: [%q]", so.cimdHost), 1)
			}
			if so.editConfig != nil {
				s = so.editConfig(s)
			}
			return s
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := launch.Start(ctx, o)
	if err != nil {
		t.Fatalf("starting the stack: %v\n--- process output ---\n%s", err, logs.String())
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() || testing.Verbose() {
			t.Logf("--- process output ---\n%s", logs.String())
		}
	})
	return s
}

// exchange is one HTTP exchange seen by the recording client.
type exchange struct {
	Method, URL string
	Status      int
	WWWAuth     string
}

// recorder is an http.RoundTripper that notes every request the MCP client
// makes (never the Authorization header).
type recorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	log  []exchange
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	e := exchange{Method: req.Method, URL: req.URL.String()}
	if err == nil {
		e.Status = resp.StatusCode
		e.WWWAuth = resp.Header.Get("WWW-Authenticate")
	}
	r.mu.Lock()
	r.log = append(r.log, e)
	r.mu.Unlock()
	return resp, err
}

func (r *recorder) exchanges() []exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]exchange(nil), r.log...)
}

// find returns the index of the first exchange at or after from that matches.
func (r *recorder) find(from int, method, urlPrefix string, status int) int {
	ex := r.exchanges()
	for i := from; i < len(ex); i++ {
		e := ex[i]
		if e.Method == method && strings.HasPrefix(e.URL, urlPrefix) && (status == 0 || e.Status == status) {
			return i
		}
	}
	return -1
}

func (r *recorder) String() string {
	var b strings.Builder
	for _, e := range r.exchanges() {
		fmt.Fprintf(&b, "  %s %s -> %d\n", e.Method, e.URL, e.Status)
	}
	return b.String()
}

// jwtClaims decodes the payload of a JWS compact token without verifying it:
// the test only reads what the servers verified.
func jwtClaims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("access token is not a JWS compact serialization (%d parts)", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("access token payload: %v", err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("access token payload: %v", err)
	}
	return c
}

func fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// getJSON GETs url and decodes a 200 JSON answer into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// cimdServer serves a Client ID Metadata Document over https on 127.0.0.1
// and writes its certificate to a PEM file the AS is told to trust
// (SSL_CERT_FILE).
type cimdServer struct {
	srv      *httptest.Server
	URL      string // the client_id
	CertFile string
	mu       sync.Mutex
	hits     int
}

func newCIMDServer(t *testing.T, redirectURI string) *cimdServer {
	t.Helper()
	c := &cimdServer{}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/oauth/client-metadata.json" {
			http.NotFound(w, r)
			return
		}
		c.mu.Lock()
		c.hits++
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=60")
		json.NewEncoder(w).Encode(map[string]any{
			"client_id":                  c.URL,
			"client_name":                "mcpauth e2e CIMD client",
			"client_uri":                 c.srv.URL,
			"redirect_uris":              []string{redirectURI},
			"grant_types":                []string{"authorization_code", "refresh_token"},
			"response_types":             []string{"code"},
			"token_endpoint_auth_method": "none",
		})
	}))
	c.srv.StartTLS()
	t.Cleanup(c.srv.Close)
	c.URL = c.srv.URL + "/oauth/client-metadata.json"
	c.CertFile = filepath.Join(t.TempDir(), "cimd-ca.pem")
	if err := os.WriteFile(c.CertFile, pemCert(c.srv.Certificate().Raw), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *cimdServer) Host() string { return strings.TrimPrefix(c.srv.URL, "https://") }

func (c *cimdServer) Hits() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
