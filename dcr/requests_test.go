package dcr_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRegistrationRequestForms pins how the registration endpoint reads a
// request: the path, the Content-Type, and the initial access token's scheme
// and challenge (RFC 6750 §3: error="invalid_token" only when a token was
// presented).
func TestRegistrationRequestForms(t *testing.T) {
	const body = `{"client_name":"Claude","redirect_uris":["https://claude.ai/api/mcp/auth_callback"],"token_endpoint_auth_method":"none"}`
	cases := []struct {
		name      string
		path      string
		hdr       map[string]string
		status    int
		challenge string // WWW-Authenticate, when status is 401
	}{
		{"accepts a configured token", "/register", map[string]string{"Authorization": "Bearer iat-1"}, http.StatusCreated, ""},
		{"accepts the scheme in any case", "/register", map[string]string{"Authorization": "bEaReR iat-1"}, http.StatusCreated, ""},
		{"accepts a body without Content-Type", "/register", map[string]string{"Authorization": "Bearer iat-1", "Content-Type": ""}, http.StatusCreated, ""},
		{"challenges a request without a token", "/register", nil, http.StatusUnauthorized, `Bearer`},
		{"challenges an empty token as none", "/register", map[string]string{"Authorization": "Bearer "}, http.StatusUnauthorized, `Bearer`},
		{"challenges a wrong token as invalid", "/register", map[string]string{"Authorization": "Bearer iat-2"}, http.StatusUnauthorized, `Bearer error="invalid_token"`},
		{"does not read a configured token under another scheme", "/register", map[string]string{"Authorization": "Basic_ iat-1"}, http.StatusUnauthorized, `Bearer`},
		{"does not read a short Authorization header", "/register", map[string]string{"Authorization": "Bear"}, http.StatusUnauthorized, `Bearer`},
		{"has nothing at the path with a trailing slash", "/register/", map[string]string{"Authorization": "Bearer iat-1"}, http.StatusNotFound, ""},
		{"has nothing below another path", "/registerx", map[string]string{"Authorization": "Bearer iat-1"}, http.StatusNotFound, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := defaultPolicy()
			p.Open = false
			p.InitialAccessTokens = []string{"iat-1"}
			e := newEnv(t, p)
			// The handler alone at the root, so that every path reaches it.
			srv := httptest.NewServer(e.h)
			t.Cleanup(srv.Close)
			r := e.do(http.MethodPost, srv.URL+tc.path, "", body, tc.hdr)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if got := r.header.Get("WWW-Authenticate"); tc.status == http.StatusUnauthorized && got != tc.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.challenge)
			}
			want := 0
			if tc.status == http.StatusCreated {
				want = 1
			} else if m := r.json(t); (tc.status == http.StatusNotFound && m["error"] != "invalid_request") ||
				(tc.status == http.StatusUnauthorized && m["error"] != "invalid_token") {
				t.Errorf("error %v", m["error"])
			}
			if n := e.count(); n != want {
				t.Errorf("%d clients stored, want %d", n, want)
			}
		})
	}
}
