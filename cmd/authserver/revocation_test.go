package main

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/internal/password"
	"github.com/mcpauth/mcpauth/rsmiddleware"
)

var formRE = regexp.MustCompile(`(?s)<form method="post" action="([^"]*)">(.*?)</form>`)

// codeFlowThroughForms logs user in on the real /authorize pages of the
// served binary, approves, and redeems the code with golang.org/x/oauth2.
func codeFlowThroughForms(t *testing.T, issuer, user, pw string) *oauth2.Token {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	conf := oauth2.Config{ClientID: "demo-app", RedirectURL: "https://app.example/cb", Scopes: []string{"mcp:tools"},
		Endpoint: oauth2.Endpoint{AuthURL: issuer + "/authorize", TokenURL: issuer + "/token", AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	resp, err := c.Get(conf.AuthCodeURL("state-123456", oauth2.S256ChallengeOption(verifier)))
	if err != nil {
		t.Fatal(err)
	}
	for step := 0; step < 6; step++ {
		// Our own pages redirect to themselves (Post/Redirect/Get).
		if loc := resp.Header.Get("Location"); resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(loc, "/") {
			resp.Body.Close()
			if resp, err = c.Get(issuer + loc); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK {
			break
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := formRE.FindAllStringSubmatch(string(page), -1)
		if len(m) == 0 {
			t.Fatalf("no form on the authorization page:\n%s", page)
		}
		form := url.Values{}
		for _, h := range hiddenInput.FindAllStringSubmatch(m[0][2], -1) {
			form.Set(h[1], html.UnescapeString(h[2]))
		}
		if strings.Contains(m[0][2], `name="password"`) {
			form.Set("username", user)
			form.Set("password", pw)
		} else {
			form.Set("action", "approve")
		}
		action := html.UnescapeString(m[0][1])
		if strings.HasPrefix(action, "/") {
			action = issuer + action
		}
		if resp, err = c.PostForm(action, form); err != nil {
			t.Fatal(err)
		}
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusSeeOther || loc.Query().Get("code") == "" {
		t.Fatalf("authorization ended with %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestRemovedUserIsRefusedAfterRestart: a person removed from users: in the
// file (the server restarted with the new file) can no longer refresh what
// they granted, their access token is inactive at introspection, and the
// refresh token of a person still configured keeps working.
func TestRemovedUserIsRefusedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	db := filepath.Join(dir, "auth.db")
	hash, err := password.Hash("alice-password-1")
	if err != nil {
		t.Fatal(err)
	}
	config := func(users ...string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "issuer: %s\nlisten: %s\nstorage: sqlite:%s\nsecret: ${AUTHSERVER_SECRET}\n", issuer, addr, db)
		b.WriteString("resources:\n  - uri: http://127.0.0.1:8080/mcp\n    scopes: [mcp:tools]\n")
		b.WriteString("clients:\n  - id: demo-app\n    public: true\n    redirect_uris: [https://app.example/cb]\n")
		b.WriteString("  - id: rs\n    secret: ${CI_BOT_SECRET}\n    grant_types: [client_credentials]\n")
		b.WriteString("users:\n")
		for _, u := range users {
			fmt.Fprintf(&b, "  - username: %s\n    password_hash: '%s'\n", u, hash)
		}
		return b.String()
	}
	cfg := writeConfig(t, dir, config("alice", "bob"))
	p := start(t, dir, issuer, testEnv, "--config", cfg)
	alice := codeFlowThroughForms(t, issuer, "alice", "alice-password-1")
	bob := codeFlowThroughForms(t, issuer, "bob", "alice-password-1")
	p.stop(t)

	writeConfig(t, dir, config("bob"))
	p = start(t, dir, issuer, testEnv, "--config", cfg)
	defer p.stop(t)
	refresh := func(rt string) (int, string) {
		resp, err := http.PostForm(issuer+"/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {"demo-app"}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if status, body := refresh(alice.RefreshToken); status != http.StatusBadRequest || !strings.Contains(body, `"invalid_grant"`) {
		t.Errorf("refresh of the removed user's grant after restart: %d %s", status, body)
	}
	if status, body := refresh(bob.RefreshToken); status != http.StatusOK {
		t.Errorf("refresh of a configured user's grant: %d %s", status, body)
	}
	req, _ := http.NewRequest(http.MethodPost, issuer+"/introspect", strings.NewReader(url.Values{"token": {alice.AccessToken}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("rs", botSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"active":false`) {
		t.Errorf("introspection of the removed user's token: %d %s", resp.StatusCode, body)
	}
}

// TestDeletedClientsTokensDieAtTheResourceServer: a client registered by
// RFC 7591 and deleted by RFC 7592 DELETE takes its tokens with it; a
// resource server verifying tokens locally with rsmiddleware refuses its
// access token once its cached status list is refreshed.
func TestDeletedClientsTokensDieAtTheResourceServer(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	cfg := writeConfig(t, dir, stackConfig(issuer, addr, "sqlite:"+filepath.Join(dir, "auth.db")))
	p := start(t, dir, issuer, testEnv, "--config", cfg)
	defer p.stop(t)
	md := discover(t, issuer)
	reg := register(t, md)
	tok, err := clientToken(t, md, reg.ClientID, reg.ClientSecret, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := rsmiddleware.NewVerifier(rsmiddleware.Config{Issuer: issuer, Resource: "http://127.0.0.1:8080/mcp", StatusMaxAge: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := v.Verify(ctx, tok.AccessToken); err != nil {
		t.Fatalf("the registered client's token before deletion: %v", err)
	}
	req, _ := http.NewRequest(http.MethodDelete, reg.RegistrationClientURI, nil)
	req.Header.Set("Authorization", "Bearer "+reg.RegistrationAccessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("RFC 7592 DELETE: %d", resp.StatusCode)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := v.Verify(ctx, tok.AccessToken)
		if errors.Is(err, rsmiddleware.ErrInvalidToken) {
			break
		}
		if err != nil {
			t.Fatalf("after deletion: %v, want ErrInvalidToken", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the deleted client's access token is still accepted by the resource server")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
