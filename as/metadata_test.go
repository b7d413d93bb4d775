package as

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

type staticResolver map[string]*storage.Client

func (r staticResolver) ResolveClient(_ context.Context, id string) (*storage.Client, error) {
	if c, ok := r[id]; ok {
		cc := *c
		return &cc, nil
	}
	return nil, storage.ErrNotFound
}

// metadataServer serves the metadata of an AS with a fixed issuer, so that
// the documents can be compared with golden files.
func metadataServer(t *testing.T, issuer string, mod func(*Config)) *httptest.Server {
	t.Helper()
	cfg := Config{
		Issuer:    issuer,
		Resources: []Resource{{URI: mcpURI, Scopes: []string{"mcp:tools", "mcp:admin"}}, {URI: otherURI, Scopes: []string{"other:read"}}},
		Store:     memory.New(),
		Secret:    bytes.Repeat([]byte("k"), 32),
	}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func TestMetadataDocumentsMatchGoldenFiles(t *testing.T) {
	cases := []struct {
		name   string
		issuer string
		mod    func(*Config)
		paths  []string
		golden string
	}{
		{"serves RFC 8414 and OIDC forms for an issuer without path", "https://as.example", nil,
			[]string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"}, "metadata.json"},
		{"serves path-inserted and path-appended forms for an issuer with a path", "https://as.example/tenant1", func(c *Config) {
			c.RegistrationEndpoint = "https://as.example/tenant1/register"
			c.ClientResolver = staticResolver{}
		}, []string{"/.well-known/oauth-authorization-server/tenant1", "/.well-known/openid-configuration/tenant1",
			"/tenant1/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"}, "metadata-path.json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := metadataServer(t, tc.issuer, tc.mod)
			var first []byte
			for _, p := range tc.paths {
				resp, err := http.Get(ts.URL + p)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
					t.Fatalf("%s: %d %v", p, resp.StatusCode, resp.Header)
				}
				if first == nil {
					first = body
				} else if !bytes.Equal(first, body) {
					t.Errorf("%s differs from %s", p, tc.paths[0])
				}
			}
			var doc map[string]any
			if err := json.Unmarshal(first, &doc); err != nil {
				t.Fatal(err)
			}
			if doc["issuer"] != tc.issuer {
				t.Errorf("issuer %v, want %s", doc["issuer"], tc.issuer)
			}
			golden := filepath.Join("testdata", tc.golden)
			if *update {
				if err := os.WriteFile(golden, first, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(want, first) {
				t.Errorf("metadata differs from %s:\n%s", golden, first)
			}
		})
	}
}

func TestCORSPreflightOnTokenButNotAuthorize(t *testing.T) {
	h := newHarness(t, nil)
	for path, want := range map[string]string{"/token": "*", "/jwks.json": "*", "/.well-known/oauth-authorization-server": "*", "/authorize": ""} {
		req, _ := http.NewRequest(http.MethodOptions, h.issuer+path, nil)
		req.Header.Set("Origin", "http://inspector.example")
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != want {
			t.Errorf("%s: Access-Control-Allow-Origin %q, want %q", path, got, want)
		}
	}
}

func TestStorageAndCIMDClientsAreFound(t *testing.T) {
	cimdID := "https://client.example/oauth/metadata.json"
	h := newHarness(t, func(c *Config) {
		c.ClientResolver = staticResolver{cimdID: {ID: cimdID, Name: "CIMD app", Public: true, RedirectURIs: []string{appRedirect}, Source: "cimd"}}
	})
	dcrSecret := "dcr-secret-0123456789abcdefghij"
	hasher := h.as.clients.hasher
	if err := h.store.CreateClient(context.Background(), &storage.Client{
		ID: "dcr-1", SecretHash: hasher.Hash(dcrSecret), GrantTypes: []string{"client_credentials", "urn:ietf:params:oauth:grant-type:jwt-bearer"},
		TokenEndpointAuthMethod: "client_secret_basic", Source: "dcr", Scopes: []string{"other:read"}, Resources: []string{otherURI},
	}); err != nil {
		t.Fatal(err)
	}
	resp, body := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "dcr-1", dcrSecret)
	if resp.StatusCode != 200 {
		t.Fatalf("dcr client: %d %v", resp.StatusCode, body)
	}
	if _, c := h.claims(body["access_token"].(string)); c["aud"] != otherURI || c["scope"] != "other:read" {
		t.Errorf("claims %v", c)
	}
	if c, _ := h.store.GetClient(context.Background(), "dcr-1"); c.LastUsedAt.IsZero() {
		t.Error("LastUsedAt not set")
	}
	if err := h.store.DeleteClient(context.Background(), "dcr-1"); err != nil {
		t.Fatal(err)
	}
	resp, body = h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "dcr-1", dcrSecret)
	if resp.StatusCode != 401 || body["error"] != "invalid_client" {
		t.Errorf("deleted client: %d %v", resp.StatusCode, body)
	}

	conf := h.oauthConfig(cimdID, "")
	u := h.browser().authorize(conf.AuthCodeURL("state-abcdefgh", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	if u.Query().Get("code") == "" {
		t.Fatalf("CIMD client got %s", u)
	}
}

func TestKeyRotationIsPickedUpAndOldKeysStayPublished(t *testing.T) {
	h := newHarness(t, nil)
	_, before := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	kid, err := RotateKey(context.Background(), h.store, []byte("0123456789abcdef0123456789abcdef-test-secret"), "EdDSA")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.as.keys.reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, after := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	// Both tokens verify against the published set.
	h.claims(before["access_token"].(string))
	h.claims(after["access_token"].(string))
	if got := headerKid(t, after["access_token"].(string)); got != kid {
		t.Errorf("new token signed with %s, want %s", got, kid)
	}
	// Once the old key's tokens have expired it leaves the JWKS.
	h.clock.Advance(DefaultAccessTokenTTL + time.Hour)
	if err := h.as.keys.reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	keys, _ := h.store.ListKeys(context.Background())
	if len(keys) != 1 || keys[0].ID != kid {
		t.Errorf("keys after expiry: %d", len(keys))
	}
}

func headerKid(t *testing.T, token string) string {
	t.Helper()
	h, _, ok := peekJWT(token)
	if !ok {
		t.Fatal("not a JWT")
	}
	var hd struct {
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(h, &hd); err != nil {
		t.Fatal(err)
	}
	return hd.Kid
}

// Two instances starting together can each retire the other's first key.
// The newest key must then keep signing and never be deleted, or every
// token request would fail once the retention period passed.
func TestAllKeysRetiredStillSignsWithTheNewest(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	kid, err := RotateKey(ctx, h.store, []byte("0123456789abcdef0123456789abcdef-test-secret"), "ES256")
	if err != nil {
		t.Fatal(err)
	}
	// The other instance's retirement lands after ours: nothing is unretired.
	if err := h.store.RetireKeys(ctx, "", h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(DefaultAccessTokenTTL + 24*time.Hour)
	if err := h.as.keys.reload(ctx); err != nil {
		t.Fatal(err)
	}
	resp, body := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	if resp.StatusCode != 200 {
		t.Fatalf("token with every key retired: %d %v", resp.StatusCode, body)
	}
	if got := headerKid(t, body["access_token"].(string)); got != kid {
		t.Errorf("signed with %s, want the newest key %s", got, kid)
	}
	keys, _ := h.store.ListKeys(ctx)
	if len(keys) != 1 || keys[0].ID != kid {
		t.Errorf("after retention: %d keys, want only the newest", len(keys))
	}
}
