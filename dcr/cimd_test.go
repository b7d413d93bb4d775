package dcr_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/dcr"
	"github.com/mcpauth/mcpauth/internal/safehttp"
	"github.com/mcpauth/mcpauth/storage"
)

// docServer serves client metadata documents over TLS on 127.0.0.1.
type docServer struct {
	srv    *httptest.Server
	mu     sync.Mutex
	hits   map[string]int
	routes map[string]http.HandlerFunc
}

func newDocServer(t testing.TB) *docServer {
	d := &docServer{hits: map[string]int{}, routes: map[string]http.HandlerFunc{}}
	d.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		d.hits[r.URL.Path]++
		h := d.routes[r.URL.Path]
		d.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	}))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *docServer) url(path string) string { return d.srv.URL + path }
func (d *docServer) host() string           { u, _ := url.Parse(d.srv.URL); return u.Host }
func (d *docServer) port() string           { u, _ := url.Parse(d.srv.URL); return u.Port() }

func (d *docServer) hitsOf(path string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hits[path]
}

func (d *docServer) handle(path string, h http.HandlerFunc) {
	d.mu.Lock()
	d.routes[path] = h
	d.mu.Unlock()
}

// serve publishes doc at path; a missing client_id is set to the URL.
func (d *docServer) serve(path string, doc map[string]any, cacheControl string) string {
	id := d.url(path)
	if _, ok := doc["client_id"]; !ok {
		doc["client_id"] = id
	}
	body, _ := json.Marshal(doc)
	d.handle(path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if cacheControl != "" {
			w.Header().Set("Cache-Control", cacheControl)
		}
		w.Write(body)
	})
	return id
}

type resolverEnv struct {
	r     *dcr.CIMDResolver
	store storage.ClientStore
	clock *clock
}

func newResolver(t testing.TB, d *docServer, mod func(*dcr.CIMDConfig)) *resolverEnv {
	t.Helper()
	store := newStore(t)
	clk := newClock()
	cfg := dcr.CIMDConfig{
		Fetch: safehttp.Config{
			Allow:                 []string{d.host()},
			RootCAs:               d.srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs,
			ResponseHeaderTimeout: 300 * time.Millisecond,
			Timeout:               time.Second,
		},
		Scopes:    []string{"mcp:read", "mcp:write"},
		Resources: []string{"https://mcp.example.com/mcp"},
		Store:     store,
		Logger:    quietLogger(),
		Now:       clk.Now,
	}
	if mod != nil {
		mod(&cfg)
	}
	r, err := dcr.NewCIMDResolver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &resolverEnv{r: r, store: store, clock: clk}
}

