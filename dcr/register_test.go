package dcr_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/dcr"
	"github.com/mcpauth/mcpauth/internal/secret"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
	"gopkg.in/yaml.v3"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// The registration profiles of real MCP clients (CLIENT-QUIRKS).
func TestClientProfilesRegister(t *testing.T) {
	cases := []struct {
		name       string
		body       string
		wantURIs   []string
		wantPublic bool
		wantApp    string
	}{
		{
			name:       "Cursor registers its three redirect URIs in one request",
			body:       `{"client_name":"Cursor","redirect_uris":["cursor://anysphere.cursor-mcp/oauth/callback","https://www.cursor.com/agents/mcp/oauth/callback","http://localhost:8787/callback"],"token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token"],"response_types":["code"]}`,
			wantURIs:   []string{"cursor://anysphere.cursor-mcp/oauth/callback", "https://www.cursor.com/agents/mcp/oauth/callback", "http://localhost:8787/callback"},
			wantPublic: true, wantApp: "native",
		},
		{
			name:       "VS Code registers loopback URIs with and without a port",
			body:       `{"client_name":"Visual Studio Code","redirect_uris":["http://127.0.0.1:33418/","http://127.0.0.1/","https://vscode.dev/redirect"],"token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token"]}`,
			wantURIs:   []string{"http://127.0.0.1:33418/", "http://127.0.0.1/", "https://vscode.dev/redirect"},
			wantPublic: true, wantApp: "native",
		},
		{
			name:       "Perplexity registers as a public client",
			body:       `{"client_name":"Perplexity","redirect_uris":["https://www.perplexity.ai/rest/connections/oauth_callback"],"token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token"],"response_types":["code"],"scope":"mcp:read mcp:write"}`,
			wantURIs:   []string{"https://www.perplexity.ai/rest/connections/oauth_callback"},
			wantPublic: true, wantApp: "web",
		},
		{
			name:       "claude.ai registers a public client with its callback",
			body:       `{"client_name":"Claude","redirect_uris":["https://claude.ai/api/mcp/auth_callback"],"token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token"],"response_types":["code"]}`,
			wantURIs:   []string{"https://claude.ai/api/mcp/auth_callback"},
			wantPublic: true, wantApp: "web",
		},
		{
			name:     "a client that omits token_endpoint_auth_method is confidential (RFC 7591 §2 default)",
			body:     `{"client_name":"Server app","redirect_uris":["https://app.example.org/cb"]}`,
			wantURIs: []string{"https://app.example.org/cb"},
			wantApp:  "web",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultPolicy())
			r := e.register(tc.body)
			if r.status != http.StatusCreated {
				t.Fatalf("status %d, body %s", r.status, r.body)
			}
			ci := r.info(t)
			if !slices.Equal(ci.RedirectURIs, tc.wantURIs) {
				t.Errorf("redirect_uris = %q, want %q", ci.RedirectURIs, tc.wantURIs)
			}
			c, err := e.store.GetClient(context.Background(), ci.ClientID)
			if err != nil {
				t.Fatalf("stored client: %v", err)
			}
			if c.Public != tc.wantPublic || c.ApplicationType != tc.wantApp || c.Source != "dcr" {
				t.Errorf("stored Public=%v ApplicationType=%q Source=%q, want %v %q dcr", c.Public, c.ApplicationType, c.Source, tc.wantPublic, tc.wantApp)
			}
			if tc.wantPublic != (ci.ClientSecret == "") {
				t.Errorf("client_secret present = %v for public = %v", ci.ClientSecret != "", tc.wantPublic)
			}
			if tc.wantPublic && (len(c.SecretHash) != 0 || ci.ClientSecretExpiresAt != nil) {
				t.Error("a public client has a secret hash or client_secret_expires_at")
			}
			if ci.RegistrationAccessToken == "" || ci.RegistrationClientURI != e.srv.URL+"/register/"+ci.ClientID {
				t.Errorf("registration_access_token %q / registration_client_uri %q", ci.RegistrationAccessToken, ci.RegistrationClientURI)
			}
			if ci.ClientIDIssuedAt != e.clock.Now().Unix() {
				t.Errorf("client_id_issued_at = %d", ci.ClientIDIssuedAt)
			}
			if got := r.header.Get("Cache-Control"); got != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store", got)
			}
			if r.header.Get("Access-Control-Allow-Origin") != "*" {
				t.Error("no CORS header on the registration response")
			}
		})
	}
}

func TestClaudeReRegistersOnEveryConnect(t *testing.T) {
	e := newEnv(t, defaultPolicy())
	body := `{"client_name":"Claude","redirect_uris":["https://claude.ai/api/mcp/auth_callback"],"token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token"]}`
	seen := map[string]bool{}
	for i := 0; i < 5; i++ {
		r := e.register(body)
		if r.status != http.StatusCreated {
			t.Fatalf("registration %d: status %d %s", i, r.status, r.body)
		}
		id := r.info(t).ClientID
		if seen[id] {
			t.Fatalf("client_id %s issued twice", id)
		}
		seen[id] = true
	}
	if e.count() != 5 {
		t.Fatalf("stored %d clients, want 5", e.count())
	}
	// A deleted (reaped) client is gone; the AS answers invalid_client and
	// Claude registers again, which works.
	for id := range seen {
		if err := e.store.DeleteClient(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		break
	}
	if r := e.register(body); r.status != http.StatusCreated {
		t.Fatalf("re-registration after deletion: %d", r.status)
	}
}

func TestVSCodeRedirectOnAnotherPortMatchesTheLoopbackRegistration(t *testing.T) {
	registered := []string{"http://127.0.0.1:33418/", "http://127.0.0.1/", "http://localhost:8787/callback", "http://[::1]/cb",
		"https://127.0.0.1/secure", "http://example.com/cb", "http://10.0.0.1/cb"}
	cases := []struct {
		name      string
		requested string
		want      bool
	}{
		{"the registered port matches", "http://127.0.0.1:33418/", true},
		{"an ephemeral port matches the portless registration", "http://127.0.0.1:51234/", true},
		{"a different path does not match", "http://127.0.0.1:51234/other", false},
		{"a localhost request does not match a 127.0.0.1 registration", "http://localhost:51234/", false},
		{"localhost on another port matches the localhost registration", "http://localhost:51234/callback", true},
		{"127.0.0.1 does not match a localhost registration", "http://127.0.0.1:51234/callback", false},
		{"[::1] on any port matches the portless registration", "http://[::1]:51234/cb", true},
		{"https on loopback does not match an http registration", "https://127.0.0.1:51234/", false},
		{"a query that was not registered does not match", "http://127.0.0.1:51234/?x=1", false},
		{"userinfo on another port does not match", "http://evil.example@127.0.0.1:51234/", false},
		{"a fragment on another port does not match", "http://127.0.0.1:51234/#x", false},
		{"http on loopback does not match an https registration", "http://127.0.0.1:51234/secure", false},
		{"the port exception is for loopback hosts only", "http://example.com:8080/cb", false},
		{"the port exception is not for other addresses", "http://10.0.0.1:8080/cb", false},
		{"an exact registration still matches", "https://127.0.0.1/secure", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := dcr.MatchRedirectURI(registered, tc.requested); got != tc.want {
				t.Fatalf("MatchRedirectURI(%q) = %v, want %v", tc.requested, got, tc.want)
			}
		})
	}
}

