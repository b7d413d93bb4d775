package loginui

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/mcpauth/mcpauth/storage"
)

func FuzzParseFields(f *testing.F) {
	f.Add("mcpauth_step=login&csrf=a&flow=b&username=alice&password=pw")
	f.Add("mcpauth_step=consent&action=approve&action=deny")
	f.Add("mcpauth_step=revoke&client_id=%zz")
	f.Add("mcpauth_step=end_session&session_id=abc&session_id=def")
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
		case "", stepLogin, stepConsent, "logout", "revoke", "end_session":
		default:
			t.Fatalf("accepted step %q", form.Step)
		}
		if len(form.Username) > maxUsernameLen || len(form.Password) > maxPasswordLen || len(form.CSRF) > maxTokenLen || len(form.SessionID) > 128 {
			t.Fatal("accepted an overlong field")
		}
	})
}

// FuzzAuthorizePost posts arbitrary bodies to Authorize, with and without a
// logged-in session: it never answers 5xx and never completes a flow.
func FuzzAuthorizePost(f *testing.F) {
	h := newHarness(f, func(c *Config) { c.Users = nil })
	h.ui.users["alice"] = h.ui.dummyHash
	logged := h.encodeSession(h.storedSession(f, "alice"))
	f.Add("mcpauth_step=consent&action=approve&csrf=x&flow=y", true)
	f.Add("mcpauth_step=login&username=alice&password=x", false)
	f.Add("mcpauth_step=consent&action=approve&csrf=x&flow=y&session_id=z", true)
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

// fuzzPrompt is the authorization request the form fuzzers post to.
var fuzzPrompt = Prompt{ClientID: "demo-app", RedirectURI: "https://app.example/callback", RedirectHost: "app.example",
	Resource: "http://127.0.0.1:8080/mcp", Scopes: []string{"mcp:tools"}, ForceConsent: true,
	RedirectURIs: []string{"https://app.example/callback", "http://127.0.0.1/cb"}}

// storedSession is a signed-in session of subject, stored as a login
// stores it, in its cookie form.
func (h *harness) storedSession(t testing.TB, subject string) session {
	t.Helper()
	now := h.clock.Now()
	s := session{ID: "sid-" + randomID(), Subject: subject, AuthTime: now.Unix(), Exp: now.Add(time.Hour).Unix()}
	if err := h.ui.cfg.Sessions.CreateSession(context.Background(), &storage.Session{ID: h.ui.sessionKey(s.ID), Subject: subject,
		CreatedAt: now, LastSeenAt: now, IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	return s
}

// postForm posts fields, then the raw extra text, to the authorization
// request with the session cookie of sess.
func (h *harness) postForm(sess session, fields url.Values, extra string) (*httptest.ResponseRecorder, Result, bool) {
	body := fields.Encode()
	if extra != "" {
		body += "&" + extra
	}
	req := httptest.NewRequest(http.MethodPost, authorizePath(), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: h.ui.cookie.session, Value: h.encodeSession(sess)})
	rec := httptest.NewRecorder()
	res, ok := h.ui.Authorize(rec, req, fuzzPrompt)
	return rec, res, ok
}

// binding is the flow binding of the fuzzers' authorization request.
func (h *harness) binding() string {
	return authorizeBinding(httptest.NewRequest(http.MethodGet, authorizePath(), nil), fuzzPrompt)
}

// FuzzLoginForm posts login forms with valid CSRF and flow tokens and fuzzed
// credentials and extra fields: never a 5xx, never a completed flow, and a
// signed-in session only for a real user with the right password.
func FuzzLoginForm(f *testing.F) {
	hash, err := bcrypt.GenerateFromPassword([]byte(alicePW), bcrypt.MinCost)
	if err != nil {
		f.Fatal(err)
	}
	h := newHarness(f, func(c *Config) {
		c.Users = []User{{Username: "alice", PasswordHash: string(hash)}}
		c.AccountFreeAttempts = 1 << 30
		c.AddressFreeAttempts = 1 << 30
	})
	h.ui.dummyHash = string(hash) // unknown users cost a bcrypt, not an argon2id
	bind := h.binding()
	login := func(user, pw, extra string) (*httptest.ResponseRecorder, url.Values, Result, bool) {
		sess := session{ID: "sid-" + randomID(), Exp: h.clock.Now().Add(time.Hour).Unix()}
		fields := url.Values{stepField: {stepLogin}, "csrf": {h.ui.csrfToken(sess)}, "flow": {h.ui.newFlow(sess, stepLogin, bind)},
			"username": {user}, "password": {pw}}
		rec, res, ok := h.postForm(sess, fields, extra)
		return rec, fields, res, ok
	}
	// The target reaches the password check: the right password signs in.
	if rec, _, _, _ := login("alice", alicePW, ""); rec.Code != http.StatusSeeOther {
		f.Fatalf("the right password: status %d, want 303", rec.Code)
	}
	f.Add("alice", alicePW, "")
	f.Add("alice", "wrong", "")
	f.Add("ALICE", alicePW, "")
	f.Add("alice\x00", alicePW, "")
	f.Add("alice", alicePW, "username=bob")
	f.Add("alice", alicePW, "mcpauth_step=consent&action=approve")
	f.Add("", "", "%zz")
	f.Fuzz(func(t *testing.T, user, pw, extra string) {
		rec, fields, res, ok := login(user, pw, extra)
		if ok {
			t.Fatalf("a login form completed the flow: %+v", res)
		}
		if rec.Code >= 500 {
			t.Fatalf("status %d", rec.Code)
		}
		if rec.Code == http.StatusSeeOther {
			sent, err := url.ParseQuery(fields.Encode() + "&" + extra)
			if err != nil || len(sent["username"]) != 1 || sent.Get("username") != "alice" || sent.Get("password") != alicePW {
				t.Fatalf("signed in with username %q password %q", sent["username"], sent["password"])
			}
		}
	})
}

// FuzzConsentForm posts consent forms of a signed-in user with valid CSRF
// and flow tokens and a fuzzed action and extra fields: never a 5xx; the
// flow completes only for action approve (with exactly the requested
// scopes) or deny, and a consent is stored only on approve.
func FuzzConsentForm(f *testing.F) {
	h := newHarness(f, nil)
	bind := h.binding()
	f.Add("approve", "")
	f.Add("deny", "")
	f.Add("Approve", "")
	f.Add("approve", "action=deny")
	f.Add("approve", "scope=mcp:tools+mcp:admin")
	f.Add("approve", "mcpauth_step=login&username=bob")
	f.Add("", "%zz")
	f.Fuzz(func(t *testing.T, action, extra string) {
		sess := h.storedSession(t, "alice")
		fields := url.Values{stepField: {stepConsent}, "csrf": {h.ui.csrfToken(sess)}, "flow": {h.ui.newFlow(sess, stepConsent, bind)}, "action": {action}}
		_ = h.store.DeleteConsents(context.Background(), "alice", "demo-app")
		rec, res, ok := h.postForm(sess, fields, extra)
		if rec.Code >= 500 {
			t.Fatalf("status %d", rec.Code)
		}
		sent, _ := url.ParseQuery(fields.Encode() + "&" + extra)
		c, err := h.store.GetConsent(context.Background(), "alice", "demo-app", fuzzPrompt.Resource)
		stored := err == nil
		if stored && !slices.Equal(c.RedirectURIs, []string{"http://127.0.0.1/cb", "https://app.example/callback"}) {
			t.Fatalf("consent stored for redirect URIs %q, want the prompt's sorted set", c.RedirectURIs)
		}
		if !ok {
			if stored {
				t.Fatal("consent stored by a refused form")
			}
			if (action == "approve" || action == "deny") && extra == "" {
				t.Fatalf("the plain %s form was refused: %d", action, rec.Code)
			}
			return
		}
		switch {
		case len(sent["action"]) != 1:
			t.Fatalf("completed with actions %q", sent["action"])
		case res.Subject != "alice":
			t.Fatalf("completed for %q", res.Subject)
		case res.Denied:
			if sent.Get("action") != "deny" || stored {
				t.Fatalf("denied with action %q, consent stored %v", sent.Get("action"), stored)
			}
		default:
			if sent.Get("action") != "approve" || !slices.Equal(res.Scopes, fuzzPrompt.Scopes) || !stored {
				t.Fatalf("approved with action %q, scopes %q, consent stored %v", sent.Get("action"), res.Scopes, stored)
			}
		}
	})
}
