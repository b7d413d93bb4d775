package loginui

import "testing"

// TestCSRFTokensNeedASession: a CSRF token is valid only for the session it
// was made for, and never without a session, not even the token of an
// empty session id.
func TestCSRFTokensNeedASession(t *testing.T) {
	h := newHarness(t, nil)
	u := h.ui
	s, other := session{ID: randomID()}, session{ID: randomID()}
	for _, tc := range []struct {
		name string
		s    session
		got  string
		want bool
	}{
		{"its own session's token", s, u.csrfToken(s), true},
		{"another session's token", s, u.csrfToken(other), false},
		{"no token", s, "", false},
		{"no session, with the token of an empty id", session{}, u.csrfToken(session{}), false},
		{"no session, no token", session{}, "", false},
	} {
		if got := u.validCSRF(tc.s, tc.got); got != tc.want {
			t.Errorf("%s: validCSRF = %v, want %v", tc.name, got, tc.want)
		}
	}
}