func TestPerplexityCanBeMadeConfidential(t *testing.T) {
	const perplexity = "https://www.perplexity.ai/rest/connections/oauth_callback"
	cases := []struct {
		name       string
		force      []string
		method     string // token_endpoint_auth_method registered; "" means none
		wantSecret bool
		wantMethod string
	}{
		{"by default a public registration stays public", nil, "", false, "none"},
		{"a listed redirect URI upgrades it to client_secret_post with a secret", []string{perplexity}, "", true, "client_secret_post"},
		{"an unlisted redirect URI is not upgraded", []string{"https://other.example/cb"}, "", false, "none"},
		{"a listed redirect URI keeps a confidential registration's method", []string{perplexity}, "client_secret_basic", true, "client_secret_basic"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := defaultPolicy()
			p.ForceConfidentialRedirectURIs = tc.force
			e := newEnv(t, p)
			method := tc.method
			if method == "" {
				method = "none"
			}
			r := e.register(`{"client_name":"Perplexity","redirect_uris":["` + perplexity + `"],"token_endpoint_auth_method":"` + method + `","grant_types":["authorization_code","refresh_token"],"scope":"offline_access"}`)
			if r.status != http.StatusCreated {
				t.Fatalf("status %d %s", r.status, r.body)
			}
			ci := r.info(t)
			c := e.stored(t, ci.ClientID)
			if (ci.ClientSecret != "") != tc.wantSecret || c.Public == tc.wantSecret {
				t.Fatalf("secret %q, Public %v", ci.ClientSecret, c.Public)
			}
			if ci.TokenEndpointAuthMethod != tc.wantMethod || c.TokenEndpointAuthMethod != tc.wantMethod {
				t.Errorf("method %q / %q", ci.TokenEndpointAuthMethod, c.TokenEndpointAuthMethod)
			}
			// offline_access is not in the policy: narrowed, not refused.
			if ci.Scope != "mcp:read mcp:write" {
				t.Errorf("scope %q", ci.Scope)
			}
		})
	}
}

