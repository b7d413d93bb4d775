package as

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// TestIssuerKeysAreKeptForTheirTTL: a fetched JWK Set that holds the kid
// is used until issuerKeysTTL, however many issuerKeysMinRefresh intervals
// pass; at issuerKeysTTL it is fetched again. Fails if a fresh set counts
// as stale.
func TestIssuerKeysAreKeptForTheirTTL(t *testing.T) {
	key := newIdPKey(t, "k1")
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{key.public()}})
	}))
	t.Cleanup(srv.Close)
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	k := &issuerKeys{issuer: "https://idp.example", jwksURI: srv.URL, client: srv.Client(), now: clk.Now}
	get := func(step string, want int32) {
		t.Helper()
		keys, err := k.keys(context.Background(), "k1")
		if err != nil || len(keys) != 1 {
			t.Fatalf("%s: %d keys, %v", step, len(keys), err)
		}
		if n := fetches.Load(); n != want {
			t.Errorf("%s: %d fetches, want %d", step, n, want)
		}
	}
	get("first use", 1)
	clk.Advance(issuerKeysMinRefresh + time.Second)
	get("past the refresh interval, within the TTL", 1)
	clk.Advance(issuerKeysTTL - issuerKeysMinRefresh - 2*time.Second)
	get("just within the TTL", 1)
	clk.Advance(time.Second)
	get("at the TTL", 2)
}
