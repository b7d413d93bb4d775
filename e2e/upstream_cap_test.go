package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/examples/stack/launch"
)

// tokenPost posts form to the AS's token endpoint, with HTTP Basic client
// authentication when secret is set, and returns the status and the JSON
// answer.
func tokenPost(t *testing.T, issuer string, form url.Values, clientID, secret string) (int, map[string]any) {
	t.Helper()
	if secret == "" {
		form.Set("client_id", clientID)
	}
	req, err := http.NewRequest(http.MethodPost, issuer+"/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if secret != "" {
		req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(secret))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("token endpoint answer: %v", err)
	}
	return resp.StatusCode, body
}

// TestUpstreamClaimsCapTokenExchange: the claim mapping caps what a person
// who signed in through the provider may get by RFC 8693 token exchange, as
// it caps their consent. The example MCP server's client exchanges the
// person's token for the downstream API: for bob, whose groups map to
// mcp:tools only, a request for reports:read is invalid_scope and one naming
// no scope gets nothing either; for alice, whose email maps to reports:read,
// the same exchange is granted.
func TestUpstreamClaimsCapTokenExchange(t *testing.T) {
	logs := &lockedBuffer{}
	s, _ := upstreamStackLogged(t, "", "      email:\n        alice@acme.example: [reports:read]\n", logs)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exchange := func(subject string, kv ...string) (int, map[string]any) {
		t.Helper()
		form := url.Values{
			"grant_type":         {grantTokenExchange},
			"subject_token":      {subject},
			"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
			"resource":           {s.DownstreamURL},
		}
		for i := 0; i+1 < len(kv); i += 2 {
			form.Set(kv[i], kv[i+1])
		}
		return tokenPost(t, s.Issuer, form, exchangeClientID, s.Env["MCPSERVER_CLIENT_SECRET"])
	}

	_, bobTokens, _ := upstreamClient(t, ctx, s, "bob")
	bob := bobTokens.all()[0].AccessToken
	status, body := exchange(bob, "scope", "reports:read")
	if status != http.StatusBadRequest || body["error"] != "invalid_scope" || body["access_token"] != nil {
		t.Fatalf("bob asking reports:read by exchange: %d %v; want 400 invalid_scope", status, body)
	}
	if d, _ := body["error_description"].(string); !strings.Contains(d, "reports:read") || !strings.Contains(d, "organisation") {
		t.Errorf("error_description %q does not say which scope the organisation does not permit", d)
	}
	status, body = exchange(bob)
	if status != http.StatusBadRequest || body["error"] != "invalid_scope" || body["access_token"] != nil {
		t.Fatalf("bob's exchange naming no scope: %d %v; want 400 invalid_scope", status, body)
	}
	// Each refusal is audited with the scopes the claims do not permit.
	if got := auditScopes(t, logs, "token.exchange_not_permitted", 2); len(got) != 2 || got[0] != "reports:read" || got[1] == "" {
		t.Errorf("token.exchange_not_permitted scopes %q; want reports:read, then the defaults refused", got)
	}

	_, aliceTokens, _ := upstreamClient(t, ctx, s, "alice")
	alice := aliceTokens.all()[0].AccessToken
	status, body = exchange(alice, "scope", "reports:read")
	tok, _ := body["access_token"].(string)
	if status != http.StatusOK || tok == "" {
		t.Fatalf("alice asking reports:read by exchange: %d %v; want a token", status, body)
	}
	c := jwtClaims(t, tok)
	if c["sub"] != "corp:u-alice" || c["aud"] != s.DownstreamURL || !slices.Equal(scopesOf(t, tok), []string{"reports:read"}) {
		t.Fatalf("alice's exchanged token: %v", c)
	}
}