func TestRegistrationRefusals(t *testing.T) {
	long := strings.Repeat("a", 1025)
	cases := []struct {
		name     string
		body     string
		ctype    string
		wantCode string
		wantDesc string
	}{
		{"refuses a redirect URI with a fragment", `{"redirect_uris":["https://a.example/cb#x"],"token_endpoint_auth_method":"none"}`, "", "invalid_redirect_uri", "redirect_uris[0]: has a fragment"},
		{"refuses a redirect URI with userinfo", `{"redirect_uris":["https://u:p@a.example/cb"],"token_endpoint_auth_method":"none"}`, "", "invalid_redirect_uri", "userinfo"},
		{"refuses a wildcard redirect URI", `{"redirect_uris":["https://*.a.example/cb"],"token_endpoint_auth_method":"none"}`, "", "invalid_redirect_uri", "wildcard"},
		{"refuses http on a public host", `{"redirect_uris":["http://a.example/cb"],"token_endpoint_auth_method":"none"}`, "", "invalid_redirect_uri", "http on a host other than"},
		{"refuses http on 10.x", `{"redirect_uris":["http://10.0.0.1/cb"],"token_endpoint_auth_method":"none"}`, "", "invalid_redirect_uri", "http on a host other than"},
		{"refuses a private-use scheme for a web client", `{"redirect_uris":["cursor://anysphere.cursor-mcp/cb"],"application_type":"web","token_endpoint_auth_method":"none"}`, "", "invalid_redirect_uri", "application_type"},
		{"refuses a javascript: redirect", `{"redirect_uris":["javascript://x/%0aalert(1)"],"application_type":"native","token_endpoint_auth_method":"none"}`, "", "invalid_redirect_uri", "forbidden scheme"},
		{"refuses a redirect URI with a Unicode look-alike host", `{"redirect_uris":["https://cl\u0430ude.ai/api/mcp/auth_callback"],"token_endpoint_auth_method":"none"}`, "", "invalid_redirect_uri", "non-ASCII"},
		{"refuses a jwks_uri with a Unicode host", `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"private_key_jwt","jwks_uri":"https://\u0430.example/jwks"}`, "", "invalid_client_metadata", "jwks_uri"},
		{"refuses a relative redirect URI", `{"redirect_uris":["/cb"],"token_endpoint_auth_method":"none"}`, "", "invalid_redirect_uri", "absolute"},
		{"refuses a missing redirect_uris for the code grant", `{"client_name":"x","token_endpoint_auth_method":"none"}`, "", "invalid_redirect_uri", "required"},
		{"refuses more redirect URIs than the cap", `{"redirect_uris":["https://a.example/1","https://a.example/2","https://a.example/3","https://a.example/4","https://a.example/5","https://a.example/6","https://a.example/7","https://a.example/8","https://a.example/9","https://a.example/10","https://a.example/11"],"token_endpoint_auth_method":"none"}`, "", "invalid_redirect_uri", "more than 10"},
		{"refuses a client_name over the length cap", `{"client_name":"` + long + `","redirect_uris":["https://a.example/cb"]}`, "", "invalid_client_metadata", "client_name: longer than 1024"},
		{"refuses a client_name with control characters", `{"client_name":"Claude\u0007","redirect_uris":["https://a.example/cb"]}`, "", "invalid_client_metadata", "client_name: contains characters"},
		{"refuses a client_name with a bidi override", `{"client_name":"evil\u202eedualC","redirect_uris":["https://a.example/cb"]}`, "", "invalid_client_metadata", "client_name"},
		{"refuses an unknown auth method", `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"tls_client_auth"}`, "", "invalid_client_metadata", "token_endpoint_auth_method"},
		{"refuses private_key_jwt without keys", `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"private_key_jwt"}`, "", "invalid_client_metadata", "needs jwks or jwks_uri"},
		{"refuses jwks together with jwks_uri", `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"private_key_jwt","jwks_uri":"https://a.example/jwks","jwks":{"keys":[]}}`, "", "invalid_client_metadata", "only one of them"},
		{"refuses an http jwks_uri", `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"private_key_jwt","jwks_uri":"http://a.example/jwks"}`, "", "invalid_client_metadata", "jwks_uri"},
		{"refuses a jwks holding a private key", `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"private_key_jwt","jwks":{"keys":[` + privateJWK + `]}}`, "", "invalid_client_metadata", "not a valid public key"},
		{"refuses an empty jwks", `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"private_key_jwt","jwks":{"keys":[]}}`, "", "invalid_client_metadata", "jwks"},
		{"refuses a jwks that is not an object", `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"private_key_jwt","jwks":"x"}`, "", "invalid_client_metadata", "jwks: must be a JSON Web Key Set object"},
		{"refuses a jwks that is an array", `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"private_key_jwt","jwks":[{"kty":"EC"}]}`, "", "invalid_client_metadata", "jwks: must be a JSON Web Key Set object"},
		{"refuses more than 20 contacts", `{"redirect_uris":["https://a.example/cb"],"contacts":[` + strings.Repeat(`"a@a.example",`, 20) + `"a@a.example"]}`, "", "invalid_client_metadata", "contacts: more than 20 entries"},
		{"refuses client_credentials when the policy does not allow it", `{"grant_types":["client_credentials"],"token_endpoint_auth_method":"client_secret_basic"}`, "", "invalid_client_metadata", "grant_types"},
		{"refuses a registration asking only for grants nobody gets", `{"grant_types":["urn:ietf:params:oauth:grant-type:jwt-bearer","implicit"],"redirect_uris":["https://a.example/cb"]}`, "", "invalid_client_metadata", "grant_types"},
		{"refuses redirect_uris of the wrong type", `{"redirect_uris":"https://a.example/cb"}`, "", "invalid_client_metadata", "redirect_uris: wrong JSON type"},
		{"refuses an unknown application_type", `{"redirect_uris":["https://a.example/cb"],"application_type":"desktop"}`, "", "invalid_client_metadata", "application_type"},
		{"refuses a client_uri that is not https", `{"redirect_uris":["https://a.example/cb"],"client_uri":"javascript:alert(1)"}`, "", "invalid_client_metadata", "client_uri"},
		{"refuses a body that is not JSON", `client_name=x`, "", "invalid_client_metadata", "JSON object"},
		{"refuses a JSON array", `[{"redirect_uris":["https://a.example/cb"]}]`, "", "invalid_client_metadata", "JSON object"},
		{"refuses truncated JSON", `{"redirect_uris":["https://a.example/cb"]`, "", "invalid_client_metadata", "not valid JSON"},
		{"refuses a form-encoded content type", `{"redirect_uris":["https://a.example/cb"]}`, "application/x-www-form-urlencoded", "invalid_client_metadata", "Content-Type"},
		{"refuses a body over the size cap", `{"client_name":"` + strings.Repeat("x", 17000) + `"}`, "", "invalid_client_metadata", "larger than 16384"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultPolicy())
			hdr := map[string]string{}
			if tc.ctype != "" {
				hdr["Content-Type"] = tc.ctype
			}
			r := e.do(http.MethodPost, e.srv.URL+"/register", "", tc.body, hdr)
			if r.status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400; body %s", r.status, r.body)
			}
			m := r.json(t)
			if m["error"] != tc.wantCode {
				t.Errorf("error = %v, want %s", m["error"], tc.wantCode)
			}
			if d, _ := m["error_description"].(string); !strings.Contains(d, tc.wantDesc) {
				t.Errorf("error_description = %q, want it to mention %q", d, tc.wantDesc)
			}
			if n := e.count(); n != 0 {
				t.Errorf("a refused registration stored %d clients", n)
			}
		})
	}
}

const privateJWK = `{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0","d":"jpsQnnGQmL-YBIffH1136cspYG6-0iY7X1fCE9-E9LI"}`
const publicJWK = `{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0","kid":"k1"}`

