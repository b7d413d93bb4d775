package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcpauth/mcpauth/internal/freeport"
	"github.com/mcpauth/mcpauth/internal/password"
	"github.com/mcpauth/mcpauth/internal/syncbuf"
	"github.com/mcpauth/mcpauth/scaletest/load"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
)

// These tests build the real binary and drive it over real HTTP on
// 127.0.0.1, as an operator and an OAuth client would.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "authserver-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "authserver")
		if runtime.GOOS == "windows" {
			binPath += ".exe"
		}
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// freeAddr is a loopback address for a server the test starts, reserved
// (freeport) until the test ends, so that no other listener or outgoing
// connection takes its port before the server binds it.
func freeAddr(t *testing.T) string {
	t.Helper()
	return freeport.Addr(t)
}

// proc is a running authserver.
type proc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan error
	issuer string
}

type syncBuffer = syncbuf.Buffer

// runBin runs the binary to completion and returns its output.
func runBin(t *testing.T, dir string, environ []string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), environ...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// baseEnv is the test process's environment without AUTHSERVER_ variables,
// so the developer's own settings do not leak into the server under test.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AUTHSERVER_") {
			env = append(env, kv)
		}
	}
	return env
}

// start runs `authserver serve` and waits until its metadata answers.
func start(t *testing.T, dir, issuer string, environ []string, args ...string) *proc {
	t.Helper()
	p := startNoFatal(t, dir, issuer, environ, args...)
	if p == nil {
		t.FailNow()
	}
	return p
}

// stop sends SIGTERM and expects a graceful exit with status 0.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Errorf("authserver did not exit cleanly: %v\n%s", err, p.stderr)
		}
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		t.Errorf("authserver ignored SIGTERM:\n%s", p.stderr)
	}
}

