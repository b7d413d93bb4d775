package e2e_test

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// firstAnswer is what the AS answers a browser that already has a session:
// the status, the Location of a redirect (not followed) and the body.
func (w *world) firstAnswer(c *http.Client, authURL string) (int, string, string) {
	w.t.Helper()
	nc := *c
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := nc.Get(authURL)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

func authURL(conf *oauth2.Config) string {
	return conf.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
}

// TestRedirectURIChangeAsksForConsentAgain: alice approved a registered
// client that returns to nice.example; its owner then points it at
// evil.example with an RFC 7592 update. The next authorization with alice's
// session shows the consent page again instead of sending a code there.
func TestRedirectURIChangeAsksForConsentAgain(t *testing.T) {
	w := newWorld(t)
	ci := w.register(`{"client_name":"Nice","redirect_uris":["https://nice.example/cb"],"token_endpoint_auth_method":"none"}`)
	b := w.browser()
	w.authorizeAs(b, authURL(w.oauth(ci.ClientID, "", "https://nice.example/cb")))
	// Remembered: the same request goes straight back to the client.
	if status, loc, _ := w.firstAnswer(b, authURL(w.oauth(ci.ClientID, "", "https://nice.example/cb"))); status != http.StatusSeeOther || !strings.HasPrefix(loc, "https://nice.example/cb?code=") {
		t.Fatalf("remembered consent: %d %s, want a 303 with a code", status, loc)
	}

	body := `{"client_id":"` + ci.ClientID + `","client_name":"Nice","redirect_uris":["https://evil.example/steal"],"token_endpoint_auth_method":"none"}`
	req, _ := http.NewRequest(http.MethodPut, ci.RegistrationClientURI, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+ci.RegistrationAccessToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("RFC 7592 update: %d", resp.StatusCode)
	}

	status, loc, page := w.firstAnswer(b, authURL(w.oauth(ci.ClientID, "", "https://evil.example/steal")))
	if status != http.StatusOK || loc != "" || !strings.Contains(page, `value="approve"`) || !strings.Contains(page, "evil.example") {
		t.Fatalf("after the redirect URIs changed: %d %q, want the consent page naming evil.example", status, loc)
	}
}

// TestCIMDRedirectSetChangeAsksForConsentAgain is the same for a Client ID
// Metadata Document that adds a redirect URI.
func TestCIMDRedirectSetChangeAsksForConsentAgain(t *testing.T) {
	w := newWorld(t)
	id := w.docs.URL + "/app.json"
	w.publish("/app.json", map[string]any{"client_id": id, "client_name": "Doc", "redirect_uris": []string{"https://nice.example/cb"}})
	b := w.browser()
	w.authorizeAs(b, authURL(w.oauth(id, "", "https://nice.example/cb")))
	w.publish("/app.json", map[string]any{"client_id": id, "client_name": "Doc", "redirect_uris": []string{"https://nice.example/cb", "https://evil.example/steal"}})
	w.cimd.Forget(id)
	for _, redirect := range []string{"https://evil.example/steal", "https://nice.example/cb"} {
		status, loc, page := w.firstAnswer(b, authURL(w.oauth(id, "", redirect)))
		if status != http.StatusOK || loc != "" || !strings.Contains(page, `value="approve"`) {
			t.Fatalf("%s after the document's redirect set changed: %d %q, want the consent page", redirect, status, loc)
		}
	}
}

// TestErrorsForRegisteredClientsAreShownNotRedirected: a bad authorization
// request from a self-registered client is answered on the AS's own page,
// naming where the link goes, never with a redirect before the person has
// seen a page (RFC 9700 §4.11.2). After the consent page, Deny still
// returns to the client.
func TestErrorsForRegisteredClientsAreShownNotRedirected(t *testing.T) {
	w := newWorld(t)
	ci := w.register(`{"client_name":"Landing","redirect_uris":["https://evil.example/landing"],"token_endpoint_auth_method":"none"}`)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for name, q := range map[string]url.Values{
		"no PKCE":         {"response_type": {"code"}, "client_id": {ci.ClientID}, "redirect_uri": {"https://evil.example/landing"}, "state": {"s1"}},
		"a bad response":  {"response_type": {"token"}, "client_id": {ci.ClientID}, "redirect_uri": {"https://evil.example/landing"}},
		"prompt=none":     {"response_type": {"code"}, "client_id": {ci.ClientID}, "code_challenge": {strings.Repeat("c", 43)}, "code_challenge_method": {"S256"}, "prompt": {"none"}},
		"a bad resource":  {"response_type": {"code"}, "client_id": {ci.ClientID}, "code_challenge": {strings.Repeat("c", 43)}, "code_challenge_method": {"S256"}, "resource": {"https://elsewhere.example/"}},
		"plain challenge": {"response_type": {"code"}, "client_id": {ci.ClientID}, "code_challenge": {strings.Repeat("c", 43)}, "code_challenge_method": {"plain"}},
	} {
		t.Run(name, func(t *testing.T) {
			resp, err := noRedirect.Get(w.issuer + "/authorize?" + q.Encode())
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			page := string(b)
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
				t.Fatalf("status %d Location %q, want 400 and no redirect", resp.StatusCode, resp.Header.Get("Location"))
			}
			if !strings.Contains(page, "<code>evil.example</code>") || !strings.Contains(page, `href="https://evil.example/landing?error=`) {
				t.Fatalf("the page does not name the client's host with a link back:\n%s", page)
			}
			if resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
				t.Fatal("the error page lacks its page headers")
			}
		})
	}

	// Deny on the consent page is the person's own choice: redirected.
	b := w.browser()
	conf := w.oauth(ci.ClientID, "", "https://evil.example/landing")
	_, _, login := w.firstAnswer(b, authURL(conf))
	if !strings.Contains(login, `name="password"`) {
		t.Fatal("no login form")
	}
	u := w.denyAs(b, authURL(conf))
	if u.Host != "evil.example" || u.Query().Get("error") != "access_denied" {
		t.Fatalf("deny went to %s", u)
	}
}