func TestRegistrantCannotRaiseItsPrivileges(t *testing.T) {
	policyScopes := []string{"mcp:read", "mcp:write"}
	// wantScopes is the echoed scope (what the client may use); wantStored
	// the client's default scope, none when it named no policy scope.
	cases := []struct {
		name       string
		scope      string
		wantScopes []string
		wantStored []string
	}{
		{"scope * gets only the policy scopes", "*", policyScopes, nil},
		{"unknown scopes are dropped", "admin mcp:read offline_access", []string{"mcp:read"}, []string{"mcp:read"}},
		{"no scope gets the policy scopes", "", policyScopes, nil},
		{"a subset is kept as requested", "mcp:write", []string{"mcp:write"}, []string{"mcp:write"}},
		{"duplicates collapse", "mcp:read mcp:read", []string{"mcp:read"}, []string{"mcp:read"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultPolicy())
			body := mustJSON(map[string]any{"redirect_uris": []string{"https://a.example/cb"}, "token_endpoint_auth_method": "none",
				"scope": tc.scope, "resource": "https://evil.example/", "resources": []string{"https://evil.example/"}, "audience": "https://evil.example/"})
			r := e.register(body)
			if r.status != http.StatusCreated {
				t.Fatalf("status %d %s", r.status, r.body)
			}
			ci := r.info(t)
			if ci.Scope != strings.Join(tc.wantScopes, " ") {
				t.Errorf("scope = %q, want %q", ci.Scope, strings.Join(tc.wantScopes, " "))
			}
			c := e.stored(t, ci.ClientID)
			if !slices.Equal(c.Scopes, tc.wantStored) {
				t.Errorf("stored scopes = %q, want %q", c.Scopes, tc.wantStored)
			}
			if !slices.Equal(c.Resources, []string{"https://mcp.example.com/mcp"}) {
				t.Errorf("stored resources = %q, want only the policy's", c.Resources)
			}
		})
	}
}

func TestGrantTypesAreNarrowed(t *testing.T) {
	cases := []struct {
		name    string
		allowCC bool
		body    string
		want    []string
	}{
		{"jwt-bearer is dropped, the rest kept", false, `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token","urn:ietf:params:oauth:grant-type:jwt-bearer"]}`, []string{"authorization_code", "refresh_token"}},
		{"client_credentials is dropped when the policy does not allow it", false, `{"redirect_uris":["https://a.example/cb"],"grant_types":["authorization_code","client_credentials"]}`, []string{"authorization_code"}},
		{"client_credentials is kept for a confidential client when allowed", true, `{"grant_types":["client_credentials"],"token_endpoint_auth_method":"client_secret_basic"}`, []string{"client_credentials"}},
		{"client_credentials is dropped for a public client even when allowed", true, `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"none","grant_types":["authorization_code","client_credentials"]}`, []string{"authorization_code"}},
		{"implicit is dropped", false, `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"none","grant_types":["implicit","authorization_code"],"response_types":["token","code"]}`, []string{"authorization_code"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := defaultPolicy()
			p.AllowClientCredentials = tc.allowCC
			e := newEnv(t, p)
			r := e.register(tc.body)
			if r.status != http.StatusCreated {
				t.Fatalf("status %d %s", r.status, r.body)
			}
			ci := r.info(t)
			if !slices.Equal(ci.GrantTypes, tc.want) {
				t.Errorf("grant_types = %q, want %q", ci.GrantTypes, tc.want)
			}
			c := e.stored(t, ci.ClientID)
			if !slices.Equal(c.GrantTypes, tc.want) {
				t.Errorf("stored grant types = %q", c.GrantTypes)
			}
			if slices.Contains(tc.want, "authorization_code") != slices.Equal(c.ResponseTypes, []string{"code"}) {
				t.Errorf("response types = %q", c.ResponseTypes)
			}
		})
	}
}