func claudeDoc() map[string]any {
	return map[string]any{
		"client_name":                "Claude",
		"client_uri":                 "https://claude.ai",
		"redirect_uris":              []string{"https://claude.ai/api/mcp/auth_callback", "https://claude.com/api/mcp/auth_callback"},
		"grant_types":                []string{"authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:jwt-bearer"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
	}
}

func TestCIMDClientProfiles(t *testing.T) {
	d := newDocServer(t)
	cases := []struct {
		name         string
		doc          map[string]any
		wantPublic   bool
		wantGrants   []string
		wantLoopback bool
		wantMethod   string
	}{
		{"Claude's document listing jwt-bearer resolves with that grant ignored", claudeDoc(), true,
			[]string{"authorization_code", "refresh_token"}, false, "none"},
		{"ChatGPT's private_key_jwt document with jwks_uri resolves as confidential", map[string]any{
			"client_name": "ChatGPT", "redirect_uris": []string{"https://chatgpt.com/connector_platform_oauth_redirect"},
			"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
			"token_endpoint_auth_method": "private_key_jwt", "jwks_uri": "https://chatgpt.com/oauth/jwks.json",
		}, false, []string{"authorization_code", "refresh_token"}, false, "private_key_jwt"},
		{"Claude Code's portless loopback document resolves and is loopback-only", map[string]any{
			"client_name": "Claude Code", "redirect_uris": []string{"http://127.0.0.1/callback", "http://localhost/callback"},
			"grant_types": []string{"authorization_code", "refresh_token"},
		}, true, []string{"authorization_code", "refresh_token"}, true, "none"},
		{"a document with an inline jwks resolves", map[string]any{
			"client_name": "Agent", "redirect_uris": []string{"https://agent.example/cb"},
			"token_endpoint_auth_method": "private_key_jwt", "jwks": json.RawMessage(`{"keys":[` + publicJWK + `]}`),
		}, false, []string{"authorization_code"}, false, "private_key_jwt"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			re := newResolver(t, d, nil)
			id := d.serve(fmt.Sprintf("/profile/%d/client.json", i), tc.doc, "")
			c, err := re.r.ResolveClient(context.Background(), id)
			if err != nil {
				t.Fatalf("ResolveClient: %v", err)
			}
			if c.ID != id || c.Source != "cimd" || c.Public != tc.wantPublic || c.TokenEndpointAuthMethod != tc.wantMethod {
				t.Errorf("client ID=%q Source=%q Public=%v method=%q", c.ID, c.Source, c.Public, c.TokenEndpointAuthMethod)
			}
			if !slices.Equal(c.GrantTypes, tc.wantGrants) {
				t.Errorf("grant types %q, want %q", c.GrantTypes, tc.wantGrants)
			}
			// The documents name no scope: no default scope of their own
			// (the policy bounds what they may be granted).
			if len(c.Scopes) != 0 || !slices.Equal(c.Resources, []string{"https://mcp.example.com/mcp"}) {
				t.Errorf("scopes %q resources %q: want none and the policy's", c.Scopes, c.Resources)
			}
			if len(c.SecretHash) != 0 {
				t.Error("a CIMD client has a secret")
			}
			if got := dcr.LoopbackOnly(c.RedirectURIs); got != tc.wantLoopback {
				t.Errorf("LoopbackOnly = %v", got)
			}
			if got := dcr.MetadataURLHost(id); got != d.host() {
				t.Errorf("MetadataURLHost = %q, want %q", got, d.host())
			}
			stored, err := re.store.GetClient(context.Background(), id)
			if err != nil || stored.Source != "cimd" || stored.Name != c.Name {
				t.Errorf("stored client %+v, %v", stored, err)
			}
		})
	}
}

func TestCIMDRefusesHostileDestinations(t *testing.T) {
	d := newDocServer(t)        // allowlisted
	stranger := newDocServer(t) // also on 127.0.0.1, not allowlisted
	good := claudeDoc()
	d.serve("/ok.json", good, "")
	stranger.serve("/client.json", claudeDoc(), "")
	d.handle("/redirect.json", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ok.json", http.StatusFound)
	})
	d.handle("/big.json", func(w http.ResponseWriter, r *http.Request) {
		doc := claudeDoc()
		doc["client_id"] = d.url("/big.json")
		doc["padding"] = strings.Repeat("x", 5200)
		json.NewEncoder(w).Encode(doc)
	})
	d.handle("/slow.json", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(3 * time.Second):
		case <-r.Context().Done():
		}
	})
	d.handle("/error.json", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) })

	cases := []struct {
		name string
		id   string
		want error
	}{
		{"a document on 127.0.0.1 that is not allowlisted", stranger.url("/client.json"), safehttp.ErrAddress},
		{"a document on a private 10.x address", "https://10.1.2.3/client.json", safehttp.ErrAddress},
		{"the cloud metadata address", "https://169.254.169.254/latest/meta-data/client.json", safehttp.ErrAddress},
		{"IPv6 loopback", "https://[::1]:" + stranger.port() + "/client.json", safehttp.ErrAddress},
		{"a DNS name resolving to loopback", "https://localhost:" + stranger.port() + "/client.json", safehttp.ErrAddress},
		{"a redirect, even to a good document", d.url("/redirect.json"), safehttp.ErrRedirect},
		{"a body over 5 KB", d.url("/big.json"), safehttp.ErrTooLarge},
		{"a slow server", d.url("/slow.json"), safehttp.ErrTimeout},
		{"a 404", d.url("/missing.json"), safehttp.ErrStatus},
		{"a 500", d.url("/error.json"), safehttp.ErrStatus},
	}
	for _, tc := range cases {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			re := newResolver(t, d, nil)
			c, err := re.r.ResolveClient(context.Background(), tc.id)
			if c != nil || !errors.Is(err, dcr.ErrDocumentFetch) || !errors.Is(err, tc.want) {
				t.Fatalf("ResolveClient = %v, %v; want ErrDocumentFetch and %v", c, err, tc.want)
			}
			if !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("%v does not match storage.ErrNotFound: the AS would not answer invalid_client", err)
			}
			if n := re.r.CacheLen(); n != 0 {
				t.Errorf("%d documents cached after a failure", n)
			}
			if n, _ := re.store.CountClients(context.Background(), ""); n != 0 {
				t.Errorf("%d clients stored after a failure", n)
			}
		})
	}
	if n := stranger.hitsOf("/client.json"); n != 0 {
		t.Errorf("the non-allowlisted server was reached %d times", n)
	}
	if n := d.hitsOf("/ok.json"); n != 0 {
		t.Errorf("the redirect was followed %d times", n)
	}
}

