package metadata

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/internal/safehttp"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func TestWellKnownURL(t *testing.T) {
	tests := []struct {
		name, id, suffix, want string
		wantErr                bool
	}{
		{"inserts the suffix before the path", "https://h/mcp", SuffixProtectedResource, "https://h/.well-known/oauth-protected-resource/mcp", false},
		{"drops a terminating slash", "https://h/mcp/", SuffixProtectedResource, "https://h/.well-known/oauth-protected-resource/mcp", false},
		{"uses the root for an origin", "https://h", SuffixAuthorizationServer, "https://h/.well-known/oauth-authorization-server", false},
		{"uses the root for an origin with slash", "https://h/", SuffixAuthorizationServer, "https://h/.well-known/oauth-authorization-server", false},
		{"keeps the port and deep paths", "http://127.0.0.1:8080/a/b", SuffixAuthorizationServer, "http://127.0.0.1:8080/.well-known/oauth-authorization-server/a/b", false},
		{"refuses a query", "https://h/mcp?x=y", SuffixProtectedResource, "", true},
		{"refuses a fragment", "https://h/mcp#f", SuffixProtectedResource, "", true},
		{"refuses a relative reference", "/mcp", SuffixProtectedResource, "", true},
		{"refuses another scheme", "ftp://h/mcp", SuffixProtectedResource, "", true},
		{"refuses userinfo", "https://u@h/mcp", SuffixProtectedResource, "", true},
		{"refuses an empty suffix", "https://h/mcp", "", "", true},
		{"refuses an empty identifier", "", SuffixProtectedResource, "", true},
		{"accepts an identifier of exactly 2048 bytes", "https://h/" + strings.Repeat("a", 2038), SuffixProtectedResource,
			"https://h/.well-known/oauth-protected-resource/" + strings.Repeat("a", 2038), false},
		{"refuses an identifier of 2049 bytes", "https://h/" + strings.Repeat("a", 2039), SuffixProtectedResource, "", true},
		{"refuses a space", "https://h/m cp", SuffixProtectedResource, "", true},
		{"refuses a backslash", "https://h/m\\cp", SuffixProtectedResource, "", true},
		{"refuses an unparsable identifier", "https://h/%zz", SuffixProtectedResource, "", true},
		{"refuses an empty host", "https:///mcp", SuffixProtectedResource, "", true},
		{"refuses an opaque URI", "https:h/mcp", SuffixProtectedResource, "", true},
		{"refuses a scheme-relative reference", "//h/mcp", SuffixProtectedResource, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := WellKnownURL(tt.id, tt.suffix)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("WellKnownURL(%q) = %q, %v; want %q, err %v", tt.id, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestDiscoveryURLs(t *testing.T) {
	tests := []struct {
		name, issuer string
		want         []string
	}{
		{"lists all four forms for an issuer with a path", "https://h/tenant", []string{
			"https://h/.well-known/oauth-authorization-server/tenant",
			"https://h/.well-known/openid-configuration/tenant",
			"https://h/tenant/.well-known/openid-configuration",
			"https://h/.well-known/oauth-authorization-server",
		}},
		{"collapses to the root forms for an origin", "https://h", []string{
			"https://h/.well-known/oauth-authorization-server",
			"https://h/.well-known/openid-configuration",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DiscoveryURLs(tt.issuer)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("DiscoveryURLs(%q) = %q, %v; want %q", tt.issuer, got, err, tt.want)
			}
		})
	}
}

func sampleAS(issuer string) AuthorizationServerMetadata {
	return AuthorizationServerMetadata{
		Issuer:                            issuer,
		AuthorizationEndpoint:             issuer + "/authorize",
		TokenEndpoint:                     issuer + "/token",
		JWKSURI:                           issuer + "/jwks.json",
		RegistrationEndpoint:              issuer + "/register",
		ScopesSupported:                   []string{"mcp:read", "mcp:write"},
		ResponseTypesSupported:            []string{"code"},
		GrantTypesSupported:               []string{"authorization_code", "refresh_token", "client_credentials", "urn:ietf:params:oauth:grant-type:token-exchange"},
		TokenEndpointAuthMethodsSupported: []string{"none", "client_secret_basic", "client_secret_post", "private_key_jwt"},
		TokenEndpointAuthSigningAlgValuesSupported: []string{"ES256", "RS256", "EdDSA"},
		RevocationEndpoint:                         issuer + "/revoke",
		RevocationEndpointAuthMethodsSupported:     []string{"none", "client_secret_basic"},
		IntrospectionEndpoint:                      issuer + "/introspect",
		IntrospectionEndpointAuthMethodsSupported:  []string{"client_secret_basic"},
		CodeChallengeMethodsSupported:              []string{"S256"},
		AuthorizationResponseISSParameterSupported: true,
		ClientIDMetadataDocumentSupported:          true,
	}
}

func samplePRM() ProtectedResourceMetadata {
	return ProtectedResourceMetadata{
		Resource:               "https://mcp.example.com/mcp",
		AuthorizationServers:   []string{"https://auth.example.com"},
		ScopesSupported:        []string{"mcp:read", "mcp:write"},
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Example MCP server",
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file:\n got: %s\nwant: %s", name, got, want)
	}
}

func TestHandlerServesDocumentsAsGolden(t *testing.T) {
	tests := []struct {
		name, file string
		doc        any
	}{
		{"serves authorization server metadata", "as-metadata.json", sampleAS("https://auth.example.com")},
		{"serves protected resource metadata", "prm.json", samplePRM()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := Handler(tt.doc)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
				t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
			}
			golden(t, tt.file, buf.Bytes())
		})
	}
}