// denyAs logs in as alice and presses Deny; it returns where the browser
// is sent.
func (w *world) denyAs(c *http.Client, authURL string) *url.URL {
	w.t.Helper()
	nc := *c
	nc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Host != w.srv.Listener.Addr().String() {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := nc.Get(authURL)
	if err != nil {
		w.t.Fatal(err)
	}
	for step := 0; step < 3; step++ {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusSeeOther {
			break
		}
		body := string(b)
		m := formRE.FindStringSubmatch(body)
		if m == nil {
			w.t.Fatalf("no form:\n%s", body)
		}
		v := url.Values{}
		for _, hm := range hiddenRE.FindAllStringSubmatch(m[2], -1) {
			v.Set(html.UnescapeString(hm[1]), html.UnescapeString(hm[2]))
		}
		if strings.Contains(body, `name="password"`) {
			v.Set("username", "alice")
			v.Set("password", password)
		} else {
			v.Set("action", "deny")
		}
		resp, err = nc.PostForm(w.issuer+html.UnescapeString(m[1]), v)
		if err != nil {
			w.t.Fatal(err)
		}
	}
	resp.Body.Close()
	u, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		w.t.Fatalf("status %d, want a 303 to the client", resp.StatusCode)
	}
	return u
}

// TestLoopbackPublicClientTakesOneClickWhenRemembered: a public client on a
// loopback redirect URI is not silently re-approved, whatever port it
// comes back on (RFC 8252 §8.6): the person gets a one-click page. A public
// client on an https redirect URI is still redirected at once.
func TestLoopbackPublicClientTakesOneClickWhenRemembered(t *testing.T) {
	w := newWorld(t)
	ci := w.register(`{"client_name":"Visual Studio Code","redirect_uris":["http://127.0.0.1/"],"token_endpoint_auth_method":"none"}`)
	b := w.browser()
	w.authorizeAs(b, authURL(w.oauth(ci.ClientID, "", "http://127.0.0.1:33418/")))
	for _, port := range []string{"33418", "51234"} {
		status, loc, page := w.firstAnswer(b, authURL(w.oauth(ci.ClientID, "", "http://127.0.0.1:"+port+"/")))
		if status != http.StatusOK || loc != "" || !strings.Contains(page, "Continue to Visual Studio Code as alice?") {
			t.Fatalf("port %s: %d %q, want the one-click page", port, status, loc)
		}
	}
	// The click gives the code.
	if u := w.authorizeAs(b, authURL(w.oauth(ci.ClientID, "", "http://127.0.0.1:51234/"))); u.Host != "127.0.0.1:51234" {
		t.Fatalf("after the click: %s", u)
	}

	cursor := w.register(`{"client_name":"Cursor","redirect_uris":["cursor://anysphere.cursor-mcp/oauth/callback"],"token_endpoint_auth_method":"none"}`)
	w.authorizeAs(b, authURL(w.oauth(cursor.ClientID, "", "cursor://anysphere.cursor-mcp/oauth/callback")))
	if status, _, page := w.firstAnswer(b, authURL(w.oauth(cursor.ClientID, "", "cursor://anysphere.cursor-mcp/oauth/callback"))); status != http.StatusOK || !strings.Contains(page, "Continue to Cursor as alice?") {
		t.Fatalf("private-use scheme: %d, want the one-click page", status)
	}

	web := w.register(`{"client_name":"Web","redirect_uris":["https://web.example/cb"],"token_endpoint_auth_method":"none"}`)
	w.authorizeAs(b, authURL(w.oauth(web.ClientID, "", "https://web.example/cb")))
	if status, loc, _ := w.firstAnswer(b, authURL(w.oauth(web.ClientID, "", "https://web.example/cb"))); status != http.StatusSeeOther || !strings.HasPrefix(loc, "https://web.example/cb?code=") {
		t.Fatalf("https public client: %d %q, want a 303 with a code", status, loc)
	}
}
