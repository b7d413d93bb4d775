package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net/http"
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
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/examples/stack/launch"
	"github.com/mcpauth/mcpauth/internal/testop"
	"github.com/mcpauth/mcpauth/storage/sqlite"
)

// The organisation's people at its OpenID provider.
var orgPeople = []testop.Person{
	{ID: "u-alice", Username: "alice", Password: "alice-pw", Email: "alice@acme.example", EmailVerified: true, Name: "Alice", Groups: []string{"mcp-users", "mcp-admins"}},
	{ID: "u-bob", Username: "bob", Password: "bob-pw", Email: "bob@acme.example", EmailVerified: true, Name: "Bob", Groups: []string{"mcp-users"}},
}

// upstreamStack runs the stack with no local users: people sign in through
// a real OpenID provider (zitadel/oidc's example OP, in this process), whose
// groups map to the MCP server's scopes.
func upstreamStack(t *testing.T, storage, extra string) (*launch.Stack, *testop.OP) {
	t.Helper()
	return upstreamStackLogged(t, storage, extra, nil)
}

// upstreamStackLogged is upstreamStack whose processes' output goes to
// logs (when not nil).
func upstreamStackLogged(t *testing.T, storage, extra string, logs *lockedBuffer) (*launch.Stack, *testop.OP) {
	t.Helper()
	op := testop.Start(t, orgPeople, testop.Client{ID: "mcpauth", Secret: "op-secret", ClaimsInIDToken: true})
	s := startStack(t, stackOptions{storage: storage, logs: logs, editConfig: func(c string) string {
		i := strings.Index(c, "\nusers:")
		if i < 0 {
			t.Fatal("deploy/authserver.yaml has no users: section to replace")
		}
		return c[:i+1] + `
upstreams:
  - id: corp
    name: Acme SSO
    issuer: ` + op.Issuer + `
    client_id: mcpauth
    client_secret: op-secret
    scopes: [openid, email, profile, groups, offline_access]
    allowed_domains: [acme.example]
    allowed_groups: [mcp-users]
    claim_scopes:
      groups:
        mcp-users: [mcp:tools]
        mcp-admins: [mcp:admin]
` + extra
	}})
	op.SetRedirectURIs("mcpauth", s.Issuer+"/upstream/corp/callback")
	return s, op
}

// upstreamClient connects the MCP Go SDK client (DCR, PKCE) as user, whose
// first authorization asks for mcp:tools only; the tool call of admin_stats
// then steps up to mcp:admin.
func upstreamClient(t *testing.T, ctx context.Context, s *launch.Stack, user string) (*mcp.ClientSession, *tokenSources, *formLogin) {
	t.Helper()
	redirectURI := loopbackRedirect(t)
	fl := newFormLogin(user, user+"-pw", redirectURI)
	tokens := &tokenSources{}
	var mu sync.Mutex
	calls := 0
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              redirectURI,
		AuthorizationCodeFetcher: fl.fetch,
		ScopeFilter: func(discovered []string) []string {
			mu.Lock()
			defer mu.Unlock()
			if calls++; calls == 1 {
				return slices.DeleteFunc(slices.Clone(discovered), func(s string) bool { return s == "mcp:admin" })
			}
			return discovered
		},
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "mcpauth e2e upstream client", RedirectURIs: []string{redirectURI}, TokenEndpointAuthMethod: "none",
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		}},
		NewTokenSource: tokens.newTokenSource,
	})
	if err != nil {
		t.Fatal(err)
	}
	session, err := mcp.NewClient(&mcp.Implementation{Name: "mcpauth-e2e-upstream", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: s.MCPURL, OAuthHandler: handler}, nil)
	if err != nil {
		t.Fatalf("connect as %s: %v\npages: %+v", user, err, fl.pages)
	}
	t.Cleanup(func() { session.Close() })
	return session, tokens, fl
}

func scopesOf(t *testing.T, accessToken string) []string {
	s, _ := jwtClaims(t, accessToken)["scope"].(string)
	return strings.Fields(s)
}

