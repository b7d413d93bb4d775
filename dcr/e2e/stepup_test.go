package e2e_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/as"
)

// stepUpWorld is a world whose resource has mcp:tools and mcp:admin and
// whose registration policy allows both, while clients register (and CIMD
// documents ask) for mcp:tools only, as MCP clients do with the scope of
// their first challenge.
func stepUpWorld(t *testing.T) *world {
	return newWorld(t, func(c *as.Config) {
		c.Resources = []as.Resource{{URI: mcpURI, Name: "Example MCP", Scopes: []string{"mcp:tools", "mcp:admin"}, Default: true}}
		c.RegistrationScopes = []string{"mcp:tools", "mcp:admin"}
		c.RegistrationResources = []string{mcpURI}
	})
}

// page is one answer of the AS to the browser.
type page struct {
	status   int
	body     string
	location *url.URL
}

func (w *world) fetchPage(c *http.Client, req *http.Request) page {
	w.t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	p := page{status: resp.StatusCode, body: string(b)}
	if loc := resp.Header.Get("Location"); loc != "" {
		p.location, _ = url.Parse(loc)
	}
	return p
}

// submit posts the page's only form with extra fields.
func (w *world) submit(c *http.Client, p page, extra ...string) page {
	w.t.Helper()
	m := formRE.FindAllStringSubmatch(p.body, -1)
	if len(m) != 1 {
		w.t.Fatalf("page has %d forms, want 1: %d\n%s", len(m), p.status, p.body)
	}
	v := url.Values{}
	for _, hm := range hiddenRE.FindAllStringSubmatch(m[0][2], -1) {
		v.Set(html.UnescapeString(hm[1]), html.UnescapeString(hm[2]))
	}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	action := html.UnescapeString(m[0][1])
	if strings.HasPrefix(action, "/") {
		action = w.issuer + action
	}
	req, _ := http.NewRequest(http.MethodPost, action, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return w.fetchPage(c, req)
}

// scopeList returns the text of the consent page's list of scopes asked for.
func scopeList(body string) string {
	i := strings.Index(body, `<ul class="scopes">`)
	if i < 0 {
		return ""
	}
	j := strings.Index(body[i:], "</ul>")
	return body[i : i+j]
}

// stepUp runs the MCP step-up for one client: a first authorization for
// mcp:tools (login and consent), then, on the same browser, one for the
// union mcp:tools mcp:admin whose consent page asks only about mcp:admin
// and whose token carries both; a third for the union needs no page.
func stepUp(t *testing.T, w *world, conf *oauth2.Config) {
	t.Helper()
	b := w.browser()
	conf.Scopes = []string{"mcp:tools"}
	verifier := oauth2.GenerateVerifier()
	u := w.authorizeAs(b, conf.AuthCodeURL("", oauth2.S256ChallengeOption(verifier)))
	first, err := conf.Exchange(context.Background(), u.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if first.Extra("scope") != "mcp:tools" {
		t.Fatalf("first token scope %v, want mcp:tools", first.Extra("scope"))
	}

	conf.Scopes = []string{"mcp:tools", "mcp:admin"}
	verifier = oauth2.GenerateVerifier()
	req, _ := http.NewRequest(http.MethodGet, conf.AuthCodeURL("", oauth2.S256ChallengeOption(verifier)), nil)
	p := w.fetchPage(b, req)
	if p.status != http.StatusOK || !strings.Contains(p.body, `value="approve"`) {
		t.Fatalf("step-up: %d, want the consent page for the new scope:\n%s", p.status, p.body)
	}
	if l := scopeList(p.body); !strings.Contains(l, "mcp:admin") || strings.Contains(l, "mcp:tools") {
		t.Errorf("step-up consent asks about %q, want mcp:admin only", l)
	}
	if !strings.Contains(p.body, `id="approved"`) || !strings.Contains(p.body, "<code>mcp:tools</code>") {
		t.Error("step-up consent does not show mcp:tools as already allowed")
	}
	p = w.submit(b, p, "action", "approve")
	if p.status != http.StatusSeeOther || p.location == nil || p.location.Query().Get("code") == "" {
		t.Fatalf("after approving: %d %v", p.status, p.location)
	}
	if p.location.Query().Has("state") {
		t.Errorf("redirect %s carries a state none was sent", p.location)
	}
	union, err := conf.Exchange(context.Background(), p.location.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if union.Extra("scope") != "mcp:tools mcp:admin" {
		t.Fatalf("step-up token scope %v, want mcp:tools mcp:admin", union.Extra("scope"))
	}
	refreshed, err := conf.TokenSource(context.Background(), &oauth2.Token{RefreshToken: union.RefreshToken}).Token()
	if err != nil || refreshed.Extra("scope") != "mcp:tools mcp:admin" {
		t.Fatalf("refresh of the step-up token: %v, scope %v", err, refreshed.Extra("scope"))
	}

	// Both scopes are remembered now: no consent page, only the one click
	// a public client on loopback always takes (RFC 8252 §8.6).
	req, _ = http.NewRequest(http.MethodGet, conf.AuthCodeURL("", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), nil)
	if p := w.fetchPage(b, req); p.status != http.StatusOK || !strings.Contains(p.body, "Continue to") || strings.Contains(p.body, `id="approved"`) {
		t.Errorf("third authorization for the union: %d, want the one-click page and no consent page", p.status)
	}
}

func TestRegisteredClientStepsUpToTheUnionOfScopes(t *testing.T) {
	w := stepUpWorld(t)
	ci := w.register(`{"client_name":"MCP client","redirect_uris":["http://127.0.0.1:33418/callback"],"token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token"],"scope":"mcp:tools"}`)
	if ci.Scope != "mcp:tools" {
		t.Fatalf("registered scope %q, want mcp:tools", ci.Scope)
	}
	stepUp(t, w, w.oauth(ci.ClientID, "", "http://127.0.0.1:33418/callback"))
}

func TestCIMDClientStepsUpToTheUnionOfScopes(t *testing.T) {
	w := stepUpWorld(t)
	id := w.docs.URL + "/client.json"
	w.publish("/client.json", map[string]any{
		"client_id": id, "client_name": "CIMD client", "redirect_uris": []string{"http://127.0.0.1:33418/callback"},
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"}, "scope": "mcp:tools",
	})
	stepUp(t, w, w.oauth(id, "", "http://127.0.0.1:33418/callback"))
}