func TestGrantTypesRefusalNamesWhatIsAllowed(t *testing.T) {
	cases := []struct {
		name    string
		allowCC bool
		want    string
	}{
		{"without client_credentials in the policy", false, `grant_types: none of ["implicit"] may be used by this client (allowed: authorization_code, refresh_token)`},
		{"with client_credentials in the policy", true, `grant_types: none of ["implicit"] may be used by this client (allowed: authorization_code, refresh_token, client_credentials for confidential clients)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := defaultPolicy()
			p.AllowClientCredentials = tc.allowCC
			e := newEnv(t, p)
			r := e.register(`{"redirect_uris":["https://a.example/cb"],"grant_types":["implicit"]}`)
			if m := r.json(t); r.status != http.StatusBadRequest || m["error"] != "invalid_client_metadata" || m["error_description"] != tc.want {
				t.Fatalf("%d %v; want 400 invalid_client_metadata %q", r.status, m, tc.want)
			}
		})
	}
}

func TestConfidentialClientSecretIsStoredHashed(t *testing.T) {
	p := defaultPolicy()
	p.SecretLifetime = 30 * 24 * time.Hour
	e := newEnv(t, p)
	r := e.register(`{"client_name":"Backend","redirect_uris":["https://app.example.org/cb"],"token_endpoint_auth_method":"client_secret_post"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	ci := r.info(t)
	if ci.ClientSecret == "" || ci.ClientSecretExpiresAt == nil || *ci.ClientSecretExpiresAt != e.clock.Now().Add(p.SecretLifetime).Unix() {
		t.Fatalf("client_secret %q, expires %v", ci.ClientSecret, ci.ClientSecretExpiresAt)
	}
	c := e.stored(t, ci.ClientID)
	hs, _ := secret.NewHasher(testSecret, dcr.PurposeClientSecret)
	if !hs.Equal(c.SecretHash, ci.ClientSecret) {
		t.Error("stored hash does not verify with the client-secret hasher")
	}
	hr, _ := secret.NewHasher(testSecret, dcr.PurposeRegistrationToken)
	if !hr.Equal(c.RegistrationTokenHash, ci.RegistrationAccessToken) {
		t.Error("stored registration token hash does not verify")
	}
	for _, plain := range []string{ci.ClientSecret, ci.RegistrationAccessToken} {
		if strings.Contains(string(c.SecretHash)+string(c.RegistrationTokenHash)+string(c.Metadata), plain) {
			t.Error("a plain-text secret reached storage")
		}
	}
	if c.Public || c.TokenEndpointAuthMethod != "client_secret_post" || !c.SecretExpiresAt.Equal(e.clock.Now().Add(p.SecretLifetime)) {
		t.Errorf("stored client %+v", c)
	}
}

func TestPrivateKeyJWTRegistration(t *testing.T) {
	e := newEnv(t, defaultPolicy())
	r := e.register(`{"client_name":"Agent","redirect_uris":["https://agent.example/cb"],"token_endpoint_auth_method":"private_key_jwt","jwks":{"keys":[` + publicJWK + `]}}`)
	if r.status != http.StatusCreated {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	ci := r.info(t)
	if ci.ClientSecret != "" {
		t.Error("a private_key_jwt client got a shared secret")
	}
	c := e.stored(t, ci.ClientID)
	if c.Public || len(c.JWKS) == 0 || c.TokenEndpointAuthMethod != "private_key_jwt" {
		t.Errorf("stored Public=%v JWKS=%q method=%q", c.Public, c.JWKS, c.TokenEndpointAuthMethod)
	}
	r = e.register(`{"client_name":"Agent","redirect_uris":["https://agent.example/cb"],"token_endpoint_auth_method":"private_key_jwt","jwks_uri":"https://agent.example/jwks.json"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("jwks_uri registration: status %d %s", r.status, r.body)
	}
	c = e.stored(t, r.info(t).ClientID)
	if c.JWKSURI != "https://agent.example/jwks.json" {
		t.Errorf("stored JWKSURI %q", c.JWKSURI)
	}
}

func TestRFC7592Management(t *testing.T) {
	e := newEnv(t, defaultPolicy())
	r := e.register(`{"client_name":"Cursor","redirect_uris":["cursor://anysphere.cursor-mcp/oauth/callback"],"token_endpoint_auth_method":"none"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	ci := r.info(t)
	uri, tok := ci.RegistrationClientURI, ci.RegistrationAccessToken
	other := e.register(`{"client_name":"Other","redirect_uris":["https://o.example/cb"],"token_endpoint_auth_method":"none"}`).info(t)

	unauthorized := []struct {
		name, method, url, token string
	}{
		{"reading without a token is 401", http.MethodGet, uri, ""},
		{"reading with a wrong token is 401", http.MethodGet, uri, "wrong"},
		{"reading with another client's token is 401", http.MethodGet, uri, other.RegistrationAccessToken},
		{"reading an unknown client is 401, not 404", http.MethodGet, e.srv.URL + "/register/nope", tok},
		{"updating with a wrong token is 401", http.MethodPut, uri, "wrong"},
		{"deleting with a wrong token is 401", http.MethodDelete, uri, "wrong"},
	}
	for _, tc := range unauthorized {
		t.Run(tc.name, func(t *testing.T) {
			body := ""
			if tc.method == http.MethodPut {
				body = `{"client_id":"` + ci.ClientID + `","redirect_uris":["https://x.example/cb"],"token_endpoint_auth_method":"none"}`
			}
			r := e.do(tc.method, tc.url, tc.token, body, nil)
			if r.status != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", r.status)
			}
			if m := r.json(t); m["error"] != "invalid_token" {
				t.Errorf("error = %v", m["error"])
			}
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q", r.header.Get("WWW-Authenticate"))
			}
		})
	}
	if c := e.stored(t, ci.ClientID); !slices.Equal(c.RedirectURIs, ci.RedirectURIs) {
		t.Fatal("a refused update changed the client")
	}

	t.Run("reading with the right token returns the registration", func(t *testing.T) {
		r := e.do(http.MethodGet, uri, tok, "", nil)
		if r.status != http.StatusOK {
			t.Fatalf("status %d %s", r.status, r.body)
		}
		got := r.info(t)
		if got.ClientID != ci.ClientID || !slices.Equal(got.RedirectURIs, ci.RedirectURIs) || got.ClientName != "Cursor" || got.RegistrationClientURI != uri {
			t.Errorf("read %+v", got)
		}
		if got.RegistrationAccessToken != "" || got.ClientSecret != "" {
			t.Error("a read echoed a secret")
		}
	})
	updates := []struct {
		name, body string
		status     int
		code       string
	}{
		{"an update naming another client_id is refused", `{"client_id":"other","redirect_uris":["https://x.example/cb"]}`, 400, "invalid_client_metadata"},
		{"an update without client_id is refused", `{"redirect_uris":["https://x.example/cb"]}`, 400, "invalid_client_metadata"},
		{"an update sending registration_access_token is refused", `{"client_id":"` + ci.ClientID + `","registration_access_token":"x","redirect_uris":["https://x.example/cb"]}`, 400, "invalid_client_metadata"},
		{"an update with a bad redirect URI is refused", `{"client_id":"` + ci.ClientID + `","redirect_uris":["http://x.example/cb"],"token_endpoint_auth_method":"none"}`, 400, "invalid_redirect_uri"},
		{"an update asking for scope * gets no more than policy", `{"client_id":"` + ci.ClientID + `","client_name":"Cursor 2","redirect_uris":["https://x.example/cb"],"token_endpoint_auth_method":"none","scope":"*"}`, 200, ""},
	}
	for _, tc := range updates {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(http.MethodPut, uri, tok, tc.body, nil)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.code != "" {
				if m := r.json(t); m["error"] != tc.code {
					t.Errorf("error = %v, want %s", m["error"], tc.code)
				}
				return
			}
			got := r.info(t)
			c := e.stored(t, ci.ClientID)
			if got.ClientName != "Cursor 2" || c.Name != "Cursor 2" || !slices.Equal(c.RedirectURIs, []string{"https://x.example/cb"}) {
				t.Errorf("update not applied: %+v / %+v", got, c)
			}
			// The update names no scope: no default scope of its own.
			if len(c.Scopes) != 0 {
				t.Errorf("scopes after update %q, want none", c.Scopes)
			}
			if !c.CreatedAt.Equal(e.clock.Now()) || got.ClientIDIssuedAt != e.clock.Now().Unix() {
				t.Error("update changed the issue time")
			}
		})
	}
	t.Run("an update to a confidential method issues a secret", func(t *testing.T) {
		r := e.do(http.MethodPut, uri, tok, `{"client_id":"`+ci.ClientID+`","redirect_uris":["https://x.example/cb"],"token_endpoint_auth_method":"client_secret_basic"}`, nil)
		if r.status != 200 {
			t.Fatalf("status %d %s", r.status, r.body)
		}
		got := r.info(t)
		c := e.stored(t, ci.ClientID)
		hs, _ := secret.NewHasher(testSecret, dcr.PurposeClientSecret)
		if got.ClientSecret == "" || c.Public || !hs.Equal(c.SecretHash, got.ClientSecret) {
			t.Fatalf("no usable secret: %+v", got)
		}
		// Updating again while presenting a wrong client_secret is refused.
		r = e.do(http.MethodPut, uri, tok, `{"client_id":"`+ci.ClientID+`","client_secret":"wrong","redirect_uris":["https://x.example/cb"],"token_endpoint_auth_method":"client_secret_basic"}`, nil)
		if r.status != 400 || !strings.Contains(string(r.body), `"error":"invalid_client_metadata"`) || !strings.Contains(string(r.body), "does not match the issued secret") {
			t.Fatalf("wrong client_secret in update: status %d %s, want 400 invalid_client_metadata naming client_secret", r.status, r.body)
		}
		after := e.stored(t, ci.ClientID)
		if !slices.Equal(after.RedirectURIs, c.RedirectURIs) || !bytes.Equal(after.SecretHash, c.SecretHash) || !after.UpdatedAt.Equal(c.UpdatedAt) || !bytes.Equal(after.Metadata, c.Metadata) {
			t.Errorf("the refused update changed the stored client: %+v, was %+v", after, c)
		}
	})
	t.Run("deleting with the right token removes the client", func(t *testing.T) {
		r := e.do(http.MethodDelete, uri, tok, "", nil)
		if r.status != http.StatusNoContent {
			t.Fatalf("status %d %s", r.status, r.body)
		}
		if _, err := e.store.GetClient(context.Background(), ci.ClientID); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("client still stored: %v", err)
		}
		if r := e.do(http.MethodGet, uri, tok, "", nil); r.status != http.StatusUnauthorized {
			t.Fatalf("read after delete: %d", r.status)
		}
	})
}

func TestRegistrationPolicy(t *testing.T) {
	cursor := `{"client_name":"Cursor","redirect_uris":["cursor://anysphere.cursor-mcp/oauth/callback","https://www.cursor.com/agents/mcp/oauth/callback","http://localhost:8787/callback"],"token_endpoint_auth_method":"none"}`
	cases := []struct {
		name   string
		policy func(*dcr.Policy)
		token  string
		body   string
		status int
		code   string
	}{
		{"closed registration refuses anonymous registrants", func(p *dcr.Policy) { p.Open = false }, "", cursor, 401, "invalid_token"},
		{"closed registration without configured tokens refuses any token", func(p *dcr.Policy) { p.Open = false }, "guess", cursor, 401, "invalid_token"},
		{"closed registration refuses a wrong initial access token", func(p *dcr.Policy) { p.Open = false; p.InitialAccessTokens = []string{"iat-1"} }, "iat-2", cursor, 401, "invalid_token"},
		{"closed registration accepts a configured initial access token", func(p *dcr.Policy) { p.Open = false; p.InitialAccessTokens = []string{"iat-1", "iat-2"} }, "iat-2", cursor, 201, ""},
		{"a denied redirect host is refused", func(p *dcr.Policy) { p.RedirectHostDeny = []string{"*.cursor.com"} }, "", cursor, 400, "invalid_redirect_uri"},
		{"a host missing from the allow list is refused", func(p *dcr.Policy) { p.RedirectHostAllow = []string{"claude.ai", "localhost"} }, "", cursor, 400, "invalid_redirect_uri"},
		{"hosts all on the allow list are accepted", func(p *dcr.Policy) {
			p.RedirectHostAllow = []string{"anysphere.cursor-mcp", "*.cursor.com", "localhost"}
		}, "", cursor, 201, ""},
		{"deny wins over allow", func(p *dcr.Policy) {
			p.RedirectHostAllow = []string{"anysphere.cursor-mcp", "*.cursor.com", "localhost"}
			p.RedirectHostDeny = []string{"localhost"}
		}, "", cursor, 400, "invalid_redirect_uri"},
		{"a smaller string cap applies", func(p *dcr.Policy) { p.MaxStringLength = 5 }, "", cursor, 400, "invalid_client_metadata"},
		{"a smaller redirect URI cap applies", func(p *dcr.Policy) { p.MaxRedirectURIs = 2 }, "", cursor, 400, "invalid_redirect_uri"},
		{"a smaller body cap applies", func(p *dcr.Policy) { p.MaxBodyBytes = 64 }, "", cursor, 400, "invalid_client_metadata"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := defaultPolicy()
			tc.policy(&p)
			e := newEnv(t, p)
			r := e.do(http.MethodPost, e.srv.URL+"/register", tc.token, tc.body, nil)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			want := 0
			if tc.status == 201 {
				want = 1
			} else if m := r.json(t); m["error"] != tc.code {
				t.Errorf("error = %v, want %s", m["error"], tc.code)
			}
			if e.count() != want {
				t.Errorf("stored %d clients, want %d", e.count(), want)
			}
		})
	}
}

