package as

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

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
}

func newCountingStore() *countingStore {
	return &countingStore{Store: memory.New(), gets: map[storage.TokenKind]int{},
		creates: map[storage.TokenKind]int{}, deletes: map[storage.TokenKind]int{}}
}

func (c *countingStore) GetToken(ctx context.Context, kind storage.TokenKind, sig string) (*storage.Token, error) {
	c.mu.Lock()
	c.gets[kind]++
	c.mu.Unlock()
	return c.Store.GetToken(ctx, kind, sig)
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

// reset zeroes the counters.
func (c *countingStore) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.gets)
	clear(c.creates)
	clear(c.deletes)
	c.created = nil
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
	cs.reset()
	resp, body := h.post("/token", url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {appRedirect}, "client_id": {"demo-app"}, "code_verifier": {verifier}}, "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("redemption: %d %v", resp.StatusCode, body)
	}
	gets, creates, _ := cs.counts()
	if gets[storage.KindAuthorizeCode] != 1 {
		t.Errorf("the code record was read %d times; want once", gets[storage.KindAuthorizeCode])
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
