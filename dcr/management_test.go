package dcr_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// The client information of RFC 7592 §3 carries client_secret_expires_at
// only for clients that have a secret: 0 when it does not expire, else its
// expiry (RFC 7591 §3.2.1).
func TestReadShowsSecretExpiryOfConfidentialClientsOnly(t *testing.T) {
	cases := []struct {
		name     string
		method   string
		lifetime time.Duration
		want     any // client_secret_expires_at in the read; nil: absent
	}{
		{"a public client has none", "none", 0, nil},
		{"a secret without lifetime never expires", "client_secret_basic", 0, float64(0)},
		{"a secret with a lifetime shows its expiry", "client_secret_post", time.Hour, nil /* set below */},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := defaultPolicy()
			p.SecretLifetime = tc.lifetime
			e := newEnv(t, p)
			want := tc.want
			if tc.lifetime > 0 {
				want = float64(e.clock.Now().Add(tc.lifetime).Unix())
			}
			reg := e.register(`{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"` + tc.method + `"}`)
			if reg.status != http.StatusCreated {
				t.Fatalf("register: %d %s", reg.status, reg.body)
			}
			ci := reg.info(t)
			r := e.do(http.MethodGet, ci.RegistrationClientURI, ci.RegistrationAccessToken, "", nil)
			if r.status != http.StatusOK {
				t.Fatalf("read: %d %s", r.status, r.body)
			}
			got, present := r.json(t)["client_secret_expires_at"]
			if (want == nil) == present || (present && got != want) {
				t.Fatalf("client_secret_expires_at %v (present %v), want %v", got, present, want)
			}
		})
	}
}

// An update may present the issued client_secret (RFC 7592 §2.2); it keeps
// the secret.
func TestUpdateWithTheIssuedSecret(t *testing.T) {
	e := newEnv(t, defaultPolicy())
	reg := e.register(`{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"client_secret_basic"}`)
	if reg.status != http.StatusCreated {
		t.Fatalf("register: %d %s", reg.status, reg.body)
	}
	ci := reg.info(t)
	before := e.stored(t, ci.ClientID)
	body, _ := json.Marshal(map[string]any{"client_id": ci.ClientID, "client_secret": ci.ClientSecret, "client_name": "Renamed",
		"redirect_uris": []string{"https://a.example/cb"}, "token_endpoint_auth_method": "client_secret_basic"})
	r := e.do(http.MethodPut, ci.RegistrationClientURI, ci.RegistrationAccessToken, string(body), nil)
	if r.status != http.StatusOK {
		t.Fatalf("update with the issued secret: %d %s", r.status, r.body)
	}
	after := e.stored(t, ci.ClientID)
	if after.Name != "Renamed" || string(after.SecretHash) != string(before.SecretHash) {
		t.Fatalf("stored %q, secret kept %v", after.Name, string(after.SecretHash) == string(before.SecretHash))
	}
	if got := r.info(t); got.ClientSecret != "" || got.ClientSecretExpiresAt == nil || *got.ClientSecretExpiresAt != 0 {
		t.Fatalf("update answered client_secret %q, expires_at %v; want no new secret, 0", got.ClientSecret, got.ClientSecretExpiresAt)
	}
}

// An update that changes token_endpoint_auth_method issues a secret to a
// client that becomes confidential, keeps the secret of one that stays
// confidential, and drops it from one that becomes public.
func TestUpdateChangesTheSecretWithTheMethod(t *testing.T) {
	cases := []struct {
		name, from, to string
		wantNew        bool // a new secret in the answer
		wantKept       bool // the stored secret is the one issued at registration
		wantSecret     bool // a secret stored at all
	}{
		{"public to client_secret_post issues one", "none", "client_secret_post", true, false, true},
		{"public to client_secret_basic issues one", "none", "client_secret_basic", true, false, true},
		{"client_secret_basic to client_secret_post keeps it", "client_secret_basic", "client_secret_post", false, true, true},
		{"client_secret_post to client_secret_basic keeps it", "client_secret_post", "client_secret_basic", false, true, true},
		{"client_secret_post to public drops it", "client_secret_post", "none", false, false, false},
		{"public stays without one", "none", "none", false, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultPolicy())
			reg := e.register(`{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"` + tc.from + `"}`)
			if reg.status != http.StatusCreated {
				t.Fatalf("register: %d %s", reg.status, reg.body)
			}
			ci := reg.info(t)
			before := e.stored(t, ci.ClientID)
			r := e.do(http.MethodPut, ci.RegistrationClientURI, ci.RegistrationAccessToken,
				`{"client_id":"`+ci.ClientID+`","redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"`+tc.to+`"}`, nil)
			if r.status != http.StatusOK {
				t.Fatalf("update: %d %s", r.status, r.body)
			}
			got := r.info(t)
			after := e.stored(t, ci.ClientID)
			if (got.ClientSecret != "") != tc.wantNew {
				t.Errorf("answered client_secret %q, want one: %v", got.ClientSecret, tc.wantNew)
			}
			if (got.ClientSecretExpiresAt != nil) != tc.wantSecret {
				t.Errorf("client_secret_expires_at %v, want present: %v", got.ClientSecretExpiresAt, tc.wantSecret)
			}
			if (len(after.SecretHash) > 0) != tc.wantSecret || after.Public == tc.wantSecret || after.TokenEndpointAuthMethod != tc.to {
				t.Errorf("stored secret %v, Public %v, method %q; want secret %v, method %q",
					len(after.SecretHash) > 0, after.Public, after.TokenEndpointAuthMethod, tc.wantSecret, tc.to)
			}
			if kept := len(before.SecretHash) > 0 && string(after.SecretHash) == string(before.SecretHash); kept != tc.wantKept {
				t.Errorf("registration's secret kept: %v, want %v", kept, tc.wantKept)
			}
		})
	}
}