func TestCIMDRefusesBadDocuments(t *testing.T) {
	d := newDocServer(t)
	with := func(mod func(m map[string]any)) map[string]any { m := claudeDoc(); mod(m); return m }
	cases := []struct {
		name string
		doc  map[string]any
		raw  string // served verbatim when set
		code string
	}{
		{"refuses a client_id that differs from the URL", with(func(m map[string]any) { m["client_id"] = "https://claude.ai/oauth/mcp-oauth-client-metadata" }), "", "invalid_client_metadata"},
		{"refuses a client_id differing by a trailing slash", with(func(m map[string]any) { m["client_id"] = d.url("/doc/1/") }), "", "invalid_client_metadata"},
		{"refuses a document without client_name", with(func(m map[string]any) { delete(m, "client_name") }), "", "invalid_client_metadata"},
		{"refuses a document without redirect_uris", with(func(m map[string]any) { delete(m, "redirect_uris") }), "", "invalid_redirect_uri"},
		{"refuses client_secret_basic", with(func(m map[string]any) { m["token_endpoint_auth_method"] = "client_secret_basic" }), "", "invalid_client_metadata"},
		{"refuses client_secret_post", with(func(m map[string]any) { m["token_endpoint_auth_method"] = "client_secret_post" }), "", "invalid_client_metadata"},
		{"refuses a document carrying a client_secret", with(func(m map[string]any) { m["client_secret"] = "s3cret" }), "", "invalid_client_metadata"},
		{"refuses a redirect URI with a fragment", with(func(m map[string]any) { m["redirect_uris"] = []string{"https://claude.ai/cb#f"} }), "", "invalid_redirect_uri"},
		{"refuses http redirect URIs off loopback", with(func(m map[string]any) { m["redirect_uris"] = []string{"http://claude.ai/cb"} }), "", "invalid_redirect_uri"},
		{"refuses private_key_jwt without keys", with(func(m map[string]any) { m["token_endpoint_auth_method"] = "private_key_jwt" }), "", "invalid_client_metadata"},
		{"refuses a document granting only client_credentials", with(func(m map[string]any) { m["grant_types"] = []string{"client_credentials"} }), "", "invalid_client_metadata"},
		{"refuses a client_name with control characters", with(func(m map[string]any) { m["client_name"] = "Claude\r\nAdmin" }), "", "invalid_client_metadata"},
		{"refuses a document that is not JSON", nil, "<html>hi</html>", "invalid_client_metadata"},
		{"refuses a JSON array", nil, `[1,2]`, "invalid_client_metadata"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			re := newResolver(t, d, nil)
			path := fmt.Sprintf("/doc/%d", i)
			var id string
			if tc.raw != "" {
				id = d.url(path)
				d.handle(path, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(tc.raw)) })
			} else {
				id = d.serve(path, tc.doc, "max-age=3600")
			}
			c, err := re.r.ResolveClient(context.Background(), id)
			var me *dcr.MetadataError
			if c != nil || !errors.Is(err, dcr.ErrInvalidDocument) || !errors.As(err, &me) || me.Code != tc.code {
				t.Fatalf("ResolveClient = %v, %v; want ErrInvalidDocument with %s", c, err, tc.code)
			}
			if !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("%v does not match storage.ErrNotFound", err)
			}
			if re.r.CacheLen() != 0 {
				t.Error("a refused document was cached")
			}
			if n, _ := re.store.CountClients(context.Background(), ""); n != 0 {
				t.Error("a refused document was stored")
			}
		})
	}
}

