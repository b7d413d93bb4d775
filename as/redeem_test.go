package as

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// countingStore is a real store (memory) that counts the token-record
// calls made through it, per kind, and keeps the records created.
type countingStore struct {
	storage.Store
	mu      sync.Mutex
	gets    map[storage.TokenKind]int
	creates map[storage.TokenKind]int
	deletes map[storage.TokenKind]int
	created []storage.Token
	// clientGets and touches count GetClient and TouchClient calls.
	clientGets, touches int
	// afterGet, when set, runs after a GetToken has read its record and
	// before that record is returned.
	afterGet func(kind storage.TokenKind)
}

func newCountingStore() *countingStore {
	return &countingStore{Store: memory.New(), gets: map[storage.TokenKind]int{},
		creates: map[storage.TokenKind]int{}, deletes: map[storage.TokenKind]int{}}
}

func (c *countingStore) GetToken(ctx context.Context, kind storage.TokenKind, sig string) (*storage.Token, error) {
	c.mu.Lock()
	c.gets[kind]++
	hook := c.afterGet
	c.mu.Unlock()
	t, err := c.Store.GetToken(ctx, kind, sig)
	if hook != nil {
		hook(kind)
	}
	return t, err
}

func (c *countingStore) CreateToken(ctx context.Context, t *storage.Token) error {
	c.mu.Lock()
	c.creates[t.Kind]++
	c.created = append(c.created, *t)
	c.mu.Unlock()
	return c.Store.CreateToken(ctx, t)
}

func (c *countingStore) DeleteToken(ctx context.Context, kind storage.TokenKind, sig string) error {
	c.mu.Lock()
	c.deletes[kind]++
	c.mu.Unlock()
	return c.Store.DeleteToken(ctx, kind, sig)
}

func (c *countingStore) GetClient(ctx context.Context, id string) (*storage.Client, error) {
	c.mu.Lock()
	c.clientGets++
	c.mu.Unlock()
	return c.Store.GetClient(ctx, id)
}

func (c *countingStore) TouchClient(ctx context.Context, id string, at time.Time) error {
	c.mu.Lock()
	c.touches++
	c.mu.Unlock()
	return c.Store.TouchClient(ctx, id, at)
}

// reset zeroes the counters.
func (c *countingStore) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.gets)
	clear(c.creates)
	clear(c.deletes)
	c.created = nil
	c.clientGets, c.touches = 0, 0
}

func (c *countingStore) counts() (gets, creates, deletes map[storage.TokenKind]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cloneCounts(c.gets), cloneCounts(c.creates), cloneCounts(c.deletes)
}

func cloneCounts(m map[storage.TokenKind]int) map[storage.TokenKind]int {
	out := map[storage.TokenKind]int{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestCodeRedemptionReadsTheCodeRecordOnce counts the storage calls of one
// authorization-code redemption with PKCE (RFC 6749 §4.1.3, RFC 7636 §4.6):
// the code record is read once (fosite's second read in
// PopulateTokenEndpointResponse is answered from the request's memo), and
// the redemption writes exactly an access and a refresh token record.
func TestCodeRedemptionReadsTheCodeRecordOnce(t *testing.T) {
	cs := newCountingStore()
	h := newHarness(t, func(c *Config) { c.Store = cs })
	code, verifier := h.authorizeCode()
	if _, creates, _ := cs.counts(); creates[storage.KindAuthorizeCode] != 1 || creates[storage.KindPKCE] != 0 {
		t.Errorf("records created at the authorization endpoint: %v; want the code record alone (it carries the PKCE challenge)", creates)
	}
	cs.reset()
	resp, body := h.post("/token", url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {appRedirect}, "client_id": {"demo-app"}, "code_verifier": {verifier}}, "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("redemption: %d %v", resp.StatusCode, body)
	}
	gets, creates, deletes := cs.counts()
	if gets[storage.KindAuthorizeCode] != 1 || len(gets) != 1 {
		t.Errorf("records read by the redemption: %v; want the code record once", gets)
	}
	if len(deletes) != 0 {
		t.Errorf("records deleted by the redemption: %v; want none", deletes)
	}
	if creates[storage.KindAccessToken] != 1 || creates[storage.KindRefreshToken] != 1 || len(creates) != 2 {
		t.Errorf("records created by the redemption: %v; want one access and one refresh token", creates)
	}
}

// TestCodeRedemptionStoresTokenLifetimes checks the expiry of the records a
// code redemption writes: the refresh token record lives RefreshTokenTTL
// (not a default day), so garbage collection does not remove a refresh
// token that is still valid.
func TestCodeRedemptionStoresTokenLifetimes(t *testing.T) {
	cs := newCountingStore()
	const rtTTL = 72 * time.Hour
	h := newHarness(t, func(c *Config) { c.Store = cs; c.RefreshTokenTTL = rtTTL })
	code, verifier := h.authorizeCode()
	cs.reset()
	start := time.Now()
	resp, body := h.post("/token", url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {appRedirect}, "client_id": {"demo-app"}, "code_verifier": {verifier}}, "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("redemption: %d %v", resp.StatusCode, body)
	}
	cs.mu.Lock()
	created := append([]storage.Token(nil), cs.created...)
	cs.mu.Unlock()
	for _, tok := range created {
		if tok.Kind != storage.KindRefreshToken {
			continue
		}
		lo, hi := start.Add(rtTTL-time.Minute), time.Now().Add(rtTTL+time.Minute)
		if tok.ExpiresAt.Before(lo) || tok.ExpiresAt.After(hi) {
			t.Errorf("refresh token record expires %s after issue; want %s", tok.ExpiresAt.Sub(start).Round(time.Minute), rtTTL)
		}
		return
	}
	t.Fatal("the redemption created no refresh token record")
}