// TestUpstreamSignInThroughTheMCPClient: client -> our AS -> the provider's
// login -> our consent -> token -> tool call, with no local user; the
// token's scopes follow the person's groups and a step-up beyond them is
// refused with access_denied on a page that says so.
func TestUpstreamSignInThroughTheMCPClient(t *testing.T) {
	s, _ := upstreamStack(t, "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("an admin gets mcp:tools, then steps up to mcp:admin", func(t *testing.T) {
		session, tokens, fl := upstreamClient(t, ctx, s, "alice")
		me := callTool[whoami](t, ctx, session, "whoami")
		if me.Subject != "corp:u-alice" || me.Issuer != s.Issuer || !slices.Contains(me.Scopes, "mcp:tools") || slices.Contains(me.Scopes, "mcp:admin") {
			t.Fatalf("whoami %+v", me)
		}
		stats := callTool[map[string]any](t, ctx, session, "admin_stats")
		if stats["called_by"] != "corp:u-alice" {
			t.Fatalf("admin_stats %v", stats)
		}
		last := tokens.all()[len(tokens.all())-1]
		if got := scopesOf(t, last.AccessToken); !slices.Contains(got, "mcp:admin") {
			t.Fatalf("stepped-up token scopes %v", got)
		}
		var provider, consent bool
		for _, p := range fl.pages {
			provider = provider || (p.Kind == "login" && !strings.HasPrefix(p.URL, s.Issuer))
			consent = consent || (p.Kind == "consent" && strings.HasPrefix(p.URL, s.Issuer) && strings.Contains(p.Text, "corp:u-alice"))
			if p.Kind == "login" && strings.HasPrefix(p.URL, s.Issuer) {
				t.Errorf("our password form was shown with no local users: %s", p.URL)
			}
		}
		if !provider || !consent {
			t.Fatalf("pages: provider login %v, our consent %v: %+v", provider, consent, fl.pages)
		}
	})

	t.Run("a user's token stops at mcp:tools and the step-up is refused", func(t *testing.T) {
		session, tokens, fl := upstreamClient(t, ctx, s, "bob")
		me := callTool[whoami](t, ctx, session, "whoami")
		if me.Subject != "corp:u-bob" || !slices.Equal(me.Scopes, []string{"mcp:tools"}) {
			t.Fatalf("whoami %+v", me)
		}
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "admin_stats", Arguments: map[string]any{}})
		if err == nil && !res.IsError {
			t.Fatal("admin_stats succeeded for a person outside mcp-admins")
		}
		if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "Access not permitted") {
			t.Fatalf("step-up beyond the mapping: %v\nauthorization URLs: %q", err, fl.urls)
		}
		for _, tok := range tokens.all() {
			if slices.Contains(scopesOf(t, tok.AccessToken), "mcp:admin") {
				t.Fatal("a token with mcp:admin was issued to bob")
			}
		}
	})
}