func TestCIMDCache(t *testing.T) {
	cases := []struct {
		name         string
		cacheControl string
		min, max     time.Duration
		stillCached  time.Duration // advance, expect no refetch
		expired      time.Duration // further advance, expect a refetch
	}{
		{"honours max-age", "public, max-age=120", time.Minute, time.Hour, 119 * time.Second, 2 * time.Second},
		{"bounds a huge max-age by MaxCacheTTL", "max-age=99999999", time.Minute, time.Hour, time.Hour - time.Second, 2 * time.Second},
		{"raises a tiny max-age to MinCacheTTL", "max-age=1", time.Minute, time.Hour, 59 * time.Second, 2 * time.Second},
		{"keeps no-store for MinCacheTTL only", "no-store", 30 * time.Second, time.Hour, 29 * time.Second, 2 * time.Second},
		{"uses MinCacheTTL without a header", "", 45 * time.Second, time.Hour, 44 * time.Second, 2 * time.Second},
		{"defaults MinCacheTTL to a minute", "", 0, 0, 59 * time.Second, 2 * time.Second},
		{"defaults MaxCacheTTL to a day", "max-age=99999999", 0, 0, 24*time.Hour - time.Second, 2 * time.Second},
		{"lets no-cache win over max-age", "no-cache, max-age=3600", time.Minute, time.Hour, 59 * time.Second, 2 * time.Second},
		{"lets no-store after max-age win", "max-age=3600, no-store", time.Minute, time.Hour, 59 * time.Second, 2 * time.Second},
		{"reads an out-of-range max-age as none", "max-age=99999999999999999999", time.Minute, time.Hour, 59 * time.Second, 2 * time.Second},
		{"reads a negative max-age as none", "max-age=-5", time.Minute, time.Hour, 59 * time.Second, 2 * time.Second},
		{"uses the last max-age", "max-age=3600, max-age=0", time.Minute, time.Hour, 59 * time.Second, 2 * time.Second},
		{"reads a quoted max-age", `max-age="120"`, time.Minute, time.Hour, 119 * time.Second, 2 * time.Second},
		{"accepts MinCacheTTL equal to MaxCacheTTL", "max-age=3600", time.Minute, time.Minute, 59 * time.Second, 2 * time.Second},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDocServer(t)
			re := newResolver(t, d, func(c *dcr.CIMDConfig) { c.MinCacheTTL, c.MaxCacheTTL = tc.min, tc.max })
			path := fmt.Sprintf("/cache/%d.json", i)
			id := d.serve(path, claudeDoc(), tc.cacheControl)
			ctx := context.Background()
			for step, want := range []int{1, 1} {
				if _, err := re.r.ResolveClient(ctx, id); err != nil {
					t.Fatal(err)
				}
				if got := d.hitsOf(path); got != want {
					t.Fatalf("step %d: %d fetches, want %d", step, got, want)
				}
			}
			re.clock.Advance(tc.stillCached)
			if _, err := re.r.ResolveClient(ctx, id); err != nil || d.hitsOf(path) != 1 {
				t.Fatalf("within TTL: %v, %d fetches", err, d.hitsOf(path))
			}
			re.clock.Advance(tc.expired)
			if _, err := re.r.ResolveClient(ctx, id); err != nil || d.hitsOf(path) != 2 {
				t.Fatalf("after TTL: %v, %d fetches", err, d.hitsOf(path))
			}
		})
	}
}

func TestCIMDFailuresAreNotCached(t *testing.T) {
	d := newDocServer(t)
	re := newResolver(t, d, nil)
	id := d.url("/flaky.json")
	good := claudeDoc()
	good["client_id"] = id
	body, _ := json.Marshal(good)
	var mu sync.Mutex
	fail := true
	d.handle("/flaky.json", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		w.Write(body)
	})
	if _, err := re.r.ResolveClient(context.Background(), id); !errors.Is(err, safehttp.ErrStatus) {
		t.Fatalf("first resolution: %v", err)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	if _, err := re.r.ResolveClient(context.Background(), id); err != nil {
		t.Fatalf("second resolution: %v", err)
	}
	if d.hitsOf("/flaky.json") != 2 {
		t.Fatalf("%d fetches, want 2", d.hitsOf("/flaky.json"))
	}
}