// TestCodeRedeemedBetweenTheChecksOfAnotherRequest lets a second request
// read the code record while it is active, then redeems the code with the
// right verifier before that request goes on. Whatever the second request
// presents, it is a second presentation of the code: it answers
// invalid_grant (RFC 6749 §5.2) and what the first redemption issued is
// revoked (RFC 6749 §4.1.2). The right verifier is stopped by the
// conditional UPDATE of the redemption, a wrong one by the PKCE check,
// which burns the code and finds it already redeemed.
func TestCodeRedeemedBetweenTheChecksOfAnotherRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		verify func(right string) string
	}{
		{"a racer with the right verifier is refused and revokes the grant", func(right string) string { return right }},
		{"a racer with a wrong verifier is refused and revokes the grant", func(string) string { return strings.Repeat("w", 43) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := newCountingStore()
			h := newHarness(t, func(c *Config) { c.Store = cs })
			code, verifier := h.authorizeCode()
			form := func(v string) url.Values {
				return url.Values{"grant_type": {"authorization_code"}, "code": {code},
					"redirect_uri": {appRedirect}, "client_id": {"demo-app"}, "code_verifier": {v}}
			}
			var first map[string]any
			var started atomic.Bool
			cs.mu.Lock()
			cs.afterGet = func(kind storage.TokenKind) {
				if kind != storage.KindAuthorizeCode {
					return
				}
				if started.Swap(true) {
					return // the redemption in between reads the code too
				}
				resp, body := h.post("/token", form(verifier), "", "")
				if resp.StatusCode != 200 {
					t.Errorf("the redemption in between: %d %v", resp.StatusCode, body)
				}
				first = body
			}
			cs.mu.Unlock()
			resp, body := h.post("/token", form(tc.verify(verifier)), "", "")
			if resp.StatusCode != 400 || body["error"] != "invalid_grant" {
				t.Errorf("the request that read the code first: %d %v; want 400 invalid_grant", resp.StatusCode, body)
			}
			at, _ := first["access_token"].(string)
			rt, _ := first["refresh_token"].(string)
			if at == "" || rt == "" {
				t.Fatalf("the redemption in between issued no tokens: %v", first)
			}
			if active(t, h, at) {
				t.Error("the access token of the code presented twice is still active")
			}
			if status, body := refresh(h, rt); status != 400 || body["error"] != "invalid_grant" {
				t.Errorf("the refresh token of the code presented twice: %d %v", status, body)
			}
		})
	}
}

// TestCodeWithSeparatePKCERecordStillRedeems covers codes written before
// the challenge moved into the code record (a rolling upgrade): their
// KindPKCE record is read, checked and deleted as before.
func TestCodeWithSeparatePKCERecordStillRedeems(t *testing.T) {
	for _, tc := range []struct {
		name       string
		right      bool
		wantStatus int
	}{
		{"the right verifier redeems the code and its PKCE record goes", true, 200},
		{"a wrong verifier burns the code", false, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := newCountingStore()
			h := newHarness(t, func(c *Config) { c.Store = cs })
			code, verifier := h.authorizeCode()
			separatePKCE(t, h, code)
			v := verifier
			if !tc.right {
				v = strings.Repeat("w", 43)
			}
			f := url.Values{"grant_type": {"authorization_code"}, "code": {code},
				"redirect_uri": {appRedirect}, "client_id": {"demo-app"}, "code_verifier": {v}}
			resp, body := h.post("/token", f, "", "")
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("redemption: %d %v; want %d", resp.StatusCode, body, tc.wantStatus)
			}
			sig := h.as.tokens.AuthorizeCodeSignature(context.Background(), code)
			if _, err := cs.Store.GetToken(context.Background(), storage.KindPKCE, sig); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("the PKCE record after the redemption: %v; want it deleted", err)
			}
			f.Set("code_verifier", verifier)
			if resp, body := h.post("/token", f, "", ""); resp.StatusCode != 400 || body["error"] != "invalid_grant" {
				t.Errorf("the code presented again: %d %v; want 400 invalid_grant", resp.StatusCode, body)
			}
		})
	}
}