func TestHandlerMethods(t *testing.T) {
	h, _ := Handler(samplePRM())
	srv := httptest.NewServer(h)
	defer srv.Close()
	body, _ := json.MarshalIndent(samplePRM(), "", "  ")
	getLength := strconv.Itoa(len(body) + 1)
	tests := []struct {
		name, method string
		status       int
		header       map[string]string // response headers that must have these values
	}{
		{"answers a CORS preflight with 204", http.MethodOptions, http.StatusNoContent,
			map[string]string{"Access-Control-Allow-Methods": "GET, HEAD, OPTIONS"}},
		{"answers HEAD without a body", http.MethodHead, http.StatusOK,
			map[string]string{"Content-Type": "application/json", "Content-Length": getLength}},
		{"refuses POST with 405", http.MethodPost, http.StatusMethodNotAllowed, map[string]string{"Allow": "GET, HEAD, OPTIONS"}},
		{"refuses DELETE with 405", http.MethodDelete, http.StatusMethodNotAllowed, map[string]string{"Allow": "GET, HEAD, OPTIONS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL, nil)
			req.Header.Set("Origin", "https://inspector.example")
			req.Header.Set("Access-Control-Request-Method", "GET")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
				t.Fatalf("status %d ACAO %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
			}
			for k, want := range tt.header {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

// asServer serves doc at path and 404 elsewhere; it counts requests per path.
func asServer(t *testing.T, routes map[string]http.HandlerFunc) *httptest.Server {
	mux := http.NewServeMux()
	for p, h := range routes {
		mux.HandleFunc(p, h)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func jsonHandler(doc any) http.HandlerFunc {
	h, err := Handler(doc)
	if err != nil {
		panic(err)
	}
	return h.ServeHTTP
}

func TestFetchAuthorizationServerMetadata(t *testing.T) {
	ctx := context.Background()
	t.Run("finds the RFC 8414 path-inserted document", func(t *testing.T) {
		var srv *httptest.Server
		srv = asServer(t, map[string]http.HandlerFunc{
			"/.well-known/oauth-authorization-server/tenant": func(w http.ResponseWriter, r *http.Request) {
				jsonHandler(sampleAS(srv.URL+"/tenant"))(w, r)
			},
		})
		m, err := FetchAuthorizationServerMetadata(ctx, srv.Client(), srv.URL+"/tenant")
		if err != nil || m.TokenEndpoint != srv.URL+"/tenant/token" {
			t.Fatalf("got %+v, %v", m, err)
		}
	})
	t.Run("falls back to the OIDC path-appended document", func(t *testing.T) {
		var srv *httptest.Server
		srv = asServer(t, map[string]http.HandlerFunc{
			"/tenant/.well-known/openid-configuration": func(w http.ResponseWriter, r *http.Request) {
				jsonHandler(sampleAS(srv.URL+"/tenant"))(w, r)
			},
		})
		m, err := FetchAuthorizationServerMetadata(ctx, srv.Client(), srv.URL+"/tenant")
		if err != nil || m.Issuer != srv.URL+"/tenant" {
			t.Fatalf("got %+v, %v", m, err)
		}
	})
	t.Run("refuses a document naming another issuer", func(t *testing.T) {
		var srv *httptest.Server
		srv = asServer(t, map[string]http.HandlerFunc{
			"/.well-known/oauth-authorization-server": func(w http.ResponseWriter, r *http.Request) {
				jsonHandler(sampleAS(srv.URL+"/"))(w, r) // trailing slash: not byte-equal
			},
		})
		_, err := FetchAuthorizationServerMetadata(ctx, srv.Client(), srv.URL)
		if !errors.Is(err, ErrMismatch) {
			t.Fatalf("err = %v, want ErrMismatch", err)
		}
	})
	t.Run("does not follow redirects", func(t *testing.T) {
		var srv *httptest.Server
		srv = asServer(t, map[string]http.HandlerFunc{
			"/.well-known/oauth-authorization-server": func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/elsewhere", http.StatusFound)
			},
			"/elsewhere": func(w http.ResponseWriter, r *http.Request) { jsonHandler(sampleAS(srv.URL))(w, r) },
		})
		if _, err := FetchAuthorizationServerMetadata(ctx, srv.Client(), srv.URL); err == nil || !strings.Contains(err.Error(), "status 302") {
			t.Fatalf("err = %v, want the 302 reported", err)
		}
	})
	t.Run("refuses an oversized document", func(t *testing.T) {
		srv := asServer(t, map[string]http.HandlerFunc{
			"/.well-known/oauth-authorization-server": func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"issuer":"` + strings.Repeat("a", MaxDocumentBytes) + `"}`))
			},
		})
		_, err := FetchAuthorizationServerMetadata(ctx, srv.Client(), srv.URL)
		if !errors.Is(err, ErrInvalidDocument) {
			t.Fatalf("err = %v, want ErrInvalidDocument", err)
		}
	})
	t.Run("refuses a document that is not JSON", func(t *testing.T) {
		srv := asServer(t, map[string]http.HandlerFunc{
			"/.well-known/oauth-authorization-server": func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				_, _ = w.Write([]byte(`<html>`))
			},
		})
		_, err := FetchAuthorizationServerMetadata(ctx, srv.Client(), srv.URL)
		if !errors.Is(err, ErrInvalidDocument) {
			t.Fatalf("err = %v, want ErrInvalidDocument", err)
		}
	})
	t.Run("tries the next form after a server error", func(t *testing.T) {
		var srv *httptest.Server
		srv = asServer(t, map[string]http.HandlerFunc{
			"/.well-known/oauth-authorization-server/tenant": func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "down", http.StatusInternalServerError)
			},
			"/.well-known/openid-configuration/tenant": func(w http.ResponseWriter, r *http.Request) {
				jsonHandler(sampleAS(srv.URL+"/tenant"))(w, r)
			},
		})
		m, err := FetchAuthorizationServerMetadata(ctx, srv.Client(), srv.URL+"/tenant")
		if err != nil || m.Issuer != srv.URL+"/tenant" {
			t.Fatalf("got %+v, %v", m, err)
		}
	})
	t.Run("stops at the caller's cancellation and names the form in flight", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		srv := asServer(t, map[string]http.HandlerFunc{
			"/.well-known/oauth-authorization-server/tenant": func(w http.ResponseWriter, r *http.Request) {
				cancel()
				<-r.Context().Done()
			},
		})
		_, err := FetchAuthorizationServerMetadata(ctx, srv.Client(), srv.URL+"/tenant")
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), `/.well-known/oauth-authorization-server/tenant"`) {
			t.Fatalf("err = %v, want the cancellation of the first form", err)
		}
	})
	t.Run("uses the client it is given", func(t *testing.T) {
		var srv *httptest.Server
		srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			jsonHandler(sampleAS(srv.URL))(w, r)
		}))
		defer srv.Close()
		m, err := FetchAuthorizationServerMetadata(ctx, srv.Client(), srv.URL) // only this client trusts the test certificate
		if err != nil || m.Issuer != srv.URL {
			t.Fatalf("got %+v, %v", m, err)
		}
	})
	// Fails if a nil client falls back to a client without an address
	// policy: the httptest server is on loopback, a special-use address.
	t.Run("refuses a nil client before any request, and fetches with a client allowing loopback", func(t *testing.T) {
		var srv *httptest.Server
		var hits atomic.Int32
		srv = asServer(t, map[string]http.HandlerFunc{
			"/.well-known/oauth-authorization-server": func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				jsonHandler(sampleAS(srv.URL))(w, r)
			},
		})
		if m, err := FetchAuthorizationServerMetadata(ctx, nil, srv.URL); !errors.Is(err, ErrNoClient) || m != nil {
			t.Fatalf("nil client: got %+v, %v; want ErrNoClient", m, err)
		}
		if _, err := FetchProtectedResourceMetadata(ctx, nil, srv.URL+"/mcp"); !errors.Is(err, ErrNoClient) {
			t.Fatalf("nil client, protected resource: %v; want ErrNoClient", err)
		}
		if n := hits.Load(); n != 0 {
			t.Fatalf("a nil client sent %d requests", n)
		}
		host := strings.TrimPrefix(srv.URL, "http://")
		strict, err := safehttp.NewClient(safehttp.Config{AllowHTTP: []string{host}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := FetchAuthorizationServerMetadata(ctx, strict, srv.URL); err == nil || !errors.Is(err, safehttp.ErrAddress) {
			t.Fatalf("default address policy: %v; want the loopback address refused", err)
		}
		loopback, err := safehttp.NewClient(safehttp.Config{Allow: []string{"127.0.0.0/8"}, AllowHTTP: []string{host}})
		if err != nil {
			t.Fatal(err)
		}
		m, err := FetchAuthorizationServerMetadata(ctx, loopback, srv.URL)
		if err != nil || m.Issuer != srv.URL {
			t.Fatalf("client allowing loopback: got %+v, %v", m, err)
		}
	})
	for _, tc := range []struct {
		name      string
		size      int
		padBefore bool // else after: the document is valid JSON cut anywhere in the padding
		ok        bool
	}{
		{"accepts a document of exactly MaxDocumentBytes", MaxDocumentBytes, true, true},
		{"refuses a document one byte over MaxDocumentBytes, even in trailing space", MaxDocumentBytes + 1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var srv *httptest.Server
			srv = asServer(t, map[string]http.HandlerFunc{
				"/.well-known/oauth-authorization-server": func(w http.ResponseWriter, r *http.Request) {
					doc, _ := json.Marshal(sampleAS(srv.URL))
					pad := bytes.Repeat([]byte(" "), tc.size-len(doc))
					var body []byte
					if tc.padBefore {
						body = append(pad, doc...)
					} else {
						body = append(doc, pad...)
					}
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write(body)
				},
			})
			m, err := FetchAuthorizationServerMetadata(ctx, srv.Client(), srv.URL)
			if tc.ok && (err != nil || m.Issuer != srv.URL) {
				t.Fatalf("got %+v, %v", m, err)
			}
			if !tc.ok && (!errors.Is(err, ErrInvalidDocument) || !strings.Contains(err.Error(), "larger than")) {
				t.Fatalf("err = %v, want ErrInvalidDocument for the size", err)
			}
		})
	}
	for _, tc := range []struct {
		name        string
		contentType []string // nil: no Content-Type header at all
		ok          bool
	}{
		{"accepts a JSON document without a content type", nil, true},
		{"accepts application/json with parameters", []string{"application/json; charset=utf-8"}, true},
		{"refuses a JSON document labelled text/html", []string{"text/html"}, false},
		// RFC 8414 §3.2: the metadata document is application/json; the JWK
		// Set media type is for a JWK Set only.
		{"refuses a document labelled application/jwk-set+json", []string{"application/jwk-set+json"}, false},
		{"refuses a JSON document labelled text/plain", []string{"text/plain; charset=utf-8"}, false},
		{"refuses a malformed content type", []string{"application/json; ="}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var srv *httptest.Server
			srv = asServer(t, map[string]http.HandlerFunc{
				"/.well-known/oauth-authorization-server": func(w http.ResponseWriter, r *http.Request) {
					body, _ := json.Marshal(sampleAS(srv.URL))
					w.Header()["Content-Type"] = tc.contentType // nil also stops content sniffing
					_, _ = w.Write(body)
				},
			})
			m, err := FetchAuthorizationServerMetadata(ctx, srv.Client(), srv.URL)
			if tc.ok && (err != nil || m.Issuer != srv.URL) {
				t.Fatalf("got %+v, %v", m, err)
			}
			if !tc.ok && (!errors.Is(err, ErrInvalidDocument) || !strings.Contains(err.Error(), "content type")) {
				t.Fatalf("err = %v, want ErrInvalidDocument naming the content type", err)
			}
		})
	}
	t.Run("reports not found when no form exists", func(t *testing.T) {
		srv := asServer(t, nil)
		_, err := FetchAuthorizationServerMetadata(ctx, srv.Client(), srv.URL+"/x")
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})
}

func TestFetchProtectedResourceMetadata(t *testing.T) {
	ctx := context.Background()
	var srv *httptest.Server
	srv = asServer(t, map[string]http.HandlerFunc{
		"/.well-known/oauth-protected-resource/mcp": func(w http.ResponseWriter, r *http.Request) {
			jsonHandler(ProtectedResourceMetadata{Resource: srv.URL + "/mcp", AuthorizationServers: []string{"https://as"}})(w, r)
		},
	})
	t.Run("accepts a document naming the same resource", func(t *testing.T) {
		m, err := FetchProtectedResourceMetadata(ctx, srv.Client(), srv.URL+"/mcp")
		if err != nil || m.AuthorizationServers[0] != "https://as" {
			t.Fatalf("got %+v, %v", m, err)
		}
	})
	t.Run("refuses a document for another resource spelling", func(t *testing.T) {
		_, err := FetchProtectedResourceMetadata(ctx, srv.Client(), srv.URL+"/mcp/")
		if !errors.Is(err, ErrMismatch) {
			t.Fatalf("err = %v, want ErrMismatch", err)
		}
	})
	// RFC 9728 §3.2: the document is application/json.
	t.Run("refuses a document labelled application/jwk-set+json", func(t *testing.T) {
		var jwk *httptest.Server
		jwk = asServer(t, map[string]http.HandlerFunc{
			"/.well-known/oauth-protected-resource/mcp": func(w http.ResponseWriter, r *http.Request) {
				body, _ := json.Marshal(ProtectedResourceMetadata{Resource: jwk.URL + "/mcp", AuthorizationServers: []string{"https://as"}})
				w.Header().Set("Content-Type", "application/jwk-set+json")
				_, _ = w.Write(body)
			},
		})
		_, err := FetchProtectedResourceMetadata(ctx, jwk.Client(), jwk.URL+"/mcp")
		if !errors.Is(err, ErrInvalidDocument) || !strings.Contains(err.Error(), "content type") {
			t.Fatalf("err = %v, want ErrInvalidDocument naming the content type", err)
		}
	})
}

func TestCanonicalResourceAttacks(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"treats a trailing slash as the same resource", "https://h/mcp/", "https://h/mcp"},
		{"lowercases scheme and host", "HTTPS://H.Example/mcp", "https://h.example/mcp"},
		{"drops the default port", "https://h:443/mcp", "https://h/mcp"},
		{"drops the default http port", "http://h:80/mcp", "http://h/mcp"},
		{"keeps another port", "https://h:8443/mcp", "https://h:8443/mcp"},
		{"keeps the port 443 of http", "http://h:443/mcp", "http://h:443/mcp"},
		{"keeps an IPv6 literal in brackets", "https://[::1]/mcp", "https://[::1]/mcp"},
		{"keeps an IPv6 literal with its port", "http://[::1]:8080/mcp", "http://[::1]:8080/mcp"},
		{"lowercases an IPv6 literal", "https://[FD00::A]:8443/mcp", "https://[fd00::a]:8443/mcp"},
		{"refuses dot segments", "https://h/mcp/../admin", ""},
		{"refuses encoded dot segments", "https://h/mcp/%2e%2e/admin", ""},
		{"refuses a query", "https://h/mcp?x=y", ""},
		{"refuses an empty string", "", ""},
		{"accepts exactly 2048 bytes", "https://h/" + strings.Repeat("a", 2038), "https://h/" + strings.Repeat("a", 2038)},
		{"refuses 2049 bytes", "https://h/" + strings.Repeat("a", 2039), ""},
		{"refuses a space", "https://h/m cp", ""},
		{"refuses a backslash", "https://h/m\\cp", ""},
		{"refuses an unparsable URI", "https://h/%zz", ""},
		{"refuses an opaque URI", "https:h/mcp", ""},
		{"refuses a scheme-relative reference", "//h/mcp", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalResource(tt.in)
			if got != tt.want || (tt.want == "") != (err != nil) {
				t.Fatalf("CanonicalResource(%q) = %q, %v", tt.in, got, err)
			}
		})
	}
}

