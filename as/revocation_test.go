package as

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"golang.org/x/oauth2"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/as/loginui"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// statusOf fetches the server's Token Status List, checks it as a
// resource server would (typ, signature by the JWKS, sub) and returns the
// status bit of the access token's index.
func statusOf(t *testing.T, h *harness, accessToken string) bool {
	t.Helper()
	_, c := h.claims(accessToken)
	st, _ := c["status"].(map[string]any)
	ref, _ := st["status_list"].(map[string]any)
	idx, ok := ref["idx"].(float64)
	if !ok || ref["uri"] != h.issuer+statusListPath {
		t.Fatalf("access token status claim %v, want idx and uri %s", c["status"], h.issuer+statusListPath)
	}
	return bitOf(t, statusBits(t, h), int(idx))
}

// statusListToken fetches h's Token Status List token.
func statusListToken(t *testing.T, h *harness) []byte {
	t.Helper()
	resp, err := http.Get(h.issuer + statusListPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/statuslist+jwt" {
		t.Fatalf("status list: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	return body
}

// statusBits checks h's list token as a resource server would (typ,
// signature by the JWKS, sub, iss, bits) and returns the decompressed
// list.
func statusBits(t *testing.T, h *harness) []byte {
	t.Helper()
	typ, lc := h.claims(string(statusListToken(t, h)))
	if typ != "statuslist+jwt" || lc["sub"] != h.issuer+statusListPath || lc["iss"] != h.issuer {
		t.Fatalf("status list token typ %q claims %v", typ, lc)
	}
	sl, _ := lc["status_list"].(map[string]any)
	if sl["bits"] != float64(1) {
		t.Fatalf("status list bits %v, want 1", sl["bits"])
	}
	raw, err := base64.RawURLEncoding.DecodeString(sl["lst"].(string))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zlib.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	bits, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return bits
}

// bitOf is the status bit of index i (§4.1: bit i%8 of byte i/8).
func bitOf(t *testing.T, bits []byte, i int) bool {
	t.Helper()
	if i/8 >= len(bits) {
		t.Fatalf("index %d beyond the list (%d bytes)", i, len(bits))
	}
	return bits[i/8]&(1<<(i%8)) != 0
}

// statusIdx is the status index of an access token (its status claim).
func statusIdx(t *testing.T, h *harness, accessToken string) int {
	t.Helper()
	_, c := h.claims(accessToken)
	st, _ := c["status"].(map[string]any)
	ref, _ := st["status_list"].(map[string]any)
	idx, ok := ref["idx"].(float64)
	if !ok {
		t.Fatalf("status claim %v", c["status"])
	}
	return int(idx)
}

// revokeOnConsentsPage logs b in (if needed) on /consents and presses
// "Revoke access" for the page's only application.
func revokeOnConsentsPage(t *testing.T, h *harness, b *browser) {
	t.Helper()
	p := b.get(h.issuer + "/consents")
	if strings.Contains(p.Body, `name="password"`) {
		p = b.submit(p, "username", "alice", "password", alicePW)
	}
	if !strings.Contains(p.Body, `value="revoke"`) {
		t.Fatalf("consents page has no revoke form: %d\n%s", p.StatusCode, p.Body)
	}
	// The page also lists the person's sessions, each with its own form.
	for _, f := range formRE.FindAllString(p.Body, -1) {
		if strings.Contains(f, `value="revoke"`) {
			p.Body = f
			break
		}
	}
	p = b.submit(p)
	if p.StatusCode != http.StatusOK || strings.Contains(p.Body, `value="revoke"`) {
		t.Fatalf("after revoking: %d\n%s", p.StatusCode, p.Body)
	}
}

func TestRevokingAConsentRevokesTheGrant(t *testing.T) {
	h := newHarness(t, nil)
	b := h.browser()
	conf := h.oauthConfig("demo-app", "", "mcp:tools")
	verifier := oauth2.GenerateVerifier()
	u := b.authorize(conf.AuthCodeURL("state-123456", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", mcpURI)))
	tok, err := conf.Exchange(context.Background(), u.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	// A refresh makes a second access token of the same grant.
	status, refreshed := refresh(h, tok.RefreshToken)
	if status != 200 {
		t.Fatalf("refresh before revoking: %d %v", status, refreshed)
	}
	if statusOf(t, h, tok.AccessToken) || statusOf(t, h, refreshed["access_token"].(string)) {
		t.Fatal("status bit set before any revocation")
	}

	revokeOnConsentsPage(t, h, b)

	if status, body := refresh(h, refreshed["refresh_token"].(string)); status != 400 || body["error"] != "invalid_grant" {
		t.Errorf("refresh after the consent was revoked: %d %v", status, body)
	}
	for _, at := range []string{tok.AccessToken, refreshed["access_token"].(string)} {
		if active(t, h, at) {
			t.Error("access token still active at introspection after the consent was revoked")
		}
		if !statusOf(t, h, at) {
			t.Error("status bit of the revoked grant not set")
		}
	}
	if _, err := h.store.GetConsent(context.Background(), "alice", "demo-app", mcpURI); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("remembered consent after revoking: %v", err)
	}
	// The next authorization asks for consent again.
	p := b.get(conf.AuthCodeURL("state-123456", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", mcpURI)))
	if !strings.Contains(p.Body, `value="approve"`) {
		t.Errorf("no consent page after revoking: %d", p.StatusCode)
	}
}

func TestRevokeGrantsByUserClientAndID(t *testing.T) {
	h := newHarness(t, nil)
	t1 := h.codeFlow("mcp:tools")
	h.clock.Advance(time.Second)
	t2 := h.codeFlow("mcp:tools")
	_, cc := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	ctx := context.Background()

	if _, err := h.as.RevokeGrants(ctx, GrantFilter{}); !errors.Is(err, ErrEmptyFilter) {
		t.Fatalf("RevokeGrants(empty) = %v, want ErrEmptyFilter", err)
	}
	all, err := h.as.ListGrants(ctx, GrantFilter{}, 0)
	if err != nil || len(all) != 3 {
		t.Fatalf("ListGrants = %d grants, %v; want 3", len(all), err)
	}
	alice, err := h.as.ListGrants(ctx, GrantFilter{User: "alice", Client: "demo-app"}, 0)
	if err != nil || len(alice) != 2 {
		t.Fatalf("ListGrants(alice, demo-app) = %+v, %v", alice, err)
	}
	for _, g := range alice {
		if g.User != "alice" || g.Client != "demo-app" || g.Orphaned || g.StatusIndex == 0 || g.CreatedAt.IsZero() || g.LastUsedAt.Before(g.CreatedAt) {
			t.Errorf("grant %+v", g)
		}
	}

	// One grant by id: the other stays, and so does the consent.
	first := alice[len(alice)-1] // oldest: t1
	got, err := h.as.RevokeGrants(ctx, GrantFilter{GrantID: first.ID})
	if err != nil || len(got) != 1 || got[0].ID != first.ID {
		t.Fatalf("RevokeGrants(grant) = %+v, %v", got, err)
	}
	if active(t, h, t1.AccessToken) || !active(t, h, t2.AccessToken) {
		t.Errorf("after revoking grant %s: t1 active %v, t2 active %v", first.ID, active(t, h, t1.AccessToken), active(t, h, t2.AccessToken))
	}
	if _, err := h.store.GetConsent(ctx, "alice", "demo-app", mcpURI); err != nil {
		t.Errorf("revoking one grant removed the consent: %v", err)
	}

	// By client: the client-credentials grant of ci-bot.
	got, err = h.as.RevokeGrants(ctx, GrantFilter{Client: "ci-bot"})
	if err != nil || len(got) != 1 || got[0].User != "" {
		t.Fatalf("RevokeGrants(ci-bot) = %+v, %v", got, err)
	}
	if active(t, h, cc["access_token"].(string)) || !statusOf(t, h, cc["access_token"].(string)) {
		t.Error("client-credentials token survived revoking its client's grants")
	}

	// By user: everything left of alice.
	if _, err := h.as.RevokeGrants(ctx, GrantFilter{User: "alice"}); err != nil {
		t.Fatal(err)
	}
	if active(t, h, t2.AccessToken) || !statusOf(t, h, t2.AccessToken) {
		t.Error("alice's token survived revoking her grants")
	}
	if left, _ := h.as.ListGrants(ctx, GrantFilter{}, 0); len(left) != 0 {
		t.Errorf("grants left: %+v", left)
	}
}

// restart builds a second server on the same storage and secret, as a
// restart with a changed configuration does, and serves it.
func restart(t *testing.T, h *harness, cfg Config, users []loginui.User) *harness {
	t.Helper()
	cfg.Revoker = NewGrantRevoker(cfg.Store, cfg.Logger)
	ui, err := loginui.New(loginui.Config{Users: users, Consents: h.store, JTIs: h.store, Secret: cfg.Secret, Now: h.clock.Now, Revoker: cfg.Revoker})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	cfg.UI = ui
	cfg.Issuer = "http://" + ts.Listener.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = s.Handler()
	ts.Start()
	t.Cleanup(ts.Close)
	return &harness{t: t, srv: ts, as: s, store: h.store, clock: h.clock, issuer: cfg.Issuer}
}

func TestRemovedOrDisabledUserIsRefusedAfterRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		users []loginui.User
	}{
		{"removed", []loginui.User{{Username: "bob", PasswordHash: aliceHash}}},
		{"disabled", []loginui.User{{Username: "alice", PasswordHash: aliceHash, Disabled: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg Config
			h := newHarness(t, func(c *Config) { cfg = *c })
			tok := h.codeFlow("mcp:tools")
			// The issuer stays the same across the restart: tokens name it.
			h2 := restart(t, h, cfg, tc.users)
			h2.issuer = h.issuer
			h2.srv = h.srv
			h.srv.Config.Handler = h2.as.Handler()
			if status, body := refresh(h, tok.RefreshToken); status != 400 || body["error"] != "invalid_grant" {
				t.Fatalf("refresh of a %s user's grant: %d %v", tc.name, status, body)
			}
			if active(t, h, tok.AccessToken) {
				t.Errorf("%s user's access token active at introspection", tc.name)
			}
			gs, err := h2.as.ListGrants(context.Background(), GrantFilter{User: "alice"}, 0)
			if err != nil || len(gs) != 1 || !gs[0].Orphaned || gs[0].OrphanedBecause != "user" {
				t.Fatalf("ListGrants after restart = %+v, %v; want one orphaned grant", gs, err)
			}
			// Login is refused too.
			b := h.browser()
			conf := h.oauthConfig("demo-app", "")
			p := b.get(conf.AuthCodeURL("state-123456", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
			p = b.submit(p, "username", "alice", "password", alicePW)
			if p.StatusCode != http.StatusUnauthorized || !strings.Contains(p.Body, `name="password"`) {
				t.Errorf("login of a %s user: %d", tc.name, p.StatusCode)
			}
		})
	}
}

func TestDeletedClientsGrantsDie(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	now := h.clock.Now()
	if err := h.store.CreateClient(ctx, &storage.Client{
		ID: "registered-app", Public: true, TokenEndpointAuthMethod: "none", Source: "dcr",
		RedirectURIs: []string{appRedirect}, GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		Scopes: []string{"mcp:tools"}, Resources: []string{mcpURI}, CreatedAt: now, UpdatedAt: now,
	}); err != nil {
		t.Fatal(err)
	}
	conf := h.oauthConfig("registered-app", "", "mcp:tools")
	verifier := oauth2.GenerateVerifier()
	u := h.browser().authorize(conf.AuthCodeURL("state-123456", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", mcpURI)))
	tok, err := conf.Exchange(ctx, u.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if !active(t, h, tok.AccessToken) {
		t.Fatal("fresh token inactive")
	}
	if err := h.store.DeleteClient(ctx, "registered-app"); err != nil {
		t.Fatal(err)
	}
	if active(t, h, tok.AccessToken) {
		t.Error("a deleted client's access token is active at introspection")
	}
	if !statusOf(t, h, tok.AccessToken) {
		t.Error("a deleted client's grant is not revoked in the status list")
	}
	resp, body := h.post("/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}, "client_id": {"registered-app"}}, "", "")
	if resp.StatusCode < 400 || resp.StatusCode >= 500 {
		t.Errorf("refresh for a deleted client: %d %v", resp.StatusCode, body)
	}
}

func TestStatusListIsServedAndAdvertised(t *testing.T) {
	h := newHarness(t, nil)
	md := h.as.Metadata()
	if md.StatusListAggregationEndpoint != h.issuer+"/statuslists" {
		t.Fatalf("status_list_aggregation_endpoint %q", md.StatusListAggregationEndpoint)
	}
	resp, err := http.Get(md.StatusListAggregationEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	var agg struct {
		StatusLists []string `json:"status_lists"`
	}
	err = json.NewDecoder(resp.Body).Decode(&agg)
	resp.Body.Close()
	if err != nil || len(agg.StatusLists) != 1 || agg.StatusLists[0] != h.as.StatusListURI() {
		t.Fatalf("aggregation %+v %v", agg, err)
	}
	// Client credentials tokens carry distinct indices, none revoked.
	_, a := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	_, b := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	_, ca := h.claims(a["access_token"].(string))
	_, cb := h.claims(b["access_token"].(string))
	if ca["status"] == nil || jsonString(ca["status"]) == jsonString(cb["status"]) {
		t.Fatalf("status claims %v and %v", ca["status"], cb["status"])
	}
	if statusOf(t, h, a["access_token"].(string)) {
		t.Fatal("fresh token revoked")
	}
	// RFC 7009 revocation flips the bit at once (this instance drops its cache).
	if resp, body := h.post("/revoke", url.Values{"token": {a["access_token"].(string)}}, "ci-bot", ciSecret); resp.StatusCode != 200 {
		t.Fatalf("revoke: %d %v", resp.StatusCode, body)
	}
	if !statusOf(t, h, a["access_token"].(string)) || statusOf(t, h, b["access_token"].(string)) {
		t.Fatal("after revoking a: want a revoked and b valid")
	}
	if resp, err := http.Post(h.issuer+statusListPath, "text/plain", nil); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST status list: %v %v", resp, err)
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestEncodeStatusBits(t *testing.T) {
	lst, err := encodeStatusBits(20, []int64{0, 3, 9, 19, 25})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(lst)
	zr, err := zlib.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	bits, _ := io.ReadAll(zr)
	// Index 0 is the least significant bit of the first byte (§4.1).
	if want := []byte{0b0000_1001, 0b0000_0010, 0b0000_1000}; !bytes.Equal(bits, want) {
		t.Fatalf("bits %08b, want %08b", bits, want)
	}
}

// TestStatusListTokenAndSharedStore: the list token's lifetime and ttl
// claims (§5.1); a list that covers indices another instance reserved
// after it was built (statusHeadroom); and a revocation made by another
// instance sharing the store, served once this instance's cache of
// statusListCache has passed.
func TestStatusListTokenAndSharedStore(t *testing.T) {
	a := newHarness(t, nil)
	b := newHarness(t, func(c *Config) { c.Store = a.store })
	_, tok := a.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	at := tok["access_token"].(string)
	idx := statusIdx(t, a, at)
	if bitOf(t, statusBits(t, b), idx) {
		t.Fatal("fresh token revoked")
	}
	typ, lc := b.claims(string(statusListToken(t, b)))
	iat, _ := lc["iat"].(float64)
	exp, _ := lc["exp"].(float64)
	if typ != "statuslist+jwt" || exp-iat != statusListLifetime.Seconds() || lc["ttl"] != StatusListTTL.Seconds() {
		t.Errorf("list token typ %q iat %v exp %v ttl %v; want exp iat+%v, ttl %v", typ, lc["iat"], lc["exp"], lc["ttl"], statusListLifetime, StatusListTTL)
	}
	// Another instance reserves a block after b built its list: b's cached
	// list still covers that block.
	first, err := a.store.AllocateStatusIndices(context.Background(), statusBlock)
	if err != nil {
		t.Fatal(err)
	}
	if n := int64(len(statusBits(t, b)) * 8); n <= first+statusBlock {
		t.Errorf("list of %d indices; want it to cover %d, reserved after it was built", n, first+statusBlock)
	}
	// a revokes; b serves its cached list for at most statusListCache.
	if resp, body := a.post("/revoke", url.Values{"token": {at}}, "ci-bot", ciSecret); resp.StatusCode != 200 {
		t.Fatalf("revoke: %d %v", resp.StatusCode, body)
	}
	b.clock.Advance(statusListCache)
	if !bitOf(t, statusBits(t, b), idx) {
		t.Error("another instance's revocation is not in the list after the cache time")
	}
}

// TestAGrantRevokerOfAnotherStoreIsRefused: the revoker given to the pages
// and the server must revoke in the server's store, or a revocation on
// /consents would leave the server's grants alive.
func TestAGrantRevokerOfAnotherStoreIsRefused(t *testing.T) {
	h := newHarness(t, nil)
	cfg := Config{
		Issuer:    h.issuer,
		Resources: []Resource{{URI: mcpURI, Scopes: []string{"mcp:tools"}, Default: true}},
		Store:     memory.New(),
		Secret:    []byte("0123456789abcdef0123456789abcdef-test-secret"),
		Revoker:   NewGrantRevoker(h.store, nil),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := New(ctx, cfg); err == nil || !strings.Contains(err.Error(), "Config.Revoker") {
		t.Fatalf("New with a revoker of another store: %v", err)
	}
	cfg.Revoker = NewGrantRevoker(cfg.Store, nil)
	if _, err := New(ctx, cfg); err != nil {
		t.Fatalf("New with a revoker of its store: %v", err)
	}
}