// upstreamGrant registers a public client (RFC 7591), signs user in through
// the provider with golang.org/x/oauth2 (PKCE S256) asking scope for the MCP
// server, and returns the client's id and the tokens.
func upstreamGrant(t *testing.T, ctx context.Context, s *launch.Stack, user string, scope ...string) (string, *oauth2.Token) {
	t.Helper()
	redirect := loopbackRedirect(t)
	reg, err := json.Marshal(map[string]any{
		"client_name": "mcpauth e2e capped refresh", "redirect_uris": []string{redirect},
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
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
	if err := json.NewDecoder(resp.Body).Decode(&client); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("registration: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	cfg := &oauth2.Config{ClientID: client.ClientID, RedirectURL: redirect, Scopes: scope,
		Endpoint: oauth2.Endpoint{AuthURL: s.Issuer + "/authorize", TokenURL: s.Issuer + "/token", AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	fl := newFormLogin(user, user+"-pw", redirect)
	target, err := fl.authorize(ctx, cfg.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", s.MCPURL)))
	if err != nil {
		t.Fatalf("authorization: %v\npages: %+v", err, fl.pages)
	}
	u, err := url.Parse(target)
	if err != nil || u.Query().Get("code") == "" {
		t.Fatalf("authorization response %q", target)
	}
	tok, err := cfg.Exchange(ctx, u.Query().Get("code"), oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", s.MCPURL))
	if err != nil {
		t.Fatalf("code redemption: %v", err)
	}
	return client.ClientID, tok
}

// TestUpstreamClaimsCapRefresh: a refresh of a person's grant is capped by
// the claims their record holds now. alice is granted mcp:tools and
// mcp:admin; the provider then takes her out of mcp-admins and she signs in
// again, which records her new groups. Her earlier grant's refresh naming
// mcp:admin is invalid_scope; one naming no scope leaves mcp:admin out; the
// refresh of a grant of mcp:admin alone is invalid_grant.
func TestUpstreamClaimsCapRefresh(t *testing.T) {
	logs := &lockedBuffer{}
	s, op := upstreamStackLogged(t, "", "", logs)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clientID, tok := upstreamGrant(t, ctx, s, "alice", "mcp:tools", "mcp:admin")
	if got := scopesOf(t, tok.AccessToken); !slices.Contains(got, "mcp:admin") || !slices.Contains(got, "mcp:tools") || tok.RefreshToken == "" {
		t.Fatalf("alice's grant: scopes %v, refresh token %t", got, tok.RefreshToken != "")
	}

	adminClient, adminTok := upstreamGrant(t, ctx, s, "alice", "mcp:admin")

	op.SetGroups("u-alice", []string{"mcp-users"})
	// A new sign-in records the groups the provider gives now.
	upstreamGrant(t, ctx, s, "alice", "mcp:tools")

	refresh := func(kv ...string) (int, map[string]any) {
		t.Helper()
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}
		for i := 0; i+1 < len(kv); i += 2 {
			form.Set(kv[i], kv[i+1])
		}
		return tokenPost(t, s.Issuer, form, clientID, "")
	}
	status, body := refresh("scope", "mcp:admin")
	if status != http.StatusBadRequest || body["error"] != "invalid_scope" || body["access_token"] != nil {
		t.Fatalf("refresh naming mcp:admin after leaving mcp-admins: %d %v; want 400 invalid_scope", status, body)
	}
	status, body = refresh("scope", "mcp:tools mcp:admin")
	if status != http.StatusBadRequest || body["error"] != "invalid_scope" || body["access_token"] != nil {
		t.Fatalf("refresh naming mcp:tools and mcp:admin after leaving mcp-admins: %d %v; want 400 invalid_scope", status, body)
	}
	status, body = refresh()
	at, _ := body["access_token"].(string)
	if status != http.StatusOK || at == "" {
		t.Fatalf("refresh naming no scope: %d %v", status, body)
	}
	if got := scopesOf(t, at); !slices.Equal(got, []string{"mcp:tools"}) {
		t.Fatalf("refreshed token scopes %v; want mcp:tools alone", got)
	}
	if got, _ := body["scope"].(string); strings.Contains(got, "mcp:admin") {
		t.Fatalf("refresh answer scope %q", got)
	}
	// A grant of mcp:admin alone keeps nothing: sign in again.
	status, body = tokenPost(t, s.Issuer, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {adminTok.RefreshToken}}, adminClient, "")
	if status != http.StatusBadRequest || body["error"] != "invalid_grant" || body["access_token"] != nil {
		t.Fatalf("refresh of a grant of mcp:admin alone after leaving mcp-admins: %d %v; want 400 invalid_grant", status, body)
	}
	// Each refusal is audited with the scope the claims no longer permit,
	// not the others the refresh names or the grant holds.
	if got := auditScopes(t, logs, "grant.scope_not_permitted", 3); !slices.Equal(got, []string{"mcp:admin", "mcp:admin", "mcp:admin"}) {
		t.Errorf("grant.scope_not_permitted scopes %q; want mcp:admin for each of the three refusals", got)
	}
}

// auditScopes returns the scope attribute of each audit event named event
// in the authorization server's text log, in order, once n of them have
// reached logs (the process's output arrives through a pipe) or a bound of
// 30 s on a server that never writes them has passed.
func auditScopes(t *testing.T, logs *lockedBuffer, event string, n int) []string {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if got := auditScopesIn(logs.String(), event); len(got) >= n || time.Now().After(end) {
			return got
		}
	}
}

func auditScopesIn(logs, event string) []string {
	attr := regexp.MustCompile(` scope=("(?:[^"\\]|\\.)*"|\S*)`)
	var out []string
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, " msg=audit ") || !strings.Contains(line, " event="+event+" ") {
			continue
		}
		v := ""
		if m := attr.FindStringSubmatch(line); m != nil {
			v = m[1]
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
		}
		out = append(out, v)
	}
	return out
}