func TestWellKnownPath(t *testing.T) {
	for _, tt := range []struct{ id, want string }{
		{"https://h/mcp", "/.well-known/oauth-protected-resource/mcp"},
		{"http://[::1]:8080/a/b/", "/.well-known/oauth-protected-resource/a/b"},
		{"https://h", "/.well-known/oauth-protected-resource"},
	} {
		if got, err := WellKnownPath(tt.id, SuffixProtectedResource); err != nil || got != tt.want {
			t.Errorf("WellKnownPath(%q) = %q, %v; want %q", tt.id, got, err, tt.want)
		}
	}
	for _, id := range []string{"https://h/mcp?x", "/mcp", ""} {
		if got, err := WellKnownPath(id, SuffixProtectedResource); err == nil {
			t.Errorf("WellKnownPath(%q) = %q, want an error", id, got)
		}
	}
}

func FuzzWellKnownURL(f *testing.F) {
	for _, s := range []string{"https://h/mcp", "https://h", "http://[::1]:8/a/", "https://h/%2e%2e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		u, err := WellKnownURL(id, SuffixProtectedResource)
		if err != nil {
			return
		}
		if !strings.Contains(u, "/.well-known/"+SuffixProtectedResource) {
			t.Fatalf("WellKnownURL(%q) = %q", id, u)
		}
	})
}