func TestRegistrationFloodIsLimited(t *testing.T) {
	p := defaultPolicy()
	p.RateLimit = dcr.RateLimit{PerMinute: 6, Burst: 5}
	e := newEnv(t, p)
	body := `{"client_name":"Claude","redirect_uris":["https://claude.ai/api/mcp/auth_callback"],"token_endpoint_auth_method":"none"}`
	created, limited := 0, 0
	for i := 0; i < 50; i++ {
		// A forged X-Forwarded-For does not buy a new bucket: no proxy is trusted.
		r := e.do(http.MethodPost, e.srv.URL+"/register", "", body, map[string]string{"X-Forwarded-For": "198.51.100." + string(rune('0'+i%10))})
		switch r.status {
		case http.StatusCreated:
			created++
		case http.StatusTooManyRequests:
			limited++
			// 5 at one instant fill the bucket (one per 10 s, burst 5): the
			// next is allowed in 10 s, announced rounded up as 11.
			if m := r.json(t); m["error"] != "temporarily_unavailable" || r.header.Get("Retry-After") != "11" {
				t.Fatalf("429 body %s, Retry-After %q, want 11", r.body, r.header.Get("Retry-After"))
			}
		default:
			t.Fatalf("status %d %s", r.status, r.body)
		}
	}
	if created != 5 || limited != 45 {
		t.Fatalf("created %d, limited %d; want 5 and 45", created, limited)
	}
	if n := e.count(); n != 5 {
		t.Fatalf("storage holds %d clients, want 5", n)
	}
	// Ten seconds later one more token has dripped in (6 a minute).
	e.clock.Advance(10 * time.Second)
	if r := e.register(body); r.status != http.StatusCreated {
		t.Fatalf("after refill: %d", r.status)
	}
	if r := e.register(body); r.status != http.StatusTooManyRequests {
		t.Fatalf("second after refill: %d", r.status)
	}
}

