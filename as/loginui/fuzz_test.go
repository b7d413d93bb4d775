package loginui

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func FuzzParseFields(f *testing.F) {
	f.Add("mcpauth_step=login&csrf=a&flow=b&username=alice&password=pw")
	f.Add("mcpauth_step=consent&action=approve&action=deny")
	f.Add("mcpauth_step=revoke&client_id=%zz")
	f.Add("")
	f.Fuzz(func(t *testing.T, body string) {
		v, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		form, err := parseFields(v)
		if err != nil {
			return
		}
		switch form.Step {
		case "", stepLogin, stepConsent, "logout", "revoke":
		default:
			t.Fatalf("accepted step %q", form.Step)
		}
		if len(form.Username) > maxUsernameLen || len(form.Password) > maxPasswordLen || len(form.CSRF) > maxTokenLen {
			t.Fatal("accepted an overlong field")
		}
	})
}

// FuzzAuthorizePost posts arbitrary bodies to Authorize, with and without a
// logged-in session: it never answers 5xx and never completes a flow.
func FuzzAuthorizePost(f *testing.F) {
	h := newHarness(f, func(c *Config) { c.Users = nil })
	logged := h.encodeSession(session{ID: "sid", Subject: "alice", Exp: 1 << 40})
	h.ui.users["alice"] = h.ui.dummyHash
	f.Add("mcpauth_step=consent&action=approve&csrf=x&flow=y", true)
	f.Add("mcpauth_step=login&username=alice&password=x", false)
	f.Add("mcpauth_step=consent&action=approve&csrf="+h.ui.csrfToken(session{ID: "sid"}), true)
	f.Fuzz(func(t *testing.T, body string, loggedIn bool) {
		req := httptest.NewRequest(http.MethodPost, authorizePath(), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if loggedIn {
			req.AddCookie(&http.Cookie{Name: "mcpauth_session", Value: logged})
		}
		rec := httptest.NewRecorder()
		res, ok := h.ui.Authorize(rec, req, Prompt{ClientID: "demo-app", Resource: "r", Scopes: []string{"s"}, ForceConsent: true})
		if ok {
			t.Fatalf("a fuzzed body completed the flow: %+v", res)
		}
		if rec.Code >= 500 {
			t.Fatalf("status %d", rec.Code)
		}
	})
}
