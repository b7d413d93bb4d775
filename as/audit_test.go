package as

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/as/loginui"
)

// logCapture is a slog destination that keeps every line, for tests that
// read what the server logged.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *logCapture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// events returns the audit events logged so far, decoded.
func (c *logCapture) events(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(c.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if m["msg"] == "audit" {
			out = append(out, m)
		}
	}
	return out
}

// newLoggedHarness is newHarness with the AS and the login pages logging
// (debug level and up) as JSON into the returned capture.
func newLoggedHarness(t *testing.T, mod func(*Config)) (*harness, *logCapture) {
	t.Helper()
	logs := &logCapture{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := newHarness(t, func(c *Config) {
		c.Logger = logger
		if mod != nil {
			mod(c)
		}
		c.Revoker = NewGrantRevoker(c.Store, logger)
		ui, err := loginui.New(loginui.Config{
			Users:     []loginui.User{{Username: "alice", PasswordHash: aliceHash}},
			Consents:  c.Store.(loginui.ConsentStore),
			JTIs:      c.Store.(loginui.JTIStore),
			Approvals: c.Store,
			Secret:    c.Secret,
			Now:       c.Now,
			Logger:    logger,
			Revoker:   c.Revoker,
		})
		if err != nil {
			t.Fatal(err)
		}
		c.UI = ui
	})
	return h, logs
}

// TestAuditEventsAndNoSecretsInLogs runs every audited path (failed and
// good login, consent, code and refresh issuance, code replay, refresh
// reuse, revocation, failed client authentication, client credentials) and
// checks that each left its audit event with client and subject, and that
// no token, code, verifier, secret, password or CSRF value reached the log.
func TestAuditEventsAndNoSecretsInLogs(t *testing.T) {
	h, logs := newLoggedHarness(t, func(c *Config) { c.RefreshGrace = -1 })
	const wrongPW = "wrong-password-Zq8Jx3"
	var secrets []string

	// Browser: a wrong password, then the right one, then consent.
	conf := h.oauthConfig("demo-app", "")
	verifier := oauth2.GenerateVerifier()
	secrets = append(secrets, verifier)
	b := h.browser()
	p := b.get(conf.AuthCodeURL("state-audit-1234", oauth2.S256ChallengeOption(verifier),
		oauth2.SetAuthURLParam("resource", mcpURI), oauth2.SetAuthURLParam("scope", "mcp:tools offline_access")))
	for _, m := range hiddenRE.FindAllStringSubmatch(p.Body, -1) {
		if len(m[2]) >= 16 {
			secrets = append(secrets, m[2]) // CSRF and flow tokens
		}
	}
	p = b.submit(p, "username", "alice", "password", wrongPW)
	if p.StatusCode != 401 {
		t.Fatalf("wrong password: status %d", p.StatusCode)
	}
	p = b.submit(p, "username", "alice", "password", alicePW)
	p = b.submit(p, "action", "approve")
	u := redirected(t, p)
	code := u.Query().Get("code")
	if code == "" {
		t.Fatalf("no code in %s", u)
	}
	secrets = append(secrets, code)
	for _, c := range b.c.Jar.Cookies(&url.URL{Scheme: "http", Host: h.srv.Listener.Addr().String(), Path: "/"}) {
		secrets = append(secrets, c.Value)
	}

	tok, err := conf.Exchange(t.Context(), code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, tok.AccessToken, tok.RefreshToken)

	// Refresh once, then replay the old refresh token (no grace): reuse.
	status, next := refresh(h, tok.RefreshToken)
	if status != 200 {
		t.Fatalf("refresh: %d %v", status, next)
	}
	secrets = append(secrets, next["access_token"].(string), next["refresh_token"].(string))
	if status, _ := refresh(h, tok.RefreshToken); status != 400 {
		t.Fatalf("replayed refresh token: %d", status)
	}

	// Replay the code.
	f := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {appRedirect}, "client_id": {"demo-app"}, "code_verifier": {verifier}}
	if resp, _ := h.post("/token", f, "", ""); resp.StatusCode != 400 {
		t.Fatalf("replayed code: %d", resp.StatusCode)
	}

	// A machine client: bad secret, then good, then revocation.
	const badSecret = "not-the-secret-Hk29vQ"
	if resp, _ := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", badSecret); resp.StatusCode != 401 {
		t.Fatalf("bad secret: %d", resp.StatusCode)
	}
	resp, cc := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	if resp.StatusCode != 200 {
		t.Fatalf("client credentials: %d %v", resp.StatusCode, cc)
	}
	ccToken := cc["access_token"].(string)
	secrets = append(secrets, ccToken, ciSecret, alicePW, wrongPW, badSecret)
	if resp, _ := h.post("/revoke", url.Values{"token": {ccToken}}, "ci-bot", ciSecret); resp.StatusCode != 200 {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}

	events := logs.events(t)
	want := []struct {
		event  string
		fields map[string]any
	}{
		{"login.failed", map[string]any{}},
		{"login.succeeded", map[string]any{"sub": "alice"}},
		{"consent.granted", map[string]any{"sub": "alice", "client_id": "demo-app", "resource": mcpURI}},
		{"token.issued", map[string]any{"sub": "alice", "client_id": "demo-app", "grant_type": "authorization_code", "aud": mcpURI}},
		{"token.issued", map[string]any{"sub": "alice", "client_id": "demo-app", "grant_type": "refresh_token"}},
		{"refresh.reused", map[string]any{"sub": "alice", "client_id": "demo-app"}},
		{"code.replayed", map[string]any{"sub": "alice", "client_id": "demo-app"}},
		{"client.auth_failed", map[string]any{"client_id": "ci-bot"}},
		{"token.issued", map[string]any{"client_id": "ci-bot", "grant_type": "client_credentials"}},
		{"token.revoked", map[string]any{"client_id": "ci-bot", "token_digest": digest(ccToken)}},
	}
	for _, w := range want {
		found := false
		for _, e := range events {
			if e["event"] != w.event {
				continue
			}
			match := true
			for k, v := range w.fields {
				if e[k] != v {
					match = false
				}
			}
			if match {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no audit event %s with %v; events:\n%v", w.event, w.fields, events)
		}
	}

	all := logs.String()
	for _, s := range secrets {
		if s != "" && strings.Contains(all, s) {
			t.Errorf("log contains a secret value %.12q...", s)
		}
		// The JWT's signature part alone identifies the token too.
		if i := strings.LastIndexByte(s, '.'); i > 0 && len(s)-i > 20 && strings.Contains(all, s[i+1:]) {
			t.Errorf("log contains the signature of a token %.12q...", s)
		}
	}
}