func TestTrustedProxyForwardedAddressesGetTheirOwnBuckets(t *testing.T) {
	p := defaultPolicy()
	p.RateLimit = dcr.RateLimit{PerMinute: 1, Burst: 1}
	p.TrustedProxies = []string{"127.0.0.0/8", "::1"}
	e := newEnv(t, p)
	body := `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"none"}`
	for i, tc := range []struct {
		xff  string
		want int
	}{
		{"203.0.113.1", 201},
		{"203.0.113.2", 201},
		{"203.0.113.1", 429},
		{"203.0.113.1, 127.0.0.1", 429}, // trusted hops on the right are skipped
		{"10.9.9.9, 203.0.113.3", 201},  // the rightmost untrusted entry counts, not the spoofable left one
		{"10.9.9.9, 203.0.113.3", 429},
	} {
		r := e.do(http.MethodPost, e.srv.URL+"/register", "", body, map[string]string{"X-Forwarded-For": tc.xff})
		if r.status != tc.want {
			t.Fatalf("request %d (XFF %s): status %d, want %d", i, tc.xff, r.status, tc.want)
		}
	}
}

func TestCORSPreflight(t *testing.T) {
	e := newEnv(t, defaultPolicy())
	for path, methods := range map[string]string{"/register": "POST, OPTIONS", "/register/some-id": "GET, PUT, DELETE, OPTIONS"} {
		r := e.do(http.MethodOptions, e.srv.URL+path, "", "", map[string]string{
			"Origin": "http://localhost:6274", "Access-Control-Request-Method": "POST",
			"Access-Control-Request-Headers": "content-type, authorization"})
		if r.status != http.StatusNoContent || r.header.Get("Access-Control-Allow-Origin") != "*" ||
			!strings.Contains(r.header.Get("Access-Control-Allow-Headers"), "Authorization") ||
			r.header.Get("Access-Control-Allow-Methods") != methods {
			t.Errorf("%s preflight: %d %v; want Access-Control-Allow-Methods %q", path, r.status, r.header, methods)
		}
	}
	r := e.do(http.MethodGet, e.srv.URL+"/register", "", "", nil)
	if r.status != http.StatusMethodNotAllowed || r.json(t)["error"] != "invalid_request" {
		t.Errorf("GET /register: %d %s", r.status, r.body)
	}
}

