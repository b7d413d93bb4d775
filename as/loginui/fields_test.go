package loginui

import (
	"net/url"
	"strings"
	"testing"
)

// TestParseFieldsLimits: every field of our forms is accepted up to its
// length limit and refused one byte past it, and refused when repeated.
func TestParseFieldsLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  int
		get  func(*submittedForm) string
	}{
		{"csrf", maxTokenLen, func(f *submittedForm) string { return f.CSRF }},
		{"flow", maxTokenLen, func(f *submittedForm) string { return f.Flow }},
		{"username", maxUsernameLen, func(f *submittedForm) string { return f.Username }},
		{"password", maxPasswordLen, func(f *submittedForm) string { return f.Password }},
		{"action", 32, func(f *submittedForm) string { return f.Action }},
		{"client_id", maxClientIDLen, func(f *submittedForm) string { return f.ClientID }},
		{"session_id", 128, func(f *submittedForm) string { return f.SessionID }},
		{"upstream", 64, func(f *submittedForm) string { return f.Upstream }},
	} {
		at := strings.Repeat("a", tc.max)
		f, err := parseFields(url.Values{tc.name: {at}})
		if err != nil || tc.get(f) != at {
			t.Errorf("%s of %d bytes: %v, want it accepted", tc.name, tc.max, err)
		}
		if _, err := parseFields(url.Values{tc.name: {at + "a"}}); err != errBadForm {
			t.Errorf("%s of %d bytes: %v, want errBadForm", tc.name, tc.max+1, err)
		}
		if _, err := parseFields(url.Values{tc.name: {"a", "a"}}); err != errBadForm {
			t.Errorf("%s twice: %v, want errBadForm", tc.name, err)
		}
	}
	for _, step := range []string{"", stepLogin, stepConsent, stepUpstream, "logout", "revoke", "end_session"} {
		if f, err := parseFields(url.Values{stepField: {step}}); err != nil || f.Step != step {
			t.Errorf("step %q: %v, want it accepted", step, err)
		}
	}
	for _, step := range []string{"Login", "bogus", strings.Repeat("a", 33)} {
		if _, err := parseFields(url.Values{stepField: {step}}); err != errBadForm {
			t.Errorf("step %q: %v, want errBadForm", step, err)
		}
	}
}
