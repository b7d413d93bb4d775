package loginui

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
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