// separatePKCE rewrites the record of code the way a version before the
// challenge moved into it wrote it: the code record without the challenge,
// and a KindPKCE record holding it.
func separatePKCE(t *testing.T, h *harness, code string) {
	t.Helper()
	ctx := context.Background()
	s := h.as.store
	sig := h.as.tokens.AuthorizeCodeSignature(ctx, code)
	tok, sr, err := s.load(ctx, storage.KindAuthorizeCode, sig)
	if err != nil || sr.PKCE == nil {
		t.Fatalf("code record: %v, challenge %v", err, sr)
	}
	pk := sr.PKCE
	sr.PKCE = nil
	c, err := s.clients.GetClient(ctx, sr.ClientID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.store.DeleteToken(ctx, storage.KindAuthorizeCode, sig); err != nil {
		t.Fatal(err)
	}
	req := sr.toRequest(c)
	if err := s.create(ctx, storage.KindAuthorizeCode, sig, req, tok.ExpiresAt, ""); err != nil {
		t.Fatal(err)
	}
	req.Form = url.Values{"code_challenge": {pk.Challenge}, "code_challenge_method": {pk.Method}}
	if err := s.CreatePKCERequestSession(ctx, sig, req); err != nil {
		t.Fatal(err)
	}
}

// TestStoredClientIsReadOncePerTokenRequest counts the client reads and
// LastUsedAt updates of token requests by a registered (RFC 7591) client:
// the client is read once per request, also where a stored grant is rebuilt
// around it (code, refresh token), and LastUsedAt is written only when it is
// older than storage.TouchGranularity.
func TestStoredClientIsReadOncePerTokenRequest(t *testing.T) {
	cs := newCountingStore()
	h := newHarness(t, func(c *Config) { c.Store = cs })
	ctx := context.Background()
	const secret = "dcr-secret-0123456789abcdefghij"
	if err := cs.CreateClient(ctx, &storage.Client{
		ID: "dcr-app", SecretHash: h.as.clients.hasher.Hash(secret), RedirectURIs: []string{appRedirect},
		GrantTypes: []string{"authorization_code", "refresh_token", "client_credentials"}, ResponseTypes: []string{"code"},
		TokenEndpointAuthMethod: "client_secret_basic", Source: "dcr", Scopes: []string{"mcp:tools"}, Resources: []string{mcpURI},
	}); err != nil {
		t.Fatal(err)
	}
	touchesAfter := func(name string, wantTouches int, do func() (int, map[string]any)) map[string]any {
		t.Helper()
		cs.reset()
		status, body := do()
		if status != 200 {
			t.Fatalf("%s: %d %v", name, status, body)
		}
		cs.mu.Lock()
		gets, touches := cs.clientGets, cs.touches
		cs.mu.Unlock()
		if gets != 1 || touches != wantTouches {
			t.Errorf("%s: the client was read %d times and touched %d times; want once and %d", name, gets, touches, wantTouches)
		}
		return body
	}
	post := func(f url.Values) func() (int, map[string]any) {
		return func() (int, map[string]any) {
			resp, body := h.post("/token", f, "dcr-app", secret)
			return resp.StatusCode, body
		}
	}
	touchesAfter("the first client-credentials token", 1, post(url.Values{"grant_type": {"client_credentials"}}))
	touchesAfter("a second client-credentials token within a minute", 0, post(url.Values{"grant_type": {"client_credentials"}}))

	conf := h.oauthConfig("dcr-app", secret)
	verifier := oauth2.GenerateVerifier()
	u := h.browser().authorize(conf.AuthCodeURL("state-abcdefgh", oauth2.S256ChallengeOption(verifier)))
	code := u.Query().Get("code")
	if code == "" {
		t.Fatalf("no code in %s", u)
	}
	tok := touchesAfter("a code redemption", 0, post(url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {appRedirect}, "code_verifier": {verifier}}))
	rt, _ := tok["refresh_token"].(string)
	h.clock.Advance(storage.TouchGranularity + time.Second)
	touchesAfter("a refresh more than a minute after the last use", 1, post(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}))
}