func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	p := filepath.Join(dir, "authserver.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// stackConfig is a configuration with two resources and a machine client.
func stackConfig(issuer, listen, storage string) string {
	return fmt.Sprintf(`issuer: %s
listen: %s
storage: %s
secret: ${AUTHSERVER_SECRET}
resources:
  - uri: http://127.0.0.1:8080/mcp
    name: Example MCP server
    scopes: [mcp:tools, mcp:admin]
    default: true
  - uri: http://127.0.0.1:8081/api
    name: Reports
    scopes: [reports:read]
clients:
  - id: ci-bot
    secret: ${CI_BOT_SECRET}
    grant_types: [client_credentials]
    scopes: [mcp:tools, reports:read]
  - id: exchanger
    secret: ${CI_BOT_SECRET}
    grant_types: [urn:ietf:params:oauth:grant-type:token-exchange]
    scopes: [reports:read]
    resources: [http://127.0.0.1:8081/api]
exchange:
  - from: http://127.0.0.1:8080/mcp
    to: http://127.0.0.1:8081/api
    scopes: [reports:read]
    clients: [exchanger]
registration:
  allow_client_credentials: true
signing:
  key_reload: 1s
log:
  level: debug
`, issuer, listen, storage)
}

const (
	testSecret = "test-secret-test-secret-test-secret-0123"
	botSecret  = "ci-bot-secret-0123456789"
)

var testEnv = []string{"AUTHSERVER_SECRET=" + testSecret, "CI_BOT_SECRET=" + botSecret}

// asMetadata is the part of the RFC 8414 document the tests use.
type asMetadata struct {
	Issuer                string `json:"issuer"`
	TokenEndpoint         string `json:"token_endpoint"`
	JWKSURI               string `json:"jwks_uri"`
	RegistrationEndpoint  string `json:"registration_endpoint"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s %s", u, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func discover(t *testing.T, issuer string) asMetadata {
	t.Helper()
	var md asMetadata
	getJSON(t, issuer+"/.well-known/oauth-authorization-server", &md)
	if md.Issuer != issuer {
		t.Fatalf("metadata issuer %q, want %q", md.Issuer, issuer)
	}
	return md
}

func jwks(t *testing.T, md asMetadata) jose.JSONWebKeySet {
	t.Helper()
	var set jose.JSONWebKeySet
	getJSON(t, md.JWKSURI, &set)
	return set
}

// verify checks an access token's signature against the JWKS and returns
// its claims.
func verify(t *testing.T, md asMetadata, token string) map[string]any {
	t.Helper()
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256, jose.RS256, jose.EdDSA})
	if err != nil {
		t.Fatalf("parse access token: %v", err)
	}
	if typ, _ := tok.Headers[0].ExtraHeaders["typ"].(string); typ != "at+jwt" {
		t.Fatalf("typ %q, want at+jwt", typ)
	}
	set := jwks(t, md)
	keys := set.Key(tok.Headers[0].KeyID)
	if len(keys) != 1 {
		t.Fatalf("kid %q not in the JWKS", tok.Headers[0].KeyID)
	}
	var claims map[string]any
	if err := tok.Claims(keys[0].Key, &claims); err != nil {
		t.Fatalf("signature: %v", err)
	}
	return claims
}

func audience(claims map[string]any) []string {
	switch a := claims["aud"].(type) {
	case string:
		return []string{a}
	case []any:
		var out []string
		for _, v := range a {
			s, _ := v.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}

func clientToken(t *testing.T, md asMetadata, id, secret string, params url.Values, scopes ...string) (*oauth2.Token, error) {
	t.Helper()
	cc := clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: md.TokenEndpoint,
		Scopes: scopes, EndpointParams: params, AuthStyle: oauth2.AuthStyleInHeader}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return cc.Token(ctx)
}

// checkClientCredentials gets tokens with and without `resource` and checks
// their audience, issuer and signature.
func checkClientCredentials(t *testing.T, issuer string) {
	md := discover(t, issuer)
	cases := []struct {
		name    string
		params  url.Values
		scopes  []string
		wantAud string
		wantErr string
	}{
		{"issues a token for the default resource when none is named", nil, []string{"mcp:tools"}, "http://127.0.0.1:8080/mcp", ""},
		{"issues a token for the named resource", url.Values{"resource": {"http://127.0.0.1:8081/api"}}, []string{"reports:read"}, "http://127.0.0.1:8081/api", ""},
		{"canonicalises the named resource", url.Values{"resource": {"HTTP://127.0.0.1:8081/api/"}}, []string{"reports:read"}, "http://127.0.0.1:8081/api", ""},
		{"refuses a resource that is not configured", url.Values{"resource": {"http://127.0.0.1:9999/other"}}, nil, "", "invalid_target"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := clientToken(t, md, "ci-bot", botSecret, tc.params, tc.scopes...)
			if tc.wantErr != "" {
				var re *oauth2.RetrieveError
				if !errors.As(err, &re) || re.ErrorCode != tc.wantErr {
					t.Fatalf("got %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			claims := verify(t, md, tok.AccessToken)
			if aud := audience(claims); !slices.Equal(aud, []string{tc.wantAud}) {
				t.Fatalf("aud %v, want %s", aud, tc.wantAud)
			}
			if claims["iss"] != issuer || claims["client_id"] != "ci-bot" {
				t.Fatalf("claims %v", claims)
			}
		})
	}
	var re *oauth2.RetrieveError
	if _, err := clientToken(t, md, "ci-bot", "wrong-secret-wrong-secret", nil); !errors.As(err, &re) ||
		re.ErrorCode != "invalid_client" || re.Response.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong client secret: %v, want 401 invalid_client", err)
	}

	// The exchange: policy reaches the AS: a token for the MCP server is
	// exchanged (RFC 8693) for one for the reports API, by the allowed client only.
	subject, err := clientToken(t, md, "ci-bot", botSecret, nil, "mcp:tools")
	if err != nil {
		t.Fatal(err)
	}
	exchange := func(client string) (*http.Response, map[string]any) {
		form := url.Values{
			"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
			"subject_token":      {subject.AccessToken},
			"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
			"resource":           {"http://127.0.0.1:8081/api"},
		}
		req, _ := http.NewRequest(http.MethodPost, md.TokenEndpoint, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(client, botSecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		return resp, body
	}
	resp, body := exchange("exchanger")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("token exchange: %s %v", resp.Status, body)
	}
	at, _ := body["access_token"].(string)
	if aud := audience(verify(t, md, at)); !slices.Equal(aud, []string{"http://127.0.0.1:8081/api"}) {
		t.Fatalf("exchanged token aud %v", aud)
	}
	if resp, body := exchange("ci-bot"); resp.StatusCode != http.StatusBadRequest || body["error"] != "unauthorized_client" || body["access_token"] != nil {
		t.Fatalf("a client without the grant: %s %v, want 400 unauthorized_client (RFC 6749 §5.2)", resp.Status, body)
	}
}

func TestServeOnMemoryIssuesClientCredentialsTokens(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	cfg := writeConfig(t, dir, stackConfig(issuer, addr, "memory")+"gc:\n  interval: 1s\n")
	p := start(t, dir, issuer, testEnv, "--config", cfg)
	checkClientCredentials(t, issuer)

	// The periodic garbage collection runs.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.stderr.String(), `msg="garbage collection"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no garbage collection pass logged:\n%s", p.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Oversized request headers are refused before any handler runs.
	req, _ := http.NewRequest(http.MethodGet, issuer+"/healthz", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 200<<10))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("200 KiB of headers: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// /healthz reports storage health.
	resp, err := http.Get(issuer + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	p.stop(t)
	log := p.stderr.String()
	for _, leak := range []string{testSecret, botSecret} {
		if strings.Contains(log, leak) {
			t.Fatalf("log contains a secret:\n%s", log)
		}
	}
	if !strings.Contains(log, "stopped") {
		t.Fatalf("no graceful shutdown in the log:\n%s", log)
	}
}

func TestServeOnPostgresIssuesClientCredentialsTokens(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	cfg := writeConfig(t, dir, stackConfig(issuer, addr, dsn))
	start(t, dir, issuer, testEnv, "--config", cfg)
	checkClientCredentials(t, issuer)

	out, errOut, err := runBin(t, dir, testEnv, "", "migrate", "status", "--config", cfg)
	if err != nil || !strings.Contains(out, "applied") || strings.Contains(out, "pending") {
		t.Fatalf("migrate status after serve: %v\n%s%s", err, out, errOut)
	}
}

func TestPostgresNeedsAConfiguredSecret(t *testing.T) {
	dir := t.TempDir()
	_, errOut, err := runBin(t, dir, []string{"AUTHSERVER_STORAGE=postgres://postgres@127.0.0.1:1/x"}, "", "serve")
	if err == nil || !strings.Contains(errOut, "config: secret: required with postgres storage") {
		t.Fatalf("started without a secret: %v\n%s", err, errOut)
	}
}

// registered is an RFC 7591 §3.2.1 client information response.
type registered struct {
	ClientID                string `json:"client_id"`
	ClientSecret            string `json:"client_secret"`
	RegistrationAccessToken string `json:"registration_access_token"`
	RegistrationClientURI   string `json:"registration_client_uri"`
}

// register makes an RFC 7591 registration.
func register(t *testing.T, md asMetadata) registered {
	t.Helper()
	body := `{"client_name":"restart test","grant_types":["client_credentials"],"token_endpoint_auth_method":"client_secret_basic"}`
	resp, err := http.Post(md.RegistrationEndpoint, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ci registered
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(b, &ci) != nil || ci.ClientSecret == "" || ci.RegistrationClientURI == "" {
		t.Fatalf("registration: %s %s", resp.Status, b)
	}
	return ci
}

// readRegistration is an RFC 7592 §2.1 read; it returns the HTTP status.
func readRegistration(t *testing.T, ci registered) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, ci.RegistrationClientURI, nil)
	req.Header.Set("Authorization", "Bearer "+ci.RegistrationAccessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestSQLiteRestartKeepsClientsAndKeysAndRotationAddsAKey(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	db := filepath.Join(dir, "data", "auth.db")
	os.MkdirAll(filepath.Dir(db), 0o700)
	// No secret in this configuration: it is generated next to the database.
	cfgText := strings.Replace(stackConfig(issuer, addr, "sqlite:"+db), "secret: ${AUTHSERVER_SECRET}\n", "", 1)
	cfg := writeConfig(t, dir, cfgText)

	env := []string{"CI_BOT_SECRET=" + botSecret}
	p := start(t, dir, issuer, env, "--config", cfg)
	md := discover(t, issuer)
	before := jwks(t, md)
	if len(before.Keys) != 1 {
		t.Fatalf("first start: %d keys", len(before.Keys))
	}
	reg := register(t, md)
	// A client registered through DCR authenticates with its generated secret.
	if _, err := clientToken(t, md, reg.ClientID, reg.ClientSecret, nil); err != nil {
		t.Errorf("registered client before restart: %v", err)
	}
	oldTok, err := clientToken(t, md, "ci-bot", botSecret, nil)
	if err != nil {
		t.Fatal(err)
	}

	// keys rotate runs next to the serving process (same database file);
	// the server picks the new key up at its next key reload.
	out, errOut, err := runBin(t, dir, env, "", "keys", "rotate", "--config", cfg)
	if err != nil || !strings.Contains(out, "new signing key") {
		t.Fatalf("keys rotate: %v\n%s%s", err, out, errOut)
	}
	deadline := time.Now().Add(45 * time.Second)
	for len(jwks(t, md).Keys) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the running server never served the rotated key:\n%s", p.stderr)
		}
		time.Sleep(250 * time.Millisecond)
	}
	p.stop(t)
	if fi, err := os.Stat(db + ".secret"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v %v", fi, err)
	}

	start(t, dir, issuer, env, "--config", cfg)
	after := jwks(t, md)
	if len(after.Keys) != 2 || len(after.Key(before.Keys[0].KeyID)) != 1 {
		t.Fatalf("after rotation the JWKS has %d keys (old kid kept: %v)", len(after.Keys), len(after.Key(before.Keys[0].KeyID)) == 1)
	}
	for _, k := range after.Keys {
		if !k.IsPublic() {
			t.Fatal("JWKS contains a private key")
		}
	}
	// The token signed before the restart still verifies with the served keys.
	verify(t, md, oldTok.AccessToken)
	// The client registered before the restart is still there.
	if status := readRegistration(t, reg); status != http.StatusOK {
		t.Errorf("RFC 7592 read of the registered client after restart: %d", status)
	}
	if _, err := clientToken(t, md, reg.ClientID, reg.ClientSecret, nil); err != nil {
		t.Errorf("registered client after restart: %v", err)
	}
	// New tokens are signed with the new key.
	newTok, err := clientToken(t, md, "ci-bot", botSecret, nil)
	if err != nil {
		t.Fatal(err)
	}
	parsed, _ := jwt.ParseSigned(newTok.AccessToken, []jose.SignatureAlgorithm{jose.ES256})
	if parsed == nil || parsed.Headers[0].KeyID == before.Keys[0].KeyID {
		t.Fatal("tokens after rotation are not signed with the new key")
	}
	verify(t, md, newTok.AccessToken)

	out, errOut, err = runBin(t, dir, env, "", "gc", "--config", cfg)
	if err != nil || !strings.HasPrefix(out, "deleted ") {
		t.Fatalf("gc: %v\n%s%s", err, out, errOut)
	}
	out, errOut, err = runBin(t, dir, env, "", "migrate", "up", "--config", cfg)
	if err != nil || !strings.Contains(out, "up to date") {
		t.Fatalf("migrate up: %v\n%s%s", err, out, errOut)
	}
}

func TestDevDefaultsWithoutAConfigFile(t *testing.T) {
	cases := []struct {
		name     string
		env      []string
		wantText string
		password func(log string) string
	}{
		{"prints a generated admin password once", nil, "password: ", func(log string) string {
			m := regexp.MustCompile(`password: (\S+)`).FindStringSubmatch(log)
			if m == nil {
				return ""
			}
			return m[1]
		}},
		{"takes the admin password from the environment", []string{"AUTHSERVER_ADMIN_PASSWORD=correct horse"},
			"the password in AUTHSERVER_ADMIN_PASSWORD", func(string) string { return "correct horse" }},
		{"takes the admin password from AUTHSERVER_ADMIN_PASSWORD_FILE", []string{"AUTHSERVER_ADMIN_PASSWORD_FILE=" + adminPasswordFile(t, "correct horse from a file\n")},
			"the password in AUTHSERVER_ADMIN_PASSWORD", func(string) string { return "correct horse from a file" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			addr := freeAddr(t)
			issuer := "http://" + addr
			env := append([]string{"AUTHSERVER_LISTEN=" + addr, "AUTHSERVER_ISSUER=" + issuer}, tc.env...)
			p := start(t, dir, issuer, env)
			md := discover(t, issuer)
			if md.RegistrationEndpoint == "" {
				t.Fatal("dev defaults must have open registration")
			}
			pw := tc.password(p.stderr.String())
			if code := login(t, issuer, "admin", pw+"-wrong"); code != http.StatusUnauthorized {
				t.Fatalf("a wrong admin password got %d", code)
			}
			if code := login(t, issuer, "admin", pw); code != http.StatusOK {
				t.Fatalf("the announced admin password does not log in: %d", code)
			}
			p.stop(t)
			log := p.stderr.String()
			if !strings.Contains(log, "username: admin") && !strings.Contains(log, `username "admin"`) {
				t.Fatalf("no login instructions:\n%s", log)
			}
			if !strings.Contains(log, tc.wantText) {
				t.Fatalf("want %q in:\n%s", tc.wantText, log)
			}
			if n := strings.Count(log, pw); tc.env == nil && n != 1 {
				t.Fatalf("the generated password appears %d times in the output", n)
			}
			if strings.Contains(log, "correct horse") {
				t.Fatal("the admin password from the environment was printed")
			}
			for _, f := range []string{"authserver.db", "authserver.db.secret"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Fatalf("embedded default storage: %v", err)
				}
			}
		})
	}
}

