package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
)

// sameHost reports whether URLs a and b name the same host and port.
func sameHost(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host == ub.Host
}

// TestForeignClientsThroughUpstreamSignIn runs the TypeScript MCP SDK 1.x
// and v2 clients against the stack with no local users: the person signs
// in at the organisation's OpenID provider (zitadel/oidc's example OP), is
// sent back to our callback, answers our consent page, and the client gets
// our token. Alice's groups allow mcp:tools and mcp:admin, so the step-up
// to mcp:admin succeeds for the same client_id; the refresh keeps both.
func TestForeignClientsThroughUpstreamSignIn(t *testing.T) {
	dir := foreignClients(t)
	s, op := upstreamStack(t, "", "")
	for _, script := range []string{"sdk-v1.mjs", "sdk-v2.mjs"} {
		t.Run(strings.TrimSuffix(script, ".mjs"), func(t *testing.T) {
			res, visits := runForeignAt(t, dir, foreignTarget{mcpURL: s.MCPURL, user: "alice", password: "alice-pw"}, script)
			checkForeign(t, s, res, visits)
			if res.WhoAmI.Sub != "corp:u-alice" || res.RefreshedWhoAmI.Sub != "corp:u-alice" {
				t.Errorf("whoami sub %q, after the refresh %q, want corp:u-alice (the provider's subject under its upstream id)", res.WhoAmI.Sub, res.RefreshedWhoAmI.Sub)
			}
			// The person signed in at the provider, never at a password
			// form of ours, and answered our consent page as corp:u-alice.
			var provider, consent bool
			for _, v := range visits {
				for _, p := range v.Pages {
					provider = provider || p.Kind == "login" && sameHost(p.URL, op.Issuer)
					consent = consent || p.Kind == "consent" && sameHost(p.URL, s.Issuer) && strings.Contains(p.Text, "corp:u-alice")
					if p.Kind == "login" && sameHost(p.URL, s.Issuer) {
						t.Errorf("our password form was shown with no local users: %s", p.URL)
					}
				}
			}
			if !provider || !consent {
				t.Errorf("provider login %v, our consent %v: %+v", provider, consent, visits)
			}
		})
	}
}

// TestUpstreamCallbackHostileParams answers our provider callback as an
// attacker would, in a browser that started a real sign-in: parameters too
// long, repeated or contradictory get our 400 page before the state is
// used; the provider's error with HTML in it is shown escaped; the state,
// once used, is refused.
func TestUpstreamCallbackHostileParams(t *testing.T) {
	s, op := upstreamStack(t, "", "")
	redirect := loopbackRedirect(t)
	body, _ := json.Marshal(map[string]any{"client_name": "hostile callback", "redirect_uris": []string{redirect},
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code"}, "response_types": []string{"code"}})
	resp, err := http.Post(s.Issuer+"/register", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var reg struct {
		ClientID string `json:"client_id"`
	}
	json.NewDecoder(resp.Body).Decode(&reg)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || reg.ClientID == "" {
		t.Fatalf("registration: %d %+v", resp.StatusCode, reg)
	}

	// The browser: our AS sends it to the provider with a state of ours.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if sameHost(req.URL.String(), op.Issuer) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	q := url.Values{"response_type": {"code"}, "client_id": {reg.ClientID}, "redirect_uri": {redirect}, "scope": {"mcp:tools"},
		"resource": {s.MCPURL}, "code_challenge": {"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"}, "code_challenge_method": {"S256"}}
	resp, err = browser.Get(s.Issuer + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	toOP, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode/100 != 3 || !sameHost(toOP.String(), op.Issuer) {
		t.Fatalf("authorize: %d to %q, want a redirect to the provider", resp.StatusCode, resp.Header.Get("Location"))
	}
	state := toOP.Query().Get("state")
	if state == "" {
		t.Fatalf("no state in %s", toOP)
	}

	callback := func(params string) (int, string) {
		t.Helper()
		resp, err := browser.Get(s.Issuer + "/upstream/corp/callback?" + params)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("callback answered %q", ct)
		}
		return resp.StatusCode, string(b)
	}
	st := url.QueryEscape(state)
	for _, tc := range []struct{ name, params string }{
		{"a state of 5000 characters", "state=" + strings.Repeat("A", 5000) + "&code=c"},
		{"a code of 5000 characters", "state=" + st + "&code=" + strings.Repeat("c", 5000)},
		{"the state twice", "state=" + st + "&state=" + st + "&code=c"},
		{"the code twice", "state=" + st + "&code=a&code=b"},
		{"both a code and an error", "state=" + st + "&code=c&error=access_denied"},
		{"an error with a quote", "state=" + st + "&error=" + url.QueryEscape(`x"onmouseover="alert(1)`)},
		{"an error of 65 characters", "state=" + st + "&error=" + strings.Repeat("e", 65)},
		{"a state of another sign-in", "state=" + url.QueryEscape(state[:len(state)-2]+"xx") + "&code=c"},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			if status, page := callback(tc.params); status != http.StatusBadRequest || !strings.Contains(page, "Sign-in failed") {
				t.Errorf("%d %.300s, want our 400 page", status, page)
			}
		})
	}
	t.Run("shows the provider's error escaped", func(t *testing.T) {
		status, page := callback("state=" + st + "&error=" + url.QueryEscape("<script>alert(1)</script><img src=x onerror=alert(2)>"))
		if status != http.StatusForbidden || strings.Contains(page, "<script>alert") || strings.Contains(page, "<img src=x") ||
			!strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%d %s", status, page)
		}
	})
	t.Run("refuses the state once used", func(t *testing.T) {
		if status, page := callback("state=" + st + "&code=c"); status != http.StatusBadRequest || !strings.Contains(page, "already used") {
			t.Errorf("%d %.300s, want the 400 page of a used answer", status, page)
		}
	})
}