func TestCIMDCacheIsBounded(t *testing.T) {
	d := newDocServer(t)
	re := newResolver(t, d, func(c *dcr.CIMDConfig) { c.CacheSize = 2 })
	var ids []string
	for i := 0; i < 3; i++ {
		ids = append(ids, d.serve(fmt.Sprintf("/lru/%d.json", i), claudeDoc(), "max-age=3600"))
		if _, err := re.r.ResolveClient(context.Background(), ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	if n := re.r.CacheLen(); n != 2 {
		t.Fatalf("CacheLen = %d, want 2", n)
	}
	// The least recently used (the first) was evicted and is fetched again.
	re.r.ResolveClient(context.Background(), ids[0])
	if d.hitsOf("/lru/0.json") != 2 || d.hitsOf("/lru/2.json") != 1 {
		t.Fatalf("hits %v", d.hits)
	}
}

func TestCIMDConcurrentResolutionsFetchOnce(t *testing.T) {
	d := newDocServer(t)
	re := newResolver(t, d, nil)
	id := d.url("/busy.json")
	doc := claudeDoc()
	doc["client_id"] = id
	body, _ := json.Marshal(doc)
	d.handle("/busy.json", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond)
		w.Write(body)
	})
	var wg sync.WaitGroup
	type result struct {
		c   *storage.Client
		err error
	}
	results := make(chan result, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := re.r.ResolveClient(context.Background(), id)
			results <- result{c, err}
		}()
	}
	wg.Wait()
	close(results)
	for res := range results {
		if res.err != nil || res.c == nil || res.c.Name != "Claude" || res.c.ID != id {
			t.Fatalf("ResolveClient = %+v, %v; want the document's client", res.c, res.err)
		}
	}
	if n := d.hitsOf("/busy.json"); n != 1 {
		t.Fatalf("%d fetches for 20 concurrent resolutions, want 1", n)
	}
}

func TestCIMDRefreshKeepsUsageOfTheStoredClient(t *testing.T) {
	d := newDocServer(t)
	re := newResolver(t, d, nil)
	id := d.serve("/keep.json", claudeDoc(), "max-age=60")
	ctx := context.Background()
	if _, err := re.r.ResolveClient(ctx, id); err != nil {
		t.Fatal(err)
	}
	created := re.clock.Now()
	used := created.Add(10 * time.Second)
	if err := re.store.TouchClient(ctx, id, used); err != nil {
		t.Fatal(err)
	}
	re.clock.Advance(2 * time.Minute)
	if _, err := re.r.ResolveClient(ctx, id); err != nil {
		t.Fatal(err)
	}
	c, err := re.store.GetClient(ctx, id)
	if err != nil || !c.CreatedAt.Equal(created) || !c.LastUsedAt.Equal(used) || !c.UpdatedAt.Equal(re.clock.Now()) {
		t.Fatalf("stored %+v, %v", c, err)
	}
	if n, _ := re.store.CountClients(ctx, "cimd"); n != 1 {
		t.Fatalf("%d cimd clients stored", n)
	}
}

func TestCIMDTrustPolicy(t *testing.T) {
	d := newDocServer(t)
	id := d.serve("/trust.json", claudeDoc(), "")
	cases := []struct {
		name  string
		allow []string
		deny  []string
		ok    bool
	}{
		{"a denied host is refused without fetching", nil, []string{"127.0.0.1"}, false},
		{"a host outside the allow list is refused", []string{"*.claude.ai", "chatgpt.com"}, nil, false},
		{"a host on the allow list is fetched", []string{"127.0.0.1"}, nil, true},
		{"deny wins over allow", []string{"127.0.0.1"}, []string{"127.0.0.1"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := d.hitsOf("/trust.json")
			re := newResolver(t, d, func(c *dcr.CIMDConfig) { c.DomainAllow, c.DomainDeny = tc.allow, tc.deny })
			_, err := re.r.ResolveClient(context.Background(), id)
			if tc.ok != (err == nil) {
				t.Fatalf("ResolveClient: %v", err)
			}
			if !tc.ok && (!errors.Is(err, dcr.ErrUntrustedDomain) || !errors.Is(err, storage.ErrNotFound) || d.hitsOf("/trust.json") != before) {
				t.Fatalf("err %v, fetched %d times", err, d.hitsOf("/trust.json")-before)
			}
		})
	}
}

