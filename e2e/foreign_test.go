package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/examples/stack/launch"
)

// foreignDir is the Node project of third-party clients (package.json and
// package-lock.json pin their versions; .ci/run runs npm ci in it).
const foreignDir = "testdata/foreign"

// foreignClients checks that node and the pinned npm packages are installed:
// a failure under CI, a skip elsewhere.
func foreignClients(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		requireCI(t, "node is not installed: the third-party client tests need Node 20 or later")
	}
	raw, err := os.ReadFile(filepath.Join(foreignDir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatalf("%s/package.json: %v", foreignDir, err)
	}
	for name, want := range pkg.Dependencies {
		raw, err := os.ReadFile(filepath.Join(foreignDir, "node_modules", name, "package.json"))
		if err != nil {
			requireCI(t, "npm package %s is not installed: run `npm ci` in e2e/%s", name, foreignDir)
		}
		var got struct{ Version string }
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatalf("node_modules/%s/package.json: %v", name, err)
		}
		if got.Version != want {
			requireCI(t, "npm package %s is %s, package.json pins %s: run `npm ci` in e2e/%s", name, got.Version, want, foreignDir)
		}
	}
	abs, err := filepath.Abs(foreignDir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// foreignResult is what a client script reports (lib.mjs report()).
type foreignResult struct {
	Client        string
	Registrations []string
	WhoAmI        whoamiResult `json:"whoami"`
	Admin         struct {
		CalledBy string `json:"called_by"`
	}
	RefreshedWhoAmI       whoamiResult `json:"refreshedWhoami"`
	StepUp                string
	ChallengeScope        string
	IssRejected           *bool
	WrongAudienceRejected *bool
	SteppedAccessToken    string
	SteppedRefreshToken   string
	RefreshedAccessToken  string
	RefreshedRefreshToken string
	Scopes                []string
	DPoP                  *dpopResult `json:"dpop"`
	// gateway.mjs
	ToolsBefore, ToolsAfter []string
	Echo, AdminText         string
	Requests                []foreignRequest
}

// foreignRequest is one HTTP exchange a client script made.
type foreignRequest struct {
	Method, URL string
	Status      int
}

type whoamiResult struct {
	Sub      string   `json:"sub"`
	ClientID string   `json:"client_id"`
	Scopes   []string `json:"scopes"`
	JTI      string   `json:"jti"`
}

// browserVisit is one authorization the script asked the "browser" for.
type browserVisit struct {
	URL      *url.URL // the authorization request
	Redirect *url.URL // where the AS sent the browser at the end
	Pages    []page   // the login and consent pages walked on the way
}

// runForeign runs one client script against the stack, playing the person at
// the browser: every authorization URL it is handed is opened, the login and
// consent forms are submitted (as alice), and the final redirect is handed
// back to the script.
func runForeign(t *testing.T, dir string, s *launch.Stack, script string) (foreignResult, []browserVisit) {
	t.Helper()
	return runForeignAt(t, dir, foreignTarget{mcpURL: s.MCPURL, user: "alice", password: "alice-demo-password"}, script)
}

// foreignTarget is what a client script is run against, and who signs in
// at the browser.
type foreignTarget struct {
	mcpURL         string   // MCP_URL of the script
	user, password string   // the login form's (ours or the upstream provider's)
	env            []string // more NAME=value for the script
}

// runForeignAt is runForeign against the MCP endpoint of target, signing in
// as its user.
func runForeignAt(t *testing.T, dir string, target foreignTarget, script string) (foreignResult, []browserVisit) {
	t.Helper()
	cbAddr, err := launch.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	redirectURI := "http://" + cbAddr + "/callback"
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "MCP_URL="+target.mcpURL, "REDIRECT_URI="+redirectURI, "NO_COLOR=1"), target.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	browser := newFormLogin(target.user, target.password, redirectURI)
	var (
		visits []browserVisit
		result *foreignResult
		other  []string
	)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var msg struct {
			Type string `json:"type"`
			URL  string `json:"url"`
		}
		if json.Unmarshal(line, &msg) != nil || msg.Type == "" {
			other = append(other, string(line))
			continue
		}
		switch msg.Type {
		case "authorize":
			v := browserVisit{}
			if v.URL, err = url.Parse(msg.URL); err != nil {
				t.Errorf("%s: authorization URL %q: %v", script, msg.URL, err)
			}
			answer := map[string]string{}
			browser.mu.Lock()
			walked := len(browser.pages)
			browser.mu.Unlock()
			target, err := browser.authorize(ctx, msg.URL)
			browser.mu.Lock()
			v.Pages = slices.Clone(browser.pages[walked:])
			browser.mu.Unlock()
			if err != nil {
				answer["error"] = err.Error()
				t.Errorf("%s: authorization %s: %v", script, msg.URL, err)
			} else {
				answer["redirect"] = target
				v.Redirect, _ = url.Parse(target)
			}
			visits = append(visits, v)
			b, _ := json.Marshal(answer)
			if _, err := stdin.Write(append(b, '\n')); err != nil {
				t.Errorf("%s: writing to the script: %v", script, err)
			}
		case "result":
			result = &foreignResult{}
			if err := json.Unmarshal(line, result); err != nil {
				t.Fatalf("%s: result: %v", script, err)
			}
		default:
			other = append(other, string(line))
		}
	}
	io.Copy(io.Discard, stdout)
	stdin.Close()
	werr := cmd.Wait()
	if werr != nil || result == nil || t.Failed() {
		t.Fatalf("%s: exit %v, result %v\n--- stderr ---\n%s\n--- other output ---\n%s", script, werr, result != nil, stderr.String(), strings.Join(other, "\n"))
	}
	if stderr.Len() > 0 {
		t.Logf("%s stderr:\n%s", script, stderr.String())
	}
	return *result, visits
}

