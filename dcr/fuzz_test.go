package dcr_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/dcr"
	"github.com/mcpauth/mcpauth/storage/memory"
)

var registrationSeeds = []string{
	`{"client_name":"Cursor","redirect_uris":["cursor://anysphere.cursor-mcp/oauth/callback","https://www.cursor.com/agents/mcp/oauth/callback","http://localhost:8787/callback"],"token_endpoint_auth_method":"none"}`,
	`{"client_name":"Visual Studio Code","redirect_uris":["http://127.0.0.1:33418/","http://127.0.0.1/"],"token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token"]}`,
	`{"redirect_uris":["https://a.example/cb"],"scope":"*","grant_types":["client_credentials","authorization_code","urn:ietf:params:oauth:grant-type:jwt-bearer"]}`,
	`{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"private_key_jwt","jwks":{"keys":[` + publicJWK + `]}}`,
	`{"redirect_uris":["https://a.example/cb#f"],"client_name":"\u202e"}`,
	`{"redirect_uris":"x","jwks":"y","contacts":[1]}`,
	`[]`, `null`, `{`, ``,
}

// FuzzRegister: whatever the body, registration answers 201 or 400 (never a
// 500 or a panic), a 400 stores nothing, and a 201 never exceeds policy.
func FuzzRegister(f *testing.F) {
	for _, s := range registrationSeeds {
		f.Add(s)
	}
	store := memory.New()
	h, err := dcr.New(dcr.Config{Endpoint: "https://as.example/register", Store: store, Secret: testSecret,
		Policy: defaultPolicy(), Logger: quietLogger()})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		before, _ := store.CountClients(context.Background(), "")
		req := httptest.NewRequest(http.MethodPost, "https://as.example/register", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		after, _ := store.CountClients(context.Background(), "")
		switch rec.Code {
		case http.StatusCreated:
			if after != before+1 {
				t.Fatalf("201 but %d -> %d clients", before, after)
			}
			var ci dcr.ClientInformation
			if err := json.Unmarshal(rec.Body.Bytes(), &ci); err != nil {
				t.Fatalf("201 body is not client information: %v", err)
			}
			c, err := store.GetClient(context.Background(), ci.ClientID)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range c.Scopes {
				if s != "mcp:read" && s != "mcp:write" {
					t.Fatalf("scope %q beyond policy", s)
				}
			}
			if !slices.Equal(c.Resources, []string{"https://mcp.example.com/mcp"}) {
				t.Fatalf("resources %q", c.Resources)
			}
			for _, g := range c.GrantTypes {
				if g != "authorization_code" && g != "refresh_token" {
					t.Fatalf("grant %q beyond policy", g)
				}
			}
			for _, u := range c.RedirectURIs {
				if _, err := dcr.CheckRedirectURI(u); err != nil {
					t.Fatalf("accepted redirect URI %q: %v", u, err)
				}
			}
			if !dcr.SafeString(c.Name) {
				t.Fatalf("unsafe name %q accepted", c.Name)
			}
		case http.StatusBadRequest:
			if after != before {
				t.Fatalf("400 but %d -> %d clients", before, after)
			}
			var e dcr.ErrorResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || (e.Error != "invalid_client_metadata" && e.Error != "invalid_redirect_uri") || e.ErrorDescription == "" {
				t.Fatalf("400 body %q", rec.Body.String())
			}
		default:
			t.Fatalf("status %d for body %q: %s", rec.Code, body, rec.Body.String())
		}
	})
}

// FuzzCIMDDocument: document parsing never panics, refuses with
// ErrInvalidDocument, and what it accepts keeps the CIMD rules.
func FuzzCIMDDocument(f *testing.F) {
	const id = "https://client.example/oauth/client.json"
	for _, s := range registrationSeeds {
		f.Add(s)
	}
	doc := claudeDoc()
	doc["client_id"] = id
	b, _ := json.Marshal(doc)
	f.Add(string(b))
	f.Add(`{"client_id":"` + id + `","client_name":"ChatGPT","redirect_uris":["https://chatgpt.com/connector_platform_oauth_redirect"],"token_endpoint_auth_method":"private_key_jwt","jwks_uri":"https://chatgpt.com/oauth/jwks.json"}`)
	r, err := dcr.NewCIMDResolver(dcr.CIMDConfig{Scopes: []string{"mcp:read"}, Logger: quietLogger()})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		c, err := r.ParseDocument(id, []byte(body))
		if err != nil {
			if !errors.Is(err, dcr.ErrInvalidDocument) {
				t.Fatalf("error %v does not wrap ErrInvalidDocument", err)
			}
			return
		}
		if c.ID != id || c.Source != "cimd" || c.Name == "" || len(c.RedirectURIs) == 0 {
			t.Fatalf("accepted %+v", c)
		}
		switch c.TokenEndpointAuthMethod {
		case "none":
			if !c.Public {
				t.Fatal("none but not public")
			}
		case "private_key_jwt":
			if c.Public || (len(c.JWKS) == 0 && c.JWKSURI == "") {
				t.Fatalf("private_key_jwt client %+v", c)
			}
		default:
			t.Fatalf("auth method %q accepted", c.TokenEndpointAuthMethod)
		}
		for _, g := range c.GrantTypes {
			if g != "authorization_code" && g != "refresh_token" {
				t.Fatalf("grant %q accepted", g)
			}
		}
	})
}

// FuzzCheckRedirectURI: an accepted redirect URI never has a fragment,
// userinfo or wildcard, and http is loopback only.
func FuzzCheckRedirectURI(f *testing.F) {
	for _, s := range []string{"https://a.example/cb", "http://127.0.0.1:33418/", "cursor://anysphere.cursor-mcp/oauth/callback",
		"com.example.app:/cb", "http://[::1]/x", "https://a.example/cb#x", "javascript:alert(1)", "http://evil.example@127.0.0.1/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		kind, err := dcr.CheckRedirectURI(raw)
		if err != nil {
			return
		}
		u, perr := url.Parse(raw)
		if perr != nil || u.Fragment != "" || u.User != nil || strings.ContainsAny(raw, "#*") {
			t.Fatalf("accepted %q", raw)
		}
		if strings.EqualFold(u.Scheme, "http") && (kind != dcr.RedirectLoopback || !dcr.IsLoopbackHost(u.Hostname())) {
			t.Fatalf("accepted non-loopback http %q", raw)
		}
	})
}