// adminPasswordFile writes pw to a file (mode 0600, as a mounted secret) and
// returns its path.
func adminPasswordFile(t *testing.T, pw string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "admin-password")
	if err := os.WriteFile(p, []byte(pw), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

// login signs in on the /consents page with the real form and returns the
// status of the page the browser ends on (200 with the consent list on
// success, 401 with the form again on a wrong password).
func login(t *testing.T, issuer, user, pw string) int {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	resp, err := c.Get(issuer + "/consents")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	form := url.Values{"username": {user}, "password": {pw}}
	for _, m := range hiddenInput.FindAllStringSubmatch(string(page), -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	if form.Get("csrf") == "" {
		t.Fatalf("no login form on /consents:\n%s", page)
	}
	resp, err = c.PostForm(issuer+"/consents", form)
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK && strings.Contains(string(page), `id="title">Sign in<`) {
		t.Fatalf("still on the sign-in form after logging in:\n%s", page)
	}
	return resp.StatusCode
}

func TestBadConfigStopsStartUpNamingTheField(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "storage: memory\nresources:\n  - uri: http://127.0.0.1:8080/mcp\ntokens:\n  access_ttl: forever\n")
	_, errOut, err := runBin(t, dir, nil, "", "serve", "--config", cfg)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(errOut, "config: tokens.access_ttl: not a duration") {
		t.Fatalf("%v\n%s", err, errOut)
	}
}

func TestHashPasswordBinary(t *testing.T) {
	out, errOut, err := runBin(t, t.TempDir(), nil, "pw-from-stdin\n", "hash-password")
	if err != nil || !strings.HasPrefix(out, "$argon2id$") {
		t.Fatalf("%v %q %q", err, out, errOut)
	}
}

func TestMigrateCommandsAndNoMigrate(t *testing.T) {
	dir := t.TempDir()
	env := []string{"AUTHSERVER_STORAGE=sqlite:" + filepath.Join(dir, "m.db")}
	steps := []struct {
		name    string
		args    []string
		wantOut string
		wantErr string
	}{
		{"serve --no-migrate refuses a database with pending migrations", []string{"serve", "--no-migrate"}, "", "run `authserver migrate up`"},
		{"status lists the pending version", []string{"migrate", "status"}, "0001 pending", ""},
		{"up applies it", []string{"migrate", "up"}, "applied 0001", ""},
		{"status shows it applied", []string{"migrate", "status"}, "0001 applied", ""},
		{"up again has nothing to do", []string{"migrate", "up"}, "schema is up to date", ""},
	}
	for _, st := range steps {
		out, errOut, err := runBin(t, dir, env, "", st.args...)
		if st.wantErr != "" {
			if err == nil || !strings.Contains(errOut, st.wantErr) {
				t.Fatalf("%s: %v\n%s", st.name, err, errOut)
			}
			continue
		}
		if err != nil || !strings.Contains(out, st.wantOut) {
			t.Fatalf("%s: %v\n%s%s", st.name, err, out, errOut)
		}
	}
	out, _, err := runBin(t, dir, []string{"AUTHSERVER_STORAGE=memory"}, "", "migrate", "up")
	if err != nil || !strings.Contains(out, "nothing to migrate") {
		t.Fatalf("memory: %v %q", err, out)
	}
}

// startMany starts n serve processes at the same time (so migrations and
// first-key creation race) and waits for all of them.
func startMany(t *testing.T, n int, mkConfig func(issuer, listen string) string) []*proc {
	t.Helper()
	type slot struct{ dir, issuer, cfg string }
	slots := make([]slot, n)
	for i := range slots {
		dir := t.TempDir()
		addr := freeAddr(t)
		issuer := "http://" + addr
		slots[i] = slot{dir, issuer, writeConfig(t, dir, mkConfig(issuer, addr))}
	}
	procs := make([]*proc, n)
	var wg sync.WaitGroup
	for i, s := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			procs[i] = startNoFatal(t, s.dir, s.issuer, testEnv, "--config", s.cfg)
		}()
	}
	wg.Wait()
	for i, p := range procs {
		if p == nil {
			t.Fatalf("instance %d did not start", i)
		}
	}
	return procs
}