// TestForeignClients runs third-party clients, installed from npm at pinned
// versions, against the real authserver and examples/mcpserver processes:
// the TypeScript MCP SDK 1.x and v2 clients with a provider that has no
// state(), and oauth4webapi in its strict defaults. Each registers by DCR,
// is authorized through the login and consent forms without sending state,
// calls a tool, steps up from mcp:tools to mcp:tools mcp:admin with the same
// client_id, and refreshes.
func TestForeignClients(t *testing.T) {
	dir := foreignClients(t)
	s := startStack(t, stackOptions{storage: "memory"})
	for _, script := range []string{"sdk-v1.mjs", "sdk-v2.mjs", "oauth4webapi.mjs"} {
		t.Run(strings.TrimSuffix(script, ".mjs"), func(t *testing.T) {
			start := time.Now()
			res, visits := runForeign(t, dir, s, script)
			t.Logf("%s: %d authorizations, step-up by the %s, %v", script, len(visits), res.StepUp, time.Since(start).Round(time.Millisecond))
			checkForeign(t, s, res, visits)
		})
	}
}

func checkForeign(t *testing.T, s *launch.Stack, res foreignResult, visits []browserVisit) {
	t.Helper()
	if len(res.Registrations) != 1 || res.Registrations[0] == "" {
		t.Fatalf("registrations = %q, want exactly one client_id", res.Registrations)
	}
	clientID := res.Registrations[0]

	// The browser saw two authorizations (first grant, step-up), both for the
	// same client, without state, answered with code and iss and no state.
	if len(visits) != 2 {
		t.Fatalf("%d authorizations, want 2 (first grant and step-up)", len(visits))
	}
	for i, v := range visits {
		q := v.URL.Query()
		if got := q.Get("client_id"); got != clientID {
			t.Errorf("authorization %d: client_id = %q, want the registered %q", i, got, clientID)
		}
		if q.Has("state") {
			t.Errorf("authorization %d: the client sent state %q; this test is about clients that send none", i, q.Get("state"))
		}
		if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
			t.Errorf("authorization %d: no S256 PKCE challenge", i)
		}
		if got := q.Get("resource"); strings.TrimSuffix(got, "/") != s.MCPURL {
			t.Errorf("authorization %d: resource = %q, want %q", i, got, s.MCPURL)
		}
		if v.Redirect == nil {
			t.Fatalf("authorization %d: no redirect", i)
		}
		r := v.Redirect.Query()
		if r.Has("error") {
			t.Errorf("authorization %d: error response %s: %s", i, r.Get("error"), r.Get("error_description"))
		}
		if r.Get("code") == "" {
			t.Errorf("authorization %d: no code in %s", i, v.Redirect)
		}
		if r.Has("state") {
			t.Errorf("authorization %d: the AS returned state %q that was never sent", i, r.Get("state"))
		}
		if got := r.Get("iss"); got != s.Issuer {
			t.Errorf("authorization %d: iss = %q, want %q (RFC 9207)", i, got, s.Issuer)
		}
	}
	firstScope := strings.Fields(visits[0].URL.Query().Get("scope"))
	if !slices.Contains(firstScope, "mcp:tools") || slices.Contains(firstScope, "mcp:admin") {
		t.Errorf("first authorization asked for %q, want mcp:tools without mcp:admin", firstScope)
	}
	stepScope := strings.Fields(visits[1].URL.Query().Get("scope"))
	if !slices.Contains(stepScope, "mcp:tools") || !slices.Contains(stepScope, "mcp:admin") {
		t.Errorf("step-up asked for %q, want the union mcp:tools mcp:admin", stepScope)
	}

	// The tool calls ran as alice, through this client.
	if res.WhoAmI.Sub == "" || res.WhoAmI.ClientID != clientID {
		t.Errorf("whoami = %+v, want a subject and client_id %q", res.WhoAmI, clientID)
	}
	if slices.Contains(res.WhoAmI.Scopes, "mcp:admin") {
		t.Errorf("the first token already had mcp:admin: %q", res.WhoAmI.Scopes)
	}
	if res.Admin.CalledBy != res.WhoAmI.Sub {
		t.Errorf("admin_stats called by %q, want %q", res.Admin.CalledBy, res.WhoAmI.Sub)
	}

	// The step-up token and the refreshed one: same client, both scopes, this
	// resource, this issuer.
	for name, tok := range map[string]string{"step-up": res.SteppedAccessToken, "refreshed": res.RefreshedAccessToken} {
		c := jwtClaims(t, tok)
		if c["client_id"] != clientID {
			t.Errorf("%s token: client_id = %v, want %q", name, c["client_id"], clientID)
		}
		sc, _ := c["scope"].(string)
		if f := strings.Fields(sc); !slices.Contains(f, "mcp:tools") || !slices.Contains(f, "mcp:admin") {
			t.Errorf("%s token: scope = %q, want mcp:tools and mcp:admin", name, sc)
		}
		if c["iss"] != s.Issuer {
			t.Errorf("%s token: iss = %v, want %q", name, c["iss"], s.Issuer)
		}
		if aud := fmt.Sprint(c["aud"]); !strings.Contains(aud, s.MCPURL) {
			t.Errorf("%s token: aud = %v, want %q", name, c["aud"], s.MCPURL)
		}
	}
	if res.SteppedRefreshToken == "" || res.RefreshedRefreshToken == "" {
		t.Fatalf("refresh tokens missing (step-up %t, refreshed %t)", res.SteppedRefreshToken != "", res.RefreshedRefreshToken != "")
	}
	if res.RefreshedAccessToken == res.SteppedAccessToken || res.RefreshedRefreshToken == res.SteppedRefreshToken {
		t.Errorf("the refresh returned the same tokens: no refresh happened or no rotation")
	}
	if got, want := res.RefreshedWhoAmI.JTI, fmt.Sprint(jwtClaims(t, res.RefreshedAccessToken)["jti"]); got != want {
		t.Errorf("the call after the refresh used token %q, want the refreshed %q", got, want)
	}
	if res.RefreshedWhoAmI.ClientID != clientID || res.RefreshedWhoAmI.Sub != res.WhoAmI.Sub {
		t.Errorf("after the refresh whoami = %+v, want client %q and subject %q", res.RefreshedWhoAmI, clientID, res.WhoAmI.Sub)
	}
	if res.Client == "oauth4webapi" && (res.IssRejected == nil || res.WrongAudienceRejected == nil) {
		t.Errorf("oauth4webapi did not report its negative checks")
	}
	if res.IssRejected != nil && !*res.IssRejected {
		t.Errorf("%s accepted an authorization response whose iss had a trailing slash", res.Client)
	}
	if res.WrongAudienceRejected != nil && !*res.WrongAudienceRejected {
		t.Errorf("%s accepted an access token for another audience", res.Client)
	}
}