// TestUpstreamRecheckAtRefresh: with recheck_after, a refresh of our tokens
// for a person last confirmed longer ago refreshes their session at the
// provider; when the provider no longer puts them in an allowed group, the
// refresh is refused with invalid_grant.
func TestUpstreamRecheckAtRefresh(t *testing.T) {
	db := filepath.Join(t.TempDir(), "as.db")
	s, op := upstreamStack(t, "sqlite:"+db, "    recheck_after: 1h\n")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	session, tokens, _ := upstreamClient(t, ctx, s, "bob")
	if me := callTool[whoami](t, ctx, session, "whoami"); me.Subject != "corp:u-bob" {
		t.Fatalf("whoami %+v", me)
	}
	const sub = "corp:u-bob"
	// Time passing at the AS is the record's confirmation growing old:
	// move it back through the store the server uses.
	age := func() time.Time {
		t.Helper()
		st, err := sqlite.Open(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		rec, err := st.GetUser(ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.UpstreamRefresh) == 0 {
			t.Fatal("no sealed upstream refresh token in the record")
		}
		if err := st.UpdateUpstreamSession(ctx, sub, rec.UpstreamRefresh, time.Now().Add(-2*time.Hour), rec.Groups, rec.Claims); err != nil {
			t.Fatal(err)
		}
		return rec.CheckedAt
	}
	checkedAt := func() time.Time {
		t.Helper()
		st, err := sqlite.Open(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		rec, err := st.GetUser(ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		return rec.CheckedAt
	}
	if _, _, err := tokens.refresh(); err != nil {
		t.Fatalf("refresh within recheck_after: %v", err)
	}
	age()
	if _, fresh, err := tokens.refresh(); err != nil || fresh.AccessToken == "" {
		t.Fatalf("refresh with a recheck the provider confirms: %v", err)
	}
	if c := checkedAt(); time.Since(c) > time.Minute {
		t.Fatalf("the recheck did not confirm the record (checked at %s)", c)
	}
	for _, tok := range tokens.all() {
		if strings.Contains(tok.AccessToken+tok.RefreshToken, "op-secret") {
			t.Fatal("an upstream credential reached the client")
		}
	}
	op.SetGroups("u-bob", []string{"sales"})
	age()
	_, _, err := tokens.refresh()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("refresh after the person left mcp-users: %v", err)
	}
	if c := checkedAt(); time.Since(c) < time.Hour {
		t.Fatal("a refused recheck counted as a confirmation")
	}
}

// TestUpstreamPersonDisabledByTheCLI: a person who signed in through the
// provider, disabled with `authserver users disable` on the server's
// storage, can no longer refresh.
func TestUpstreamPersonDisabledByTheCLI(t *testing.T) {
	db := filepath.Join(t.TempDir(), "as.db")
	s, _ := upstreamStack(t, "sqlite:"+db, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	session, tokens, _ := upstreamClient(t, ctx, s, "alice")
	if me := callTool[whoami](t, ctx, session, "whoami"); me.Subject != "corp:u-alice" {
		t.Fatalf("whoami %+v", me)
	}
	if _, _, err := tokens.refresh(); err != nil {
		t.Fatalf("refresh before disable: %v", err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(binaries(t), "authserver"), "users", "disable", "corp:u-alice", "--config", s.ConfigPath)
	cmd.Env = os.Environ()
	for k, v := range s.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "disabled corp:u-alice") {
		t.Fatalf("users disable: %v\n%s", err, out)
	}
	_, _, err = tokens.refresh()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("refresh after disable: %v", err)
	}
}

// TestUpstreamSignInStartsOnlyForAValidClientRequest: with one provider
// and no local users, our /authorize validates the OAuth client's request
// before anything goes to the provider: an unknown client or an
// unregistered redirect URI is a page of ours, and so is a bad resource or
// a missing or plain PKCE challenge of a registered client, with a link
// back to it carrying the error (RFC 9700 §4.11.2); only a valid request is
// sent on to the provider, which has received nothing before.
func TestUpstreamSignInStartsOnlyForAValidClientRequest(t *testing.T) {
	s, op := upstreamStack(t, "", "")
	redirect := loopbackRedirect(t)
	reg, err := json.Marshal(map[string]any{
		"client_name": "mcpauth e2e upstream validation", "redirect_uris": []string{redirect},
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code"}, "response_types": []string{"code"},
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(s.Issuer+"/register", "application/json", bytes.NewReader(reg))
	if err != nil {
		t.Fatal(err)
	}
	var client struct {
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&client); err != nil || resp.StatusCode != http.StatusCreated || client.ClientID == "" {
		t.Fatalf("registration: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	good := url.Values{
		"response_type": {"code"}, "client_id": {client.ClientID}, "redirect_uri": {redirect},
		"scope": {"mcp:tools"}, "resource": {s.MCPURL}, "state": {"client-state"},
		"code_challenge": {"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"}, "code_challenge_method": {"S256"},
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	authorize := func(edit func(q url.Values)) (int, *url.URL, string) {
		t.Helper()
		q := url.Values{}
		for k, v := range good {
			q[k] = slices.Clone(v)
		}
		edit(q)
		resp, err := noFollow.Get(s.Issuer + "/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		loc, _ := url.Parse(resp.Header.Get("Location"))
		return resp.StatusCode, loc, string(body)
	}
	for _, tc := range []struct {
		name  string
		edit  func(q url.Values)
		error string // the error of the link back to the client; "" for none
	}{
		{"an unknown client", func(q url.Values) { q.Set("client_id", "no-such-client") }, ""},
		{"an unregistered redirect URI", func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1:1/elsewhere") }, ""},
		{"a resource this server does not serve", func(q url.Values) { q.Set("resource", "https://other.example/mcp") }, "invalid_target"},
		{"no PKCE challenge", func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") }, "invalid_request"},
		{"plain PKCE", func(q url.Values) { q.Set("code_challenge_method", "plain") }, "invalid_request"},
	} {
		status, loc, body := authorize(tc.edit)
		back := strings.Contains(body, html.EscapeString(redirect+"?"))
		switch {
		case status != http.StatusBadRequest || loc.String() != "":
			t.Errorf("%s: status %d Location %q, want a page of ours", tc.name, status, loc)
		case tc.error == "" && back:
			t.Errorf("%s: the page links back to the client:\n%s", tc.name, body)
		case tc.error != "" && (!back || !strings.Contains(body, "error="+tc.error) || !strings.Contains(body, "state=client-state")):
			t.Errorf("%s: the page has no link back to the client with error %s:\n%s", tc.name, tc.error, body)
		}
	}
	if n := len(op.AuthRequests()); n != 0 {
		t.Fatalf("the provider received %d authorization requests for invalid client requests", n)
	}
	status, loc, _ := authorize(func(url.Values) {})
	if status != http.StatusSeeOther || !strings.HasPrefix(loc.String(), op.Issuer) || loc.Query().Has("resource") || loc.Query().Get("state") == "client-state" {
		t.Fatalf("a valid request: status %d Location %q, want 303 to the provider with a request of our own", status, loc)
	}
	// The provider is given our callback; the client's redirect URI, its
	// client_id and its PKCE challenge appear nowhere in clear (the return
	// path is sealed inside our state).
	if got := loc.Query().Get("redirect_uri"); got != s.Issuer+"/upstream/corp/callback" {
		t.Errorf("redirect_uri sent to the provider %q, want our callback", got)
	}
	for name, vs := range loc.Query() {
		for _, v := range vs {
			for _, own := range []string{redirect, url.QueryEscape(redirect), client.ClientID, good.Get("code_challenge")} {
				if strings.Contains(v, own) {
					t.Errorf("%s=%q sent to the provider holds the client's %q", name, v, own)
				}
			}
		}
	}
}
