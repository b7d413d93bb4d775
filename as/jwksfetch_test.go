package as

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// TestJWKSFetcherCache pins when a private_key_jwt client's jwks_uri is
// fetched again: never within jwksCacheTTL of the last fetch, always when
// fosite asks to ignore the cache (a kid not in the cached set), from
// jwksCacheTTL on, and after the cache of jwksCacheLimit documents was
// cleared to take one more.
func TestJWKSFetcherCache(t *testing.T) {
	key, err := ecdsaKey()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	fetches := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fetches[r.URL.RequestURI()]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "ES256"}}})
	}))
	t.Cleanup(srv.Close)
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	j := &jwksFetcher{client: srv.Client(), now: clk.Now, cache: map[string]jwksEntry{}}
	ctx := context.Background()
	a, b := srv.URL+"/a", srv.URL+"/b"
	resolve := func(step, loc string, ignoreCache bool, wantFetches int) {
		t.Helper()
		set, err := j.Resolve(ctx, loc, ignoreCache)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if len(set.Keys) != 1 || set.Keys[0].KeyID != "k1" || set.Keys[0].Use != "sig" {
			t.Fatalf("%s: keys %+v", step, set.Keys)
		}
		mu.Lock()
		n := fetches[loc[len(srv.URL):]]
		mu.Unlock()
		if n != wantFetches {
			t.Errorf("%s: %s fetched %d times, want %d", step, loc, n, wantFetches)
		}
	}
	resolve("first use", a, false, 1)
	clk.Advance(jwksCacheTTL - time.Second)
	resolve("within the TTL", a, false, 1)
	resolve("another document", b, false, 1)
	// Fails if caching one document evicts the others.
	resolve("the first again, within the TTL", a, false, 1)
	// Fails if the cache answers although fosite asked to ignore it.
	resolve("ignoring the cache", a, true, 2)
	clk.Advance(jwksCacheTTL)
	// Fails if a document exactly jwksCacheTTL old is still used.
	resolve("exactly the TTL after the last fetch", a, false, 3)

	// Fill the cache to its limit: a and b, and the rest.
	for i := len(j.cache); i < jwksCacheLimit; i++ {
		if _, err := j.Resolve(ctx, fmt.Sprintf("%s/fill?%d", srv.URL, i), false); err != nil {
			t.Fatal(err)
		}
	}
	if len(j.cache) != jwksCacheLimit {
		t.Fatalf("cache holds %d documents, want %d", len(j.cache), jwksCacheLimit)
	}
	resolve("a at the limit, still cached", a, false, 3)
	// One more document clears the cache first, so a is fetched again.
	resolve("one more document", srv.URL+"/one-more", false, 1)
	resolve("a after the cache was cleared", a, false, 4)
}
