package loginui

import (
	"github.com/mcpauth/mcpauth/as/authflow"

	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
	"github.com/mcpauth/mcpauth/upstream"
)

// TestParseCallbackLimits: each parameter of the provider's answer is
// accepted up to its length limit and refused one byte past it or
// repeated; an error code may hold any printable ASCII character but the
// quote and the backslash (RFC 6749 §4.1.2.1).
func TestParseCallbackLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  int
		base url.Values
	}{
		{"state", maxStateLen, url.Values{"code": {"c"}}},
		{"code", maxCodeLen, url.Values{"state": {"s"}}},
		{"error", 64, url.Values{"state": {"s"}}},
		{"iss", 2048, url.Values{"state": {"s"}, "code": {"c"}}},
	} {
		with := func(v string) url.Values {
			q := url.Values{tc.name: {v}}
			for k, vs := range tc.base {
				q[k] = vs
			}
			return q
		}
		at := strings.Repeat("a", tc.max)
		if _, err := parseCallback(with(at)); err != nil {
			t.Errorf("%s of %d bytes: %v, want it accepted", tc.name, tc.max, err)
		}
		if _, err := parseCallback(with(at + "a")); err != errBadCallback {
			t.Errorf("%s of %d bytes: %v, want errBadCallback", tc.name, tc.max+1, err)
		}
		q := with("a")
		q[tc.name] = []string{"a", "a"}
		if _, err := parseCallback(q); err != errBadCallback {
			t.Errorf("%s twice: %v, want errBadCallback", tc.name, err)
		}
	}
	for _, tc := range []struct {
		error string
		ok    bool
	}{
		{"access_denied", true},
		{"a b", true},
		{"!#[]~", true},
		{"a\x1fb", false},
		{"a\x7fb", false},
		{`a"b`, false},
		{`a\b`, false},
		{"é", false},
	} {
		c, err := parseCallback(url.Values{"state": {"s"}, "error": {tc.error}})
		if tc.ok && (err != nil || c.Error != tc.error) {
			t.Errorf("error %q: %v, want it accepted", tc.error, err)
		}
		if !tc.ok && err != errBadCallback {
			t.Errorf("error %q: %v, want errBadCallback", tc.error, err)
		}
	}
	for _, q := range []url.Values{
		{"code": {"c"}},
		{"state": {"s"}},
		{"state": {"s"}, "code": {"c"}, "error": {"e"}},
		{"state": {""}, "code": {"c"}},
	} {
		if _, err := parseCallback(q); err != errBadCallback {
			t.Errorf("%v: %v, want errBadCallback", q, err)
		}
	}
}

// TestAnUpstreamSignInEndsAtItsStatesExpiry: the provider's answer is
// accepted up to the second before the state it carries expires (FlowTTL
// after the sign-in started) and refused at that second.
func TestAnUpstreamSignInEndsAtItsStatesExpiry(t *testing.T) {
	e := newUpstreamEnv(t, false, "")
	clk := newFrozenClock()
	start := clk.Now()
	e.ui.now = clk.Now
	early, late := e.browser(), e.browser()
	cbEarly := e.signIn(early, "/consents", "alice")
	cbLate := e.signIn(late, "/consents", "bob")
	clk.Set(start.Add(10*time.Minute - time.Second))
	if p := early.open(cbEarly); !strings.Contains(p.Body, "Signed in as") {
		t.Fatalf("a second before the state's expiry: status %d, want signed in:\n%s", p.StatusCode, p.Body)
	}
	clk.Set(start.Add(10 * time.Minute))
	if p := late.open(cbLate); p.StatusCode != http.StatusBadRequest || !strings.Contains(p.Body, "The sign-in took too long.") {
		t.Fatalf("at the state's expiry: status %d, want 400:\n%s", p.StatusCode, p.Body)
	}
}

// TestTheCallbackAnswersOnlyGET: the provider sends the browser back with a
// GET; any other method, HEAD included, gets 405 with Allow: GET.
func TestTheCallbackAnswersOnlyGET(t *testing.T) {
	e := newUpstreamEnv(t, false, "")
	for _, tc := range []struct {
		method string
		status int
	}{
		{http.MethodGet, http.StatusBadRequest},
		{http.MethodHead, http.StatusMethodNotAllowed},
		{http.MethodPost, http.StatusMethodNotAllowed},
		{http.MethodPut, http.StatusMethodNotAllowed},
		{http.MethodOptions, http.StatusMethodNotAllowed},
	} {
		req, err := http.NewRequest(tc.method, e.srv.URL+"/upstream/corp/callback", nil)
		if err != nil {
			t.Fatal(err)
		}
		p := e.browser().do(req)
		if p.StatusCode != tc.status || (tc.status == http.StatusMethodNotAllowed) != (p.Header.Get("Allow") == "GET") {
			t.Errorf("%s: status %d Allow %q, want %d", tc.method, p.StatusCode, p.Header.Get("Allow"), tc.status)
		}
	}
}

