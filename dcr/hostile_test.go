package dcr_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/dcr"
)

// TestHostileRegistrationRequests sends malformed, hostile and replayed
// requests to /register and /register/{id}. Every one must get its RFC 7591
// / RFC 7592 / RFC 6750 error and status, never a 500, and write nothing.
// NUL bytes and invalid UTF-8 matter on PostgreSQL, which refuses to store
// them (backends_test.go runs this there too).
func TestHostileRegistrationRequests(t *testing.T) {
	e := newEnv(t, defaultPolicy())
	good := e.register(`{"client_name":"Good","redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"client_secret_basic"}`)
	if good.status != http.StatusCreated {
		t.Fatalf("setup registration: %d %s", good.status, good.body)
	}
	ci := good.info(t)

	nul := func(field, value string) string {
		return fmt.Sprintf(`{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"none",%q:%s}`, field, value)
	}
	cases := []struct {
		name   string
		method string
		path   string // after /register
		token  string
		body   string
		status int
		code   string
	}{
		{"refuses a NUL byte in client_name", "POST", "", "", nul("client_name", `"Cl\u0000aude"`), 400, "invalid_client_metadata"},
		{"refuses a NUL byte in a redirect URI", "POST", "", "", `{"redirect_uris":["https://a.example/c\u0000b"],"token_endpoint_auth_method":"none"}`, 400, "invalid_redirect_uri"},
		{"refuses a NUL byte in client_uri", "POST", "", "", nul("client_uri", `"https://a.example/\u0000"`), 400, "invalid_client_metadata"},
		{"refuses a NUL byte in logo_uri", "POST", "", "", nul("logo_uri", `"https://a.example/\u0000.png"`), 400, "invalid_client_metadata"},
		{"refuses a NUL byte in tos_uri", "POST", "", "", nul("tos_uri", `"https://a.example/\u0000"`), 400, "invalid_client_metadata"},
		{"refuses a NUL byte in policy_uri", "POST", "", "", nul("policy_uri", `"https://a.example/\u0000"`), 400, "invalid_client_metadata"},
		{"refuses a NUL byte in a contact", "POST", "", "", nul("contacts", `["a\u0000@a.example"]`), 400, "invalid_client_metadata"},
		{"refuses a NUL byte in software_id", "POST", "", "", nul("software_id", `"id\u0000"`), 400, "invalid_client_metadata"},
		{"refuses a NUL byte in software_version", "POST", "", "", nul("software_version", `"1\u0000"`), 400, "invalid_client_metadata"},
		{"refuses a NUL byte in scope", "POST", "", "", nul("scope", `"mcp:read\u0000"`), 400, "invalid_client_metadata"},
		{"refuses a NUL byte in application_type", "POST", "", "", nul("application_type", `"native\u0000"`), 400, "invalid_client_metadata"},
		{"refuses a NUL byte in a grant type", "POST", "", "", nul("grant_types", `["authorization_code\u0000"]`), 400, "invalid_client_metadata"},
		{"refuses a NUL byte in a jwks key id", "POST", "", "", `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"private_key_jwt","jwks":{"keys":[` + strings.Replace(publicJWK, `"kid":"k1"`, `"kid":"k\u00001"`, 1) + `]}}`, 400, "invalid_client_metadata"},
		{"refuses invalid UTF-8 in client_name", "POST", "", "", "{\"client_name\":\"Cl\xffaude\",\"redirect_uris\":[\"https://a.example/cb\"],\"token_endpoint_auth_method\":\"none\"}", 400, "invalid_client_metadata"},
		{"refuses invalid UTF-8 in a redirect URI", "POST", "", "", "{\"redirect_uris\":[\"https://a.example/c\xc3b\"],\"token_endpoint_auth_method\":\"none\"}", 400, "invalid_client_metadata"},
		{"refuses an unpaired surrogate in client_name", "POST", "", "", nul("client_name", `"Cl\ud800aude"`), 400, "invalid_client_metadata"},
		{"refuses a deeply nested jwks", "POST", "", "", `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"private_key_jwt","jwks":` + strings.Repeat(`{"a":`, 5000) + `1` + strings.Repeat(`}`, 5000) + `}`, 400, "invalid_client_metadata"},
		{"refuses a duplicate-key body smuggling a second client_name", "POST", "", "", `{"client_name":"A","client_name":"Cl\u0000aude","redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"none"}`, 400, "invalid_client_metadata"},
		{"refuses management without a token", "GET", "/" + ci.ClientID, "", "", 401, ""},
		{"refuses management with a token of another shape", "GET", "/" + ci.ClientID, "not-the-token", "", 401, "invalid_token"},
		{"refuses management with a NUL byte in the client id", "GET", "/abc%00def", ci.RegistrationAccessToken, "", 401, "invalid_token"},
		{"refuses management with invalid UTF-8 in the client id", "GET", "/abc%FFdef", ci.RegistrationAccessToken, "", 401, "invalid_token"},
		{"refuses management with a huge client id", "GET", "/" + strings.Repeat("x", 4000), ci.RegistrationAccessToken, "", 401, "invalid_token"},
		{"refuses another client's token for this client", "DELETE", "/unknown-client", ci.RegistrationAccessToken, "", 401, "invalid_token"},
		{"refuses an update with a NUL byte in client_name", "PUT", "/" + ci.ClientID, ci.RegistrationAccessToken,
			`{"client_id":"` + ci.ClientID + `","client_name":"G\u0000ood","redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"client_secret_basic"}`, 400, "invalid_client_metadata"},
		{"refuses an update with invalid UTF-8", "PUT", "/" + ci.ClientID, ci.RegistrationAccessToken,
			"{\"client_id\":\"" + ci.ClientID + "\",\"client_name\":\"G\xffood\",\"redirect_uris\":[\"https://a.example/cb\"],\"token_endpoint_auth_method\":\"client_secret_basic\"}", 400, "invalid_client_metadata"},
		{"refuses an update that is not JSON", "PUT", "/" + ci.ClientID, ci.RegistrationAccessToken, `client_name=x`, 400, "invalid_client_metadata"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := e.count()
			r := e.do(tc.method, e.srv.URL+"/register"+tc.path, tc.token, tc.body, nil)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d; body %s", r.status, tc.status, r.body)
			}
			if tc.code != "" {
				got := r.json(t)["error"]
				if got == nil {
					got = bearerError(r.header.Get("WWW-Authenticate"))
				}
				if got != tc.code {
					t.Errorf("error %v, want %s; body %s, WWW-Authenticate %q", got, tc.code, r.body, r.header.Get("WWW-Authenticate"))
				}
			}
			if n := e.count(); n != base {
				t.Errorf("%d clients stored, want %d", n, base)
			}
		})
	}
	// Nothing above changed the good client.
	c, err := e.store.GetClient(context.Background(), ci.ClientID)
	if err != nil || c.Name != "Good" {
		t.Errorf("the good client after the hostile requests: %+v, %v", c, err)
	}
}