func TestReapDeletesNeverUsedAndIdleClients(t *testing.T) {
	p := defaultPolicy()
	p.ReapNeverUsedAfter = 24 * time.Hour
	p.ReapIdleAfter = 30 * 24 * time.Hour
	e := newEnv(t, p)
	body := `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"none"}`
	ctx := context.Background()
	neverUsed := e.register(body).info(t).ClientID
	usedRecently := e.register(body).info(t).ClientID
	usedLongAgo := e.register(body).info(t).ClientID
	start := e.clock.Now()
	if err := e.store.TouchClient(ctx, usedLongAgo, start.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := e.store.TouchClient(ctx, usedRecently, start.Add(40*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := e.store.CreateClient(ctx, &storage.Client{ID: "static", Source: "config", CreatedAt: start}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.h.Reap(ctx, start.Add(23*time.Hour)); err != nil || n != 0 {
		t.Fatalf("Reap before any deadline: %d, %v", n, err)
	}
	n, err := e.h.Reap(ctx, start.Add(41*24*time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("Reap = %d, %v; want 2", n, err)
	}
	for id, want := range map[string]bool{neverUsed: false, usedLongAgo: false, usedRecently: true, "static": true} {
		_, err := e.store.GetClient(ctx, id)
		if (err == nil) != want {
			t.Errorf("client %s present = %v, want %v", id, err == nil, want)
		}
	}
}

func TestReapCanBeDisabled(t *testing.T) {
	p := defaultPolicy()
	p.ReapNeverUsedAfter, p.ReapIdleAfter = -1, -1
	e := newEnv(t, p)
	e.register(`{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"none"}`)
	if n, err := e.h.Reap(context.Background(), e.clock.Now().Add(1000*24*time.Hour)); err != nil || n != 0 || e.count() != 1 {
		t.Fatalf("Reap = %d, %v, count %d", n, err, e.count())
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	cases := []struct {
		name string
		cfg  func(*dcr.Config)
	}{
		{"without a store", func(c *dcr.Config) { c.Store = nil }},
		{"without an endpoint", func(c *dcr.Config) { c.Endpoint = "" }},
		{"with a relative endpoint", func(c *dcr.Config) { c.Endpoint = "/register" }},
		{"with a short secret", func(c *dcr.Config) { c.Secret = []byte("short") }},
		{"with a resource that is not canonicalisable", func(c *dcr.Config) { c.Policy.Resources = []string{"ftp://x"} }},
		{"with a scope containing a space", func(c *dcr.Config) { c.Policy.Scopes = []string{"a b"} }},
		{"with a host pattern that is a URL", func(c *dcr.Config) { c.Policy.RedirectHostDeny = []string{"https://x"} }},
		{"with a trusted proxy that is not an address", func(c *dcr.Config) { c.Policy.TrustedProxies = []string{"proxy"} }},
		{"with an empty initial access token", func(c *dcr.Config) { c.Policy.InitialAccessTokens = []string{""} }},
		{"with a force-confidential URI on loopback", func(c *dcr.Config) { c.Policy.ForceConfidentialRedirectURIs = []string{"http://127.0.0.1/cb"} }},
		{"with an endpoint with a query", func(c *dcr.Config) { c.Endpoint = "https://as.example/register?x=1" }},
		{"with an endpoint with a fragment", func(c *dcr.Config) { c.Endpoint = "https://as.example/register#x" }},
		{"with an endpoint with an empty query", func(c *dcr.Config) { c.Endpoint = "https://as.example/register?" }},
		{"with an endpoint with an empty fragment", func(c *dcr.Config) { c.Endpoint = "https://as.example/register#" }},
		{"with an endpoint without host", func(c *dcr.Config) { c.Endpoint = "https:///register" }},
		{"with an ftp endpoint", func(c *dcr.Config) { c.Endpoint = "ftp://as.example/register" }},
		{"with an endpoint that does not parse", func(c *dcr.Config) { c.Endpoint = "https://as.example:x/register" }},
	}
	e := newEnv(t, defaultPolicy())
	base := func() dcr.Config {
		return dcr.Config{Endpoint: "https://as.example/register", Store: e.store, Secret: testSecret, Policy: defaultPolicy()}
	}
	if _, err := dcr.New(base()); err != nil {
		t.Fatalf("New refused the unmodified config: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.cfg(&cfg)
			if _, err := dcr.New(cfg); err == nil {
				t.Fatal("New accepted the config")
			}
		})
	}
}

// The registration response is a document on the wire: compare it with a
// golden file, random values masked. Run with -update to rewrite.
// The handler's path is the endpoint's, without trailing slashes, and
// /register when the endpoint has none.
func TestEndpointPath(t *testing.T) {
	for endpoint, want := range map[string]string{
		"https://as.example":                  "/register",
		"https://as.example/":                 "/register",
		"http://as.example/oauth/register":    "/oauth/register",
		"https://as.example/oauth/register//": "/oauth/register",
	} {
		h, err := dcr.New(dcr.Config{Endpoint: endpoint, Store: memory.New(), Secret: testSecret, Policy: defaultPolicy(), Logger: quietLogger()})
		if err != nil {
			t.Errorf("New(Endpoint %q): %v", endpoint, err)
		} else if h.Path() != want {
			t.Errorf("New(Endpoint %q): path %q, want %q", endpoint, h.Path(), want)
		}
	}
}

// With a zero RateLimit the limit is on: a burst of 10, then one every 3 s
// (20 a minute).
func TestDefaultRateLimit(t *testing.T) {
	p := defaultPolicy()
	p.RateLimit = dcr.RateLimit{}
	e := newEnv(t, p)
	body := `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"none"}`
	for i := 0; i < 10; i++ {
		if r := e.register(body); r.status != http.StatusCreated {
			t.Fatalf("registration %d: %d %s", i+1, r.status, r.body)
		}
	}
	r := e.register(body)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "4" {
		t.Fatalf("registration 11: %d, Retry-After %q; want 429 and 4 (3 s, rounded up)", r.status, r.header.Get("Retry-After"))
	}
	e.clock.Advance(3 * time.Second)
	if r := e.register(body); r.status != http.StatusCreated {
		t.Fatalf("3 s later: %d %s", r.status, r.body)
	}
}

func TestRegistrationResponseGolden(t *testing.T) {
	e := newEnv(t, defaultPolicy())
	r := e.register(`{"client_name":"Cursor","redirect_uris":["cursor://anysphere.cursor-mcp/oauth/callback","https://www.cursor.com/agents/mcp/oauth/callback","http://localhost:8787/callback"],"token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token","urn:ietf:params:oauth:grant-type:jwt-bearer"],"response_types":["code"],"scope":"*","unknown_field":true}`)
	if r.status != 201 {
		t.Fatalf("status %d", r.status)
	}
	ci := r.info(t)
	got := strings.ReplaceAll(string(r.body), ci.ClientID, "CLIENT_ID")
	got = strings.ReplaceAll(got, ci.RegistrationAccessToken, "REGISTRATION_ACCESS_TOKEN")
	got = strings.ReplaceAll(got, e.srv.URL, "https://as.example")
	got = regexp.MustCompile(`"client_id_issued_at":\d+`).ReplaceAllString(got, `"client_id_issued_at":0`)
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, []byte(got), "", "  "); err != nil {
		t.Fatal(err)
	}
	got = pretty.String()
	path := filepath.Join("testdata", "register_cursor.golden.json")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if got != string(want) {
		t.Fatalf("response differs from %s:\n got %s\nwant %s", path, got, want)
	}
}

// cmd/authserver fills Policy from YAML: durations are Go duration strings.
func TestPolicyDecodesFromYAML(t *testing.T) {
	var p dcr.Policy
	err := yaml.Unmarshal([]byte(`
open: true
initial_access_tokens: [t1]
scopes: [mcp:read]
resources: ["https://mcp.example.com/mcp"]
allow_client_credentials: true
redirect_host_allow: ["*.example.com"]
rate_limit: {per_minute: 30, burst: 5}
trusted_proxies: ["10.0.0.0/8"]
max_body_bytes: 8192
secret_lifetime: 720h
reap_never_used_after: 12h
reap_idle_after: 2160h
force_confidential_redirect_uris: ["https://www.perplexity.ai/rest/connections/oauth_callback"]
`), &p)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Open || p.RateLimit.Burst != 5 || p.SecretLifetime != 720*time.Hour || p.ReapNeverUsedAfter != 12*time.Hour ||
		p.MaxBodyBytes != 8192 || len(p.ForceConfidentialRedirectURIs) != 1 || p.RedirectHostAllow[0] != "*.example.com" {
		t.Fatalf("decoded %+v", p)
	}
}
