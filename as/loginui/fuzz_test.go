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

	"github.com/mcpauth/mcpauth/as/authflow"
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

// FuzzStepPost posts arbitrary bodies to each step of a transaction, with
// and without a signed-in session: never a 5xx, never a step completed.
func FuzzStepPost(f *testing.F) {
	h := newHarness(f, func(c *Config) { c.Users = nil })
	h.ui.users["alice"] = h.ui.dummyHash
	logged := h.storedSession(f, "alice")
	f.Add(ConsentPath, "mcpauth_step=consent&action=approve&csrf=x&txn=y", true)
	f.Add(LoginPath, "mcpauth_step=login&username=alice&password=x", false)
	f.Add(ConsentPath, "action=approve&csrf=x&txn=y&session_id=z", true)
	f.Add(UpstreamPath, "upstream=corp&txn=%zz", false)
	f.Fuzz(func(t *testing.T, path, body string, loggedIn bool) {
		if path != LoginPath && path != ConsentPath && path != UpstreamPath {
			path = ConsentPath
		}
		sess := session{ID: "sid-anonymous", Exp: h.clock.Now().Add(time.Hour).Unix()}
		if loggedIn {
			sess = logged
		}
		rec := h.postStep(path, sess, body)
		if rec.Code >= 500 {
			t.Fatalf("status %d", rec.Code)
		}
		if rec.Code == http.StatusSeeOther {
			t.Fatalf("a fuzzed body completed a step: %s", rec.Header().Get("Location"))
		}
	})
}

// fuzzRequest is the authorization request the form fuzzers' transactions
// carry.
var fuzzRequest = authflow.Request{ClientID: "demo-app", RedirectURI: "https://app.example/callback",
	Resource: "http://127.0.0.1:8080/mcp", Scopes: []string{"mcp:tools"}, ForceConsent: true, MaxAge: -1,
	ClientRedirectURIs: []string{"https://app.example/callback", "http://127.0.0.1/cb"}}

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

// txnFor seals a transaction of fuzzRequest for sess; with asked, its
// consent page was shown to sess's person.
func (h *harness) txnFor(t testing.TB, sess session, asked bool) string {
	t.Helper()
	tx := h.ui.flow.New(fuzzRequest, authflow.Display{RedirectHost: "app.example"})
	tx.Session = sess.ID
	if asked {
		tx.RecordAsked(sess.Subject, fuzzRequest.Scopes)
	}
	sealed, err := h.ui.flow.Seal(tx)
	if err != nil {
		t.Fatal(err)
	}
	return sealed
}

// postStep posts body to a step's path with the session cookie of sess.
func (h *harness) postStep(path string, sess session, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: h.ui.cookie.session, Value: h.encodeSession(sess)})
	rec := httptest.NewRecorder()
	h.srv.Config.Handler.ServeHTTP(rec, req)
	return rec
}

// finish follows a step's 303 back to the transaction with the session
// cookie the step set (or sess's), and returns the harness's answer to
// the client, if there was one.
func (h *harness) finish(t testing.TB, step *httptest.ResponseRecorder, sess session) (Result, bool) {
	t.Helper()
	loc := step.Header().Get("Location")
	if !strings.HasPrefix(loc, ContinuePath+"?") {
		t.Fatalf("step answered %d to %q, want a return to the transaction", step.Code, loc)
	}
	req := httptest.NewRequest(http.MethodGet, loc, nil)
	cookie := &http.Cookie{Name: h.ui.cookie.session, Value: h.encodeSession(sess)}
	for _, c := range step.Result().Cookies() {
		if c.Name == h.ui.cookie.session {
			cookie = c
		}
	}
	req.AddCookie(cookie)
	n := len(h.results)
	rec := httptest.NewRecorder()
	h.srv.Config.Handler.ServeHTTP(rec, req)
	if rec.Code >= 500 {
		t.Fatalf("return to the transaction: status %d", rec.Code)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.results) == n {
		return Result{}, false
	}
	return h.results[len(h.results)-1], true
}

// FuzzLoginForm posts login forms with a valid CSRF token and transaction
// and fuzzed credentials and extra fields: never a 5xx, never an answer to
// the client, and a signed-in session only for a real user with the right
// password.
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
	login := func(t testing.TB, user, pw, extra string) (*httptest.ResponseRecorder, url.Values) {
		sess := session{ID: "sid-" + randomID(), Exp: h.clock.Now().Add(time.Hour).Unix()}
		fields := url.Values{stepField: {stepLogin}, "csrf": {h.ui.csrfToken(sess)}, "txn": {h.txnFor(t, sess, false)},
			"username": {user}, "password": {pw}}
		body := fields.Encode()
		if extra != "" {
			body += "&" + extra
		}
		rec := h.postStep(LoginPath, sess, body)
		return rec, fields
	}
	// The target reaches the password check: the right password signs in.
	if rec, _ := login(f, "alice", alicePW, ""); rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), ContinuePath+"?") {
		f.Fatalf("the right password: status %d, want 303 to the transaction", rec.Code)
	}
	f.Add("alice", alicePW, "")
	f.Add("alice", "wrong", "")
	f.Add("ALICE", alicePW, "")
	f.Add("alice\x00", alicePW, "")
	f.Add("alice", alicePW, "username=bob")
	f.Add("alice", alicePW, "mcpauth_step=consent&action=approve")
	f.Add("", "", "%zz")
	f.Fuzz(func(t *testing.T, user, pw, extra string) {
		// A sign-in returns to the transaction, never to the client.
		rec, fields := login(t, user, pw, extra)
		if rec.Code == http.StatusSeeOther && !strings.HasPrefix(rec.Header().Get("Location"), ContinuePath+"?") {
			t.Fatalf("a login form went to %q", rec.Header().Get("Location"))
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

// FuzzConsentForm posts consent forms of a signed-in user with a valid
// CSRF token and transaction and a fuzzed action and extra fields: never a 5xx; the
// flow completes only for action approve (with exactly the requested
// scopes) or deny, and a consent is stored only on approve.
func FuzzConsentForm(f *testing.F) {
	h := newHarness(f, nil)
	f.Add("approve", "")
	f.Add("deny", "")
	f.Add("Approve", "")
	f.Add("approve", "action=deny")
	f.Add("approve", "scope=mcp:tools+mcp:admin")
	f.Add("approve", "mcpauth_step=login&username=bob")
	f.Add("", "%zz")
	f.Fuzz(func(t *testing.T, action, extra string) {
		sess := h.storedSession(t, "alice")
		fields := url.Values{stepField: {stepConsent}, "csrf": {h.ui.csrfToken(sess)}, "txn": {h.txnFor(t, sess, true)}, "action": {action}}
		_ = h.store.DeleteConsents(context.Background(), "alice", "demo-app")
		body := fields.Encode()
		if extra != "" {
			body += "&" + extra
		}
		rec := h.postStep(ConsentPath, sess, body)
		if rec.Code >= 500 {
			t.Fatalf("status %d", rec.Code)
		}
		var res Result
		ok := false
		if rec.Code == http.StatusSeeOther {
			res, ok = h.finish(t, rec, sess)
		}
		sent, _ := url.ParseQuery(fields.Encode() + "&" + extra)
		c, err := h.store.GetConsent(context.Background(), "alice", "demo-app", fuzzRequest.Resource)
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
			if sent.Get("action") != "approve" || !slices.Equal(res.Scopes, fuzzRequest.Scopes) || !stored {
				t.Fatalf("approved with action %q, scopes %q, consent stored %v", sent.Get("action"), res.Scopes, stored)
			}
		}
	})
}