// dpopResult is what dpop.mjs reports.
type dpopResult struct {
	JKT                    string            `json:"jkt"`
	ASAlgs                 []string          `json:"asAlgs"`
	PRMAlgs                []string          `json:"prmAlgs"`
	TokenType              string            `json:"tokenType"`
	Cnf                    map[string]string `json:"cnf"`
	RefreshedTokenType     string            `json:"refreshedTokenType"`
	RefreshedCnf           map[string]string `json:"refreshedCnf"`
	Rotated                bool              `json:"rotated"`
	NonceRetries           int               `json:"nonceRetries"`
	BearerRefused          bool              `json:"bearerRefused"`
	ReplayRefused          bool              `json:"replayRefused"`
	WrongAthRefused        bool              `json:"wrongAthRefused"`
	WrongHtuRefused        bool              `json:"wrongHtuRefused"`
	OtherKeyRefreshRefused bool              `json:"otherKeyRefreshRefused"`
}

// TestForeignDPoPClient runs oauth4webapi as a DPoP client (RFC 9449)
// against the real authserver, with server nonces on, and examples/mcpserver
// started with --dpop: a DPoP-bound token with cnf.jkt of the client's key,
// the nonce round trip, tool calls under the DPoP scheme, the public
// client's refresh bound to its key; the bound token sent as Bearer, a
// replayed proof, a wrong ath and a wrong htu are refused by the MCP server,
// and a refresh proved with another key by the AS.
func TestForeignDPoPClient(t *testing.T) {
	dir := foreignClients(t)
	s := startStack(t, stackOptions{
		storage:    "memory",
		mcpArgs:    []string{"--dpop"},
		editConfig: func(c string) string { return c + "\ndpop:\n  nonce: true\n" },
	})
	res, visits := runForeign(t, dir, s, "dpop.mjs")
	if len(visits) != 1 || visits[0].URL.Query().Get("dpop_jkt") == "" {
		t.Fatalf("authorizations %d, want one with dpop_jkt", len(visits))
	}
	d := res.DPoP
	if d == nil {
		t.Fatal("no DPoP report")
	}
	if visits[0].URL.Query().Get("dpop_jkt") != d.JKT {
		t.Errorf("dpop_jkt %q, key %q", visits[0].URL.Query().Get("dpop_jkt"), d.JKT)
	}
	if !slices.Contains(d.ASAlgs, "ES256") || slices.Contains(d.ASAlgs, "none") || !slices.Contains(d.PRMAlgs, "ES256") {
		t.Errorf("advertised algs: AS %q, PRM %q", d.ASAlgs, d.PRMAlgs)
	}
	if !strings.EqualFold(d.TokenType, "DPoP") || d.Cnf["jkt"] != d.JKT {
		t.Errorf("token_type %q cnf %v, want DPoP bound to %s", d.TokenType, d.Cnf, d.JKT)
	}
	if !strings.EqualFold(d.RefreshedTokenType, "DPoP") || d.RefreshedCnf["jkt"] != d.JKT || !d.Rotated {
		t.Errorf("refresh: token_type %q cnf %v rotated %v", d.RefreshedTokenType, d.RefreshedCnf, d.Rotated)
	}
	if d.NonceRetries < 1 {
		t.Errorf("the AS never asked for a nonce (%d retries)", d.NonceRetries)
	}
	for name, ok := range map[string]bool{"bound token as Bearer": d.BearerRefused, "replayed proof": d.ReplayRefused,
		"wrong ath": d.WrongAthRefused, "wrong htu": d.WrongHtuRefused, "refresh with another key": d.OtherKeyRefreshRefused} {
		if !ok {
			t.Errorf("%s was not refused", name)
		}
	}
	if res.WhoAmI.Sub == "" || res.RefreshedWhoAmI.Sub != res.WhoAmI.Sub || res.WhoAmI.ClientID != res.Registrations[0] {
		t.Errorf("whoami %+v, after refresh %+v", res.WhoAmI, res.RefreshedWhoAmI)
	}
}