// TestAHEADOfTheCallbackLeavesTheStateUnused: a HEAD (or POST) of the
// provider's answer, as a link preview or prefetching proxy sends, neither
// uses up the state nor redeems the code: the GET that follows, with the
// same state and code, signs the person in.
func TestAHEADOfTheCallbackLeavesTheStateUnused(t *testing.T) {
	e := newUpstreamEnv(t, false, "")
	b := e.browser()
	cb := e.signIn(b, "/consents", "alice")
	for _, method := range []string{http.MethodHead, http.MethodPost} {
		req, err := http.NewRequest(method, cb.String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if p := b.do(req); p.StatusCode != http.StatusMethodNotAllowed || p.Header.Get("Allow") != "GET" {
			t.Fatalf("%s of the callback: status %d Allow %q, want 405 GET", method, p.StatusCode, p.Header.Get("Allow"))
		}
	}
	if e.record("corp:u-alice") != nil {
		t.Fatal("a HEAD of the callback recorded the person")
	}
	if p := b.open(cb); !strings.Contains(p.Body, "Signed in as") {
		t.Fatalf("GET after the HEAD: status %d, want signed in:\n%s", p.StatusCode, p.Body)
	}
}

// TestAStateIsGoodOnlyAtItsProvidersCallback: the answer to a sign-in
// started with one provider is refused at another provider's callback
// (the mix-up of RFC 9700 §4.4) without using the state up, so it still
// works at its own.
func TestAStateIsGoodOnlyAtItsProvidersCallback(t *testing.T) {
	e := newUpstreamEnv(t, false, "")
	second, err := upstream.New(upstream.Config{ID: "partners", Issuer: "https://login.partner.example", ClientID: "mcpauth", ClientSecret: "s",
		RedirectURL: e.srv.URL + "/upstream/partners/callback", Scopes: []string{"openid", "email"}})
	if err != nil {
		t.Fatal(err)
	}
	e.ui.cfg.Upstreams = append(e.ui.cfg.Upstreams, Upstream{Provider: second, Name: "Partner Workspace"})
	b := e.browser()
	cb := e.signIn(b, "/consents", "alice")
	elsewhere := *cb
	elsewhere.Path = "/upstream/partners/callback"
	if p := b.open(&elsewhere); p.StatusCode != http.StatusBadRequest || !strings.Contains(p.Body, "does not belong to a sign-in started here") {
		t.Fatalf("at the other provider's callback: status %d:\n%s", p.StatusCode, p.Body)
	}
	if p := b.open(cb); !strings.Contains(p.Body, "Signed in as") {
		t.Fatalf("at its own callback afterwards: status %d:\n%s", p.StatusCode, p.Body)
	}
}

// TestAStateWeWouldNotIssueIsRefused: a state that would send the browser
// anywhere but a path on this host, or that has no id to use it up by, is
// refused as not ours, even sealed with our keys.
func TestAStateWeWouldNotIssueIsRefused(t *testing.T) {
	e := newUpstreamEnv(t, false, "")
	good := pendingUpstream{ID: randomID(), Upstream: "corp", Page: "consents", Exp: time.Now().Add(time.Minute).Unix()}
	for _, tc := range []struct {
		name   string
		change func(*pendingUpstream)
	}{
		{"returning to another site", func(p *pendingUpstream) { p.Page = "https://evil.example/" }},
		{"returning to a network path", func(p *pendingUpstream) { p.Page = "//evil.example/x" }},
		{"returning to a backslash path", func(p *pendingUpstream) { p.Page = "/\\evil.example" }},
		{"returning to a page without sign-in", func(p *pendingUpstream) { p.Page = "logout" }},
		{"returning nowhere", func(p *pendingUpstream) { p.Page = "" }},
		{"returning to a transaction and a page", func(p *pendingUpstream) { p.Txn = &authflow.Transaction{ID: "t"} }},
		{"without an id", func(p *pendingUpstream) { p.ID = "" }},
	} {
		p := good
		tc.change(&p)
		state, err := e.ui.cookies.Encode(pendingCookieName, p)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(e.srv.URL + "/upstream/corp/callback?code=c&state=" + url.QueryEscape(state))
		if got := e.browser().open(u); got.StatusCode != http.StatusBadRequest || !strings.Contains(got.Body, "does not belong to a sign-in started here") {
			t.Errorf("a state %s: status %d:\n%s", tc.name, got.StatusCode, got.Body)
		}
	}
}

// TestASignInWithoutARefreshTokenStoresNone: when the provider gives no
// refresh token (no offline_access), the person's record holds no sealed
// one, and nothing is logged as an error.
func TestASignInWithoutARefreshTokenStoresNone(t *testing.T) {
	e := newUpstreamEnvScopes(t, false, "", []string{"openid", "email", "profile", "groups"})
	var logs syncBuffer
	e.ui.log = slog.New(slog.NewTextHandler(&logs, nil))
	b := e.browser()
	cb, err := e.op.SignIn(b.c, e.toProvider(b, "/consents").String(), "alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	if p := b.open(cb); !strings.Contains(p.Body, "Signed in as") {
		t.Fatalf("after the callback: status %d:\n%s", p.StatusCode, p.Body)
	}
	if rec := e.record("corp:u-alice"); rec == nil || rec.UpstreamRefresh != nil {
		t.Fatalf("record %+v, want one without a refresh token", rec)
	}
	if strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "event=login.succeeded") {
		t.Fatalf("logs:\n%s", logs.String())
	}
}

// TestOnlyPeopleOfAConfiguredProviderAreActiveByTheirRecord: a stored,
// not disabled record makes a person active only when its subject names a
// configured provider; a local username that is no longer configured, or
// a subject of a provider that is not, is not active.
func TestOnlyPeopleOfAConfiguredProviderAreActiveByTheirRecord(t *testing.T) {
	store := memory.New()
	ui, err := New(Config{Consents: store, JTIs: store, Secret: make([]byte, 32), Users: testUsers(t),
		Upstreams: []Upstream{{Provider: idOnly("corp")}}, UpstreamUsers: store})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, subject := range []string{"carol", "corp:u-1", "gone:u-2"} {
		if _, err := store.RecordLogin(ctx, &storage.User{Subject: subject, LastSeen: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	for subject, want := range map[string]bool{"alice": true, "carol": false, "corp:u-1": true, "gone:u-2": false, "corp:u-3": false} {
		if got := ui.active(ctx, subject); got != want {
			t.Errorf("UserActive(%q) = %v, want %v", subject, got, want)
		}
	}
}