// TestAuditEventOnLoginThrottling checks the lockout leaves an event that
// names the account only by digest.
func TestAuditEventOnLoginThrottling(t *testing.T) {
	h, logs := newLoggedHarness(t, nil)
	conf := h.oauthConfig("demo-app", "")
	b := h.browser()
	p := b.get(conf.AuthCodeURL("state-audit-1234", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	for i := 0; i < 12 && p.StatusCode != 429; i++ {
		p = b.submit(p, "username", "mallory-probe", "password", "guess")
		h.clock.Advance(time.Second)
	}
	if p.StatusCode != 429 {
		t.Fatalf("never throttled: %d", p.StatusCode)
	}
	var throttled bool
	for _, e := range logs.events(t) {
		if e["event"] == "login.throttled" && e["user_digest"] != nil {
			throttled = true
		}
	}
	if !throttled {
		t.Error("no login.throttled audit event with a user digest")
	}
	if strings.Contains(logs.String(), "mallory-probe") {
		t.Error("log names a username that never logged in")
	}
}

// TestAuditIssuedIsAudit checks that the token.issued event written by
// auditIssued is the line audit writes for the same values, in text and
// in JSON.
func TestAuditIssuedIsAudit(t *testing.T) {
	for _, handler := range []func(io.Writer) slog.Handler{
		func(w io.Writer) slog.Handler { return slog.NewTextHandler(w, nil) },
		func(w io.Writer) slog.Handler { return slog.NewJSONHandler(w, nil) },
	} {
		var got, want bytes.Buffer
		logger{slog.New(handler(&got))}.auditIssued(context.Background(), "ci-bot", "client_credentials", "ci \"bot\"", mcpURI, "mcp:tools mcp:read")
		logger{slog.New(handler(&want))}.audit(context.Background(), "token.issued", "client_id", "ci-bot", "grant_type", "client_credentials",
			"sub", "ci \"bot\"", "aud", mcpURI, "scope", "mcp:tools mcp:read")
		g, w := timeless(got.String()), timeless(want.String())
		if g != w || !strings.Contains(g, "token.issued") {
			t.Errorf("auditIssued wrote\n%s\naudit wrote\n%s", g, w)
		}
	}
}

// timeless drops the time attribute of a text or JSON log line.
func timeless(line string) string {
	return regexp.MustCompile(`^time=\S+ |"time":"[^"]*",`).ReplaceAllString(line, "")
}