func TestIsMetadataURL(t *testing.T) {
	cases := []struct {
		id   string
		want bool
	}{
		{"https://claude.ai/oauth/mcp-oauth-client-metadata", true},
		{"https://chatgpt.com/oauth/client.json", true},
		{"https://example.com:8443/c?v=1", true},
		{"https://claude.ai", false},
		{"https://claude.ai/", false},
		{"http://claude.ai/client.json", false},
		{"https://claude.ai/client.json#x", false},
		{"https://user@claude.ai/client.json", false},
		{"https://claude.ai/a/../client.json", false},
		{"https://claude.ai/a/%2e%2e/client.json", false},
		{"mcp_Zm9vYmFy", false},
		{"", false},
		{longID(2048), true},
		{longID(2049), false},
		{"HTTPS://claude.ai/client.json", false},
		{"https://claude.ai/a b.json", false},
		{"https://claude.ai/a\x01b.json", false},
		{"https://claude.ai/a\x7fb.json", false},
		{`https://claude.ai/a\b.json`, false},
		{"https:///client.json", false},
		{"https://claude.ai:x/client.json", false},
		{"https://claude.ai/?client", false},
		{"https://claude.ai/./client.json", false},
		{"https://claude.ai/a/..", false},
		{"https://claude.ai/%2E/client.json", false},
		{"https://claude.ai/a/.%2e/client.json", false},
		{"https://claude.ai/a/%2e./client.json", false},
		{"https://claude.ai/a/...json", true},
	}
	for _, tc := range cases {
		if got := dcr.IsMetadataURL(tc.id); got != tc.want {
			t.Errorf("IsMetadataURL(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
	re := newResolver(t, newDocServer(t), nil)
	if _, err := re.r.ResolveClient(context.Background(), "mcp_abc"); !errors.Is(err, dcr.ErrNotMetadataURL) || !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("ResolveClient(non-URL) = %v", err)
	}
}

// longID is a metadata URL of exactly n bytes.
func longID(n int) string {
	const prefix = "https://claude.ai/"
	return prefix + strings.Repeat("a", n-len(prefix))
}

func TestNewCIMDResolverRefusesMaxCacheTTLBelowMin(t *testing.T) {
	_, err := dcr.NewCIMDResolver(dcr.CIMDConfig{MinCacheTTL: time.Hour, MaxCacheTTL: time.Minute, Logger: quietLogger()})
	if err == nil || !strings.Contains(err.Error(), "MaxCacheTTL is below MinCacheTTL") {
		t.Fatalf("NewCIMDResolver = %v; want the MaxCacheTTL refusal", err)
	}
}

// A refused document is logged to the configured logger with its client id.
func TestCIMDRefusalIsLoggedToTheConfiguredLogger(t *testing.T) {
	d := newDocServer(t)
	var buf syncBuffer
	re := newResolver(t, d, func(c *dcr.CIMDConfig) { c.Logger = slog.New(slog.NewTextHandler(&buf, nil)) })
	id := d.url("/absent.json")
	if _, err := re.r.ResolveClient(context.Background(), id); !errors.Is(err, safehttp.ErrStatus) {
		t.Fatalf("ResolveClient = %v; want ErrStatus", err)
	}
	if got := buf.String(); !strings.Contains(got, `msg="dcr: client metadata document refused"`) || !strings.Contains(got, "client_id="+id) {
		t.Fatalf("log %q lacks the refusal of %s", got, id)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and the test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// ParseDocument applies the size cap: a document of exactly MaxBytes is
// parsed, one byte more is refused.
func TestParseDocumentSizeCap(t *testing.T) {
	const id = "https://client.example/oauth/client.json"
	doc := claudeDoc()
	doc["client_id"] = id
	body, _ := json.Marshal(doc)
	r, err := dcr.NewCIMDResolver(dcr.CIMDConfig{MaxBytes: int64(len(body)), Scopes: []string{"mcp:read"}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := r.ParseDocument(id, body); err != nil || c.ID != id || c.Name != "Claude" {
		t.Fatalf("ParseDocument(%d bytes, cap %d) = %+v, %v", len(body), len(body), c, err)
	}
	_, err = r.ParseDocument(id, append(body, ' '))
	var me *dcr.MetadataError
	want := fmt.Sprintf("document larger than %d bytes", len(body))
	if !errors.Is(err, dcr.ErrInvalidDocument) || !errors.As(err, &me) || me.Description != want {
		t.Fatalf("ParseDocument(%d bytes, cap %d) = %v; want %q", len(body)+1, len(body), err, want)
	}
	if _, err := r.ParseDocument("https://client.example/", body); !errors.Is(err, dcr.ErrNotMetadataURL) {
		t.Fatalf("ParseDocument(root URL) = %v; want ErrNotMetadataURL", err)
	}
}