// bearerError reads error="..." from an RFC 6750 challenge.
func bearerError(h string) any {
	i := strings.Index(h, `error="`)
	if i < 0 {
		return nil
	}
	rest := h[i+len(`error="`):]
	return rest[:strings.IndexByte(rest, '"')]
}

// TestCIMDRefusesNULAndInvalidUTF8 checks a client metadata document whose
// strings PostgreSQL cannot store is refused as invalid_client_metadata
// before it reaches storage.
func TestCIMDRefusesNULAndInvalidUTF8(t *testing.T) {
	d := newDocServer(t)
	cases := []struct {
		name string
		raw  string
	}{
		{"refuses a NUL byte in client_name", `{"client_id":"%s","client_name":"Cl\u0000aude","redirect_uris":["https://claude.ai/cb"],"token_endpoint_auth_method":"none"}`},
		{"refuses a NUL byte in a redirect URI", `{"client_id":"%s","client_name":"Claude","redirect_uris":["https://claude.ai/c\u0000b"],"token_endpoint_auth_method":"none"}`},
		{"refuses a NUL byte in client_uri", `{"client_id":"%s","client_name":"Claude","client_uri":"https://claude.ai/\u0000","redirect_uris":["https://claude.ai/cb"],"token_endpoint_auth_method":"none"}`},
		{"refuses invalid UTF-8 in client_name", "{\"client_id\":\"%s\",\"client_name\":\"Cl\xffaude\",\"redirect_uris\":[\"https://claude.ai/cb\"],\"token_endpoint_auth_method\":\"none\"}"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			re := newResolver(t, d, nil)
			path := fmt.Sprintf("/nul/%d", i)
			id := d.url(path)
			body := fmt.Sprintf(tc.raw, id)
			d.handle(path, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(body))
			})
			c, err := re.r.ResolveClient(context.Background(), id)
			var me *dcr.MetadataError
			if c != nil || !errors.As(err, &me) || me.Code == "" {
				t.Fatalf("ResolveClient = %v, %v; want a MetadataError", c, err)
			}
			if n, _ := re.store.CountClients(context.Background(), ""); n != 0 {
				t.Error("a refused document was stored")
			}
		})
	}
}