// deadlineRecorder passes each request to http.DefaultTransport and keeps
// the deadline of its context.
type deadlineRecorder struct {
	deadline time.Time
	ok       bool
}

func (d *deadlineRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	d.deadline, d.ok = r.Context().Deadline()
	return http.DefaultTransport.RoundTrip(r)
}

// Pins DefaultFetchTimeout: a fetch without a deadline, or with a later one,
// is bounded by it; an earlier deadline of the caller is kept.
func TestFetchIsBoundedByDefaultFetchTimeout(t *testing.T) {
	var srv *httptest.Server
	srv = asServer(t, map[string]http.HandlerFunc{
		"/.well-known/oauth-protected-resource/mcp": func(w http.ResponseWriter, r *http.Request) {
			jsonHandler(ProtectedResourceMetadata{Resource: srv.URL + "/mcp"})(w, r)
		},
	})
	soon := time.Now().Add(DefaultFetchTimeout / 2)
	for _, tc := range []struct {
		name     string
		deadline time.Time // zero: none
		want     time.Time // zero: start+DefaultFetchTimeout <= got <= end+DefaultFetchTimeout
	}{
		{"a context without a deadline gets DefaultFetchTimeout", time.Time{}, time.Time{}},
		{"a later deadline is cut to DefaultFetchTimeout", time.Now().Add(time.Hour), time.Time{}},
		{"an earlier deadline is kept", soon, soon},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if !tc.deadline.IsZero() {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, tc.deadline)
				defer cancel()
			}
			rec := &deadlineRecorder{}
			start := time.Now()
			if _, err := FetchProtectedResourceMetadata(ctx, &http.Client{Transport: rec}, srv.URL+"/mcp"); err != nil {
				t.Fatal(err)
			}
			end := time.Now()
			switch {
			case !rec.ok:
				t.Fatal("the request had no deadline")
			case !tc.want.IsZero() && !rec.deadline.Equal(tc.want):
				t.Fatalf("deadline %v, want the caller's %v", rec.deadline, tc.want)
			case tc.want.IsZero() && (rec.deadline.Before(start.Add(DefaultFetchTimeout)) || rec.deadline.After(end.Add(DefaultFetchTimeout))):
				t.Fatalf("deadline %v, want DefaultFetchTimeout after the call (%v to %v)", rec.deadline, start.Add(DefaultFetchTimeout), end.Add(DefaultFetchTimeout))
			}
		})
	}
}