// startNoFatal is start for use off the test goroutine: it reports with
// t.Error and returns nil on failure.
func startNoFatal(t *testing.T, dir, issuer string, environ []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"serve"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), environ...)
	p := &proc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan error, 1), issuer: issuer}
	cmd.Stdout, cmd.Stderr = p.stderr, p.stderr
	if err := cmd.Start(); err != nil {
		t.Error(err)
		return nil
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("--- output of the authserver at %s ---\n%s", p.issuer, p.stderr)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(issuer + "/.well-known/oauth-authorization-server")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Errorf("authserver exited before serving (%v):\n%s", err, p.stderr)
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Errorf("authserver did not serve metadata in time:\n%s", p.stderr)
	return nil
}

func TestInstancesOnOnePostgresActAsOneServer(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	// All instances share one issuer identity in production behind a load
	// balancer; here each listens on its own port, so each has its own
	// issuer URL, and tokens are compared by signature and key only.
	procs := startMany(t, 3, func(issuer, listen string) string { return stackConfig(issuer, listen, dsn) })
	mds := make([]asMetadata, len(procs))
	for i, p := range procs {
		mds[i] = discover(t, p.issuer)
	}
	// Instances that raced on their first start agree on one key set.
	deadline := time.Now().Add(45 * time.Second)
	for {
		a, b, c := jwks(t, mds[0]), jwks(t, mds[1]), jwks(t, mds[2])
		if sameKIDs(a, b) && sameKIDs(b, c) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("instances serve different key sets: %v / %v / %v", kids(a), kids(b), kids(c))
		}
		time.Sleep(250 * time.Millisecond)
	}

	// A token issued by each instance verifies with every other's JWKS.
	for i := range mds {
		tok, err := clientToken(t, mds[i], "ci-bot", botSecret, nil, "mcp:tools")
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
		for j := range mds {
			verifyWith(t, jwks(t, mds[j]), tok.AccessToken)
			if !introspectActive(t, mds[j], tok.AccessToken) {
				t.Fatalf("a token from instance %d is not active at instance %d", i, j)
			}
		}
	}

	// A key rotated through one database is served by all instances.
	before := kids(jwks(t, mds[0]))
	out, errOut, err := runBin(t, t.TempDir(), append([]string{"AUTHSERVER_STORAGE=" + dsn}, testEnv...), "", "keys", "rotate",
		"--config", writeConfig(t, t.TempDir(), stackConfig(procs[0].issuer, "127.0.0.1:1", dsn)))
	if err != nil {
		t.Fatalf("keys rotate: %v\n%s%s", err, out, errOut)
	}
	for i := range mds {
		deadline := time.Now().Add(45 * time.Second)
		for len(kids(jwks(t, mds[i]))) <= len(before) {
			if time.Now().After(deadline) {
				t.Fatalf("instance %d never served the rotated key", i)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	// Tokens from any instance are now signed with the new key, and verify everywhere.
	for i := range mds {
		tok, err := clientToken(t, mds[i], "ci-bot", botSecret, nil, "mcp:tools")
		if err != nil {
			t.Fatal(err)
		}
		parsed, _ := jwt.ParseSigned(tok.AccessToken, []jose.SignatureAlgorithm{jose.ES256})
		if parsed == nil || slices.Contains(before, parsed.Headers[0].KeyID) {
			t.Fatalf("instance %d still signs with an old key", i)
		}
		for j := range mds {
			verifyWith(t, jwks(t, mds[j]), tok.AccessToken)
		}
	}
}

// introspectActive asks an instance's RFC 7662 endpoint, as ci-bot.
func introspectActive(t *testing.T, md asMetadata, token string) bool {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, md.IntrospectionEndpoint, strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("ci-bot", botSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Active bool `json:"active"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		t.Fatalf("introspection: %s", resp.Status)
	}
	return body.Active
}

func kids(set jose.JSONWebKeySet) []string {
	var out []string
	for _, k := range set.Keys {
		out = append(out, k.KeyID)
	}
	slices.Sort(out)
	return out
}

func sameKIDs(a, b jose.JSONWebKeySet) bool { return slices.Equal(kids(a), kids(b)) }

// verifyWith checks a token's signature against one key set.
func verifyWith(t *testing.T, set jose.JSONWebKeySet, token string) {
	t.Helper()
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256, jose.RS256, jose.EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	keys := set.Key(tok.Headers[0].KeyID)
	if len(keys) != 1 {
		t.Fatalf("kid %q not in key set %v", tok.Headers[0].KeyID, kids(set))
	}
	var claims map[string]any
	if err := tok.Claims(keys[0].Key, &claims); err != nil {
		t.Fatalf("signature: %v", err)
	}
}

// authorizationCode runs the code flow with PKCE through the real login and
// consent pages of the instance at base (whose issuer is issuer) and returns
// the code and its verifier. scaletest/load drives the pages; it checks that
// the redirect to the client carries a code and the state it sent.
func authorizationCode(t *testing.T, issuer, base, redirectURI, user, pw string) load.Code {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	codes, err := load.MintCodes(ctx, load.Config{
		Issuer:         issuer,
		Connect:        strings.TrimPrefix(base, "http://"),
		Connections:    1,
		PublicClientID: "demo-app",
		RedirectURI:    redirectURI,
		Username:       user,
		Password:       pw,
		Scope:          "mcp:tools",
		Resource:       "http://127.0.0.1:8080/mcp",
	}, 1)
	if err != nil || len(codes) != 1 {
		t.Fatalf("authorization through the pages of %s: %d codes, %v", base, len(codes), err)
	}
	return codes[0]
}

// postToken posts a token request to base/token and returns the status and body.
func postToken(base string, form url.Values) (int, map[string]any, error) {
	resp, err := http.PostForm(base+"/token", form)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var body map[string]any
	err = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body, err
}

// race sends form to every base at once and counts the 200 answers.
func race(t *testing.T, bases []string, form url.Values) (ok int, bodies []map[string]any) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for _, b := range bases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			status, body, err := postToken(b, form)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("%s: %v", b, err)
				return
			}
			if status == http.StatusOK {
				ok++
				bodies = append(bodies, body)
			} else {
				t.Logf("%s answered %d: %v", b, status, body)
			}
			if status >= 500 {
				t.Errorf("%s answered %d: %v", b, status, body)
			}
		}()
	}
	close(gate)
	wg.Wait()
	return ok, bodies
}

func TestCodesAndRefreshTokensAreRedeemedOnceAcrossInstances(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	hash, err := password.Hash("alice-password")
	if err != nil {
		t.Fatal(err)
	}
	// One issuer for all instances, as behind a load balancer.
	issuer := "http://" + freeAddr(t)
	const redirectURI = "http://127.0.0.1:7777/callback"
	mk := func(_, listen string) string {
		return stackConfig(issuer, listen, dsn) + fmt.Sprintf(`users:
  - username: alice
    password_hash: %q
tokens:
  refresh_grace: 0
`, hash)
	}
	// demo-app is added to the clients list of stackConfig.
	mkWithApp := func(i, l string) string {
		return strings.Replace(mk(i, l), "exchange:\n", "  - id: demo-app\n    public: true\n    redirect_uris: ["+redirectURI+"]\n    scopes: [mcp:tools]\nexchange:\n", 1)
	}
	procs := startMany(t, 3, mkWithApp)
	var bases []string
	for _, p := range procs {
		bases = append(bases, p.issuer)
	}

	code := authorizationCode(t, issuer, bases[0], redirectURI, "alice", "alice-password")
	ok, bodies := race(t, bases, url.Values{
		"grant_type": {"authorization_code"}, "code": {code.Code}, "redirect_uri": {redirectURI},
		"client_id": {"demo-app"}, "code_verifier": {code.Verifier},
	})
	if ok != 1 {
		t.Fatalf("a code redeemed at %d instances at once succeeded %d times", len(bases), ok)
	}

	// A second grant, redeemed once, for the refresh race (the replayed
	// code above revoked what the first grant issued, as it must).
	code = authorizationCode(t, issuer, bases[1], redirectURI, "alice", "alice-password")
	status, body, err := postToken(bases[2], url.Values{
		"grant_type": {"authorization_code"}, "code": {code.Code}, "redirect_uri": {redirectURI},
		"client_id": {"demo-app"}, "code_verifier": {code.Verifier},
	})
	if err != nil || status != http.StatusOK {
		t.Fatalf("code redemption: %d %v %v", status, body, err)
	}
	bodies = []map[string]any{body}
	refresh, _ := bodies[0]["refresh_token"].(string)
	if refresh == "" {
		t.Fatalf("no refresh token: %v", bodies[0])
	}
	ok, _ = race(t, bases, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {"demo-app"}})
	if ok != 1 {
		t.Fatalf("one refresh token presented at %d instances at once rotated %d times", len(bases), ok)
	}
}
