package rsmiddleware

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// serveStatusList signs the key server's status list (draft-ietf-oauth-status-list §5).
func (ks *keyServer) serveStatusList(w http.ResponseWriter, r *http.Request) {
	ks.statusHits.Add(1)
	ks.mu.Lock()
	raw := bytes.Clone(ks.statusBits)
	mod, typ, kid := ks.statusClaims, ks.statusTyp, ks.current
	ks.mu.Unlock()
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	c := map[string]any{
		"sub": ks.issuer + "/statuslists/1", "iss": ks.issuer, "iat": time.Now().Unix(),
		"exp": time.Now().Add(time.Hour).Unix(), "ttl": 300,
		"status_list": map[string]any{"bits": 1, "lst": base64.RawURLEncoding.EncodeToString(z.Bytes())},
	}
	if mod != nil {
		mod(c)
	}
	ks.mu.Lock()
	ct, body := ks.statusContentType, ks.statusBody
	ks.mu.Unlock()
	if ct == "" {
		ct = "application/statuslist+jwt"
	}
	if body == "" {
		body = ks.mintWith(kid, typ, c)
	}
	w.Header().Set("Content-Type", ct)
	_, _ = w.Write([]byte(body))
}

func (ks *keyServer) setStatus(idx int, revoked bool) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if revoked {
		ks.statusBits[idx/8] |= 1 << (idx % 8)
	} else {
		ks.statusBits[idx/8] &^= 1 << (idx % 8)
	}
}

// statusToken mints a token whose status claim names entry idx of the key
// server's list.
func (ks *keyServer) statusToken(idx int64) string {
	c := ks.claims()
	c["status"] = map[string]any{"status_list": map[string]any{"idx": idx, "uri": ks.issuer + "/statuslists/1"}}
	return ks.mint(c)
}

// testClock is a settable clock for the verifier.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestRevokedTokenIsRefusedWithinStatusMaxAge(t *testing.T) {
	ks := newKeyServer(t)
	clk := &testClock{t: time.Now()}
	v := ks.verifier(t, func(c *Config) { c.Now = clk.Now; c.StatusMaxAge = 20 * time.Second })
	ctx := context.Background()
	tok, other := ks.statusToken(5), ks.statusToken(6)
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatalf("valid token: %v", err)
	}
	ks.setStatus(5, true)
	// Within the staleness bound the cached list still says valid.
	clk.Advance(10 * time.Second)
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatalf("within StatusMaxAge: %v", err)
	}
	clk.Advance(11 * time.Second)
	if _, err := v.Verify(ctx, tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("revoked token after StatusMaxAge: %v, want ErrInvalidToken", err)
	}
	if _, err := v.Verify(ctx, other); err != nil {
		t.Fatalf("another entry of the list: %v", err)
	}
	// A token without a status claim is not affected.
	if _, err := v.Verify(ctx, ks.mint(ks.claims())); err != nil {
		t.Fatalf("token without status: %v", err)
	}
}

func TestStatusListTTLShortensMaxAge(t *testing.T) {
	ks := newKeyServer(t)
	ks.statusClaims = func(c map[string]any) { c["ttl"] = 5 }
	clk := &testClock{t: time.Now()}
	v := ks.verifier(t, func(c *Config) { c.Now = clk.Now; c.StatusMaxAge = time.Minute })
	tok := ks.statusToken(9)
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	ks.setStatus(9, true)
	clk.Advance(6 * time.Second)
	if _, err := v.Verify(context.Background(), tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("after the list's ttl: %v, want ErrInvalidToken", err)
	}
}

func TestStatusListKeepsWorkingWhileASIsDownThenFailsClosed(t *testing.T) {
	ks := newKeyServer(t)
	clk := &testClock{t: time.Now()}
	v := ks.verifier(t, func(c *Config) {
		c.Now = clk.Now
		c.StatusMaxAge = 10 * time.Second
		c.StatusFailAfter = time.Minute
	})
	ctx := context.Background()
	tok := ks.statusToken(3)
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatal(err)
	}
	ks.down.Store(true)
	for range 5 {
		clk.Advance(11 * time.Second)
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Fatalf("AS down, list %s old: %v", 11*time.Second, err)
		}
	}
	clk.Advance(10 * time.Second)
	if _, err := v.Verify(ctx, tok); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("AS down beyond StatusFailAfter: %v, want ErrUnavailable", err)
	}
	ks.down.Store(false)
	clk.Advance(2 * time.Second)
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatalf("AS back: %v", err)
	}
}

func TestStatusListFirstFetchFailureIsUnavailable(t *testing.T) {
	ks := newKeyServer(t)
	v := ks.verifier(t, nil)
	tok := ks.statusToken(3)
	// Keys first, then the status list goes down.
	if _, err := v.Verify(context.Background(), ks.mint(ks.claims())); err != nil {
		t.Fatal(err)
	}
	ks.statusTyp = "jwt"
	if _, err := v.Verify(context.Background(), tok); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("no usable list: %v, want ErrUnavailable", err)
	}
}

func TestBadStatusListsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(ks *keyServer)
	}{
		{"wrong typ", func(ks *keyServer) { ks.statusTyp = "at+jwt" }},
		{"wrong sub", func(ks *keyServer) {
			ks.statusClaims = func(c map[string]any) { c["sub"] = ks.issuer + "/statuslists/2" }
		}},
		{"wrong iss", func(ks *keyServer) { ks.statusClaims = func(c map[string]any) { c["iss"] = "https://evil.example" } }},
		{"expired", func(ks *keyServer) {
			ks.statusClaims = func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }
		}},
		{"no iat", func(ks *keyServer) { ks.statusClaims = func(c map[string]any) { delete(c, "iat") } }},
		{"bits 3", func(ks *keyServer) {
			ks.statusClaims = func(c map[string]any) { c["status_list"].(map[string]any)["bits"] = 3 }
		}},
		{"lst not zlib", func(ks *keyServer) {
			ks.statusClaims = func(c map[string]any) { c["status_list"].(map[string]any)["lst"] = "AAAA" }
		}},
		{"ttl 0", func(ks *keyServer) { ks.statusClaims = func(c map[string]any) { c["ttl"] = 0 } }},
		{"served as application/json", func(ks *keyServer) { ks.statusContentType = "application/json" }},
		{"not a JWT", func(ks *keyServer) { ks.statusBody = "not a jwt" }},
		{"signed by an unknown key", func(ks *keyServer) {
			ks.rotate("k2")
			ks.mu.Lock()
			ks.statusClaims = nil
			ks.mu.Unlock()
			// k2 is current for the list, but the verifier knows only k1
			// and refreshes keys at most every RefreshInterval (an hour).
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ks := newKeyServer(t)
			v := ks.verifier(t, nil)
			tok := ks.statusToken(1)
			if _, err := v.Verify(context.Background(), ks.mint(ks.claims())); err != nil {
				t.Fatal(err)
			}
			tc.mod(ks)
			if _, err := v.Verify(context.Background(), tok); err == nil {
				t.Fatal("token accepted with a bad status list")
			}
		})
	}
}

func TestStatusClaimsAreChecked(t *testing.T) {
	ks := newKeyServer(t)
	v := ks.verifier(t, nil)
	for name, st := range map[string]any{
		"uri of another host":                map[string]any{"status_list": map[string]any{"idx": 1, "uri": "https://evil.example/statuslists/1"}},
		"uri with the issuer as prefix only": map[string]any{"status_list": map[string]any{"idx": 1, "uri": ks.issuer + ".evil.example/l"}},
		"negative idx":                       map[string]any{"status_list": map[string]any{"idx": -1, "uri": ks.issuer + "/statuslists/1"}},
		"missing idx":                        map[string]any{"status_list": map[string]any{"uri": ks.issuer + "/statuslists/1"}},
		"idx beyond the list":                map[string]any{"status_list": map[string]any{"idx": 64 * 8, "uri": ks.issuer + "/statuslists/1"}},
		"not an object":                      "revoked",
	} {
		c := ks.claims()
		c["status"] = st
		if _, err := v.Verify(context.Background(), ks.mint(c)); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: %v, want ErrInvalidToken", name, err)
		}
	}
	ks2 := newKeyServer(t)
	v2 := ks2.verifier(t, func(c *Config) { c.IgnoreStatus = true })
	ks2.setStatus(2, true)
	if _, err := v2.Verify(context.Background(), ks2.statusToken(2)); err != nil {
		t.Fatalf("IgnoreStatus: %v", err)
	}
	if ks2.statusHits.Load() != 0 {
		t.Fatal("IgnoreStatus fetched the list")
	}
}

func TestCachedVerificationWithStatusDoesNotAllocate(t *testing.T) {
	ks := newKeyServer(t)
	v := ks.verifier(t, nil)
	tok := ks.statusToken(7)
	ctx := context.Background()
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatal(err)
	}
	hits := ks.statusHits.Load()
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("cached verification allocates %v times", n)
	}
	if ks.statusHits.Load() != hits {
		t.Fatal("cached verification fetched the list again")
	}
}

func TestStatusSnapshotEntries(t *testing.T) {
	// Two-bit entries: index 0 is the least significant pair of byte 0 (§4.1).
	s := &statusSnapshot{raw: []byte{0b1110_0100, 0b0000_0011}, bits: 2, n: 8}
	for idx, want := range []byte{0, 1, 2, 3, 3, 0, 0, 0} {
		got, ok := s.status(int64(idx))
		if !ok || got != want {
			t.Errorf("entry %d = %d %v, want %d", idx, got, ok, want)
		}
	}
	if _, ok := s.status(8); ok {
		t.Error("entry 8 of 8 found")
	}
}

func FuzzParseStatusList(f *testing.F) {
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	_, _ = zw.Write([]byte{1, 2, 3})
	_ = zw.Close()
	lst := base64.RawURLEncoding.EncodeToString(z.Bytes())
	f.Add([]byte(`{"sub":"https://as/s","iat":1,"ttl":30,"status_list":{"bits":1,"lst":"` + lst + `"}}`))
	f.Add([]byte(`{"sub":"https://as/s","iat":1,"status_list":{"bits":8,"lst":"eJwDAAAAAAE"}}`))
	f.Add([]byte(`{"sub":"https://as/s","iat":1,"ttl":-1,"status_list":{"bits":2,"lst":""}}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		now := time.Unix(1000, 0)
		s, err := parseStatusList(payload, "https://as/s", "https://as", now, time.Minute, 0)
		if err != nil {
			if s != nil || !errors.Is(err, errStatusList) {
				t.Fatalf("error %v with snapshot %v", err, s)
			}
			return
		}
		if s.maxAge <= 0 || s.maxAge > time.Minute || s.n != int64(len(s.raw))*8/int64(s.bits) || len(s.raw) > maxStatusListBytes {
			t.Fatalf("snapshot %+v", s)
		}
		for _, idx := range []int64{0, s.n - 1, s.n} {
			if _, ok := s.status(idx); ok != (idx >= 0 && idx < s.n) {
				t.Fatalf("status(%d) ok=%v of %d entries", idx, ok, s.n)
			}
		}
	})
}

// TestStatusListEdges: entry 0 is an entry; a list without exp is used; a
// list is used until exactly StatusMaxAge, then fetched again; while fresh,
// one fetch serves every token.
func TestStatusListEdges(t *testing.T) {
	ks := newKeyServer(t)
	ks.statusClaims = func(c map[string]any) { delete(c, "exp") }
	clk := &testClock{t: time.Now()}
	v := ks.verifier(t, func(c *Config) { c.Now = clk.Now; c.StatusMaxAge = 20 * time.Second; c.CacheSize = -1 })
	ctx := context.Background()
	tok := ks.statusToken(0)
	for range 2 {
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Fatalf("entry 0 of a list without exp: %v", err)
		}
	}
	if got := ks.statusHits.Load(); got != 1 {
		t.Fatalf("%d list fetches for two tokens within StatusMaxAge; want 1", got)
	}
	ks.setStatus(0, true)
	clk.Advance(20 * time.Second)
	if _, err := v.Verify(ctx, tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("revoked, at exactly StatusMaxAge: %v; want ErrInvalidToken", err)
	}
}

// TestStatusListBounds: a list of exactly maxStatusListBytes is used, one
// byte more is refused; with 2 bits per entry the list has a quarter as
// many entries as bits; at most maxStatusLists lists are followed.
func TestStatusListBounds(t *testing.T) {
	for _, tc := range []struct {
		size int
		ok   bool
	}{{maxStatusListBytes, true}, {maxStatusListBytes + 1, false}} {
		ks := newKeyServer(t)
		ks.statusBits = make([]byte, tc.size)
		v := ks.verifier(t, func(c *Config) { c.CacheSize = -1 })
		if _, err := v.Verify(context.Background(), ks.statusToken(1)); tc.ok != (err == nil) {
			t.Errorf("list of %d bytes: %v", tc.size, err)
		}
	}

	ks := newKeyServer(t)
	ks.statusClaims = func(c map[string]any) { c["status_list"].(map[string]any)["bits"] = 2 }
	v := ks.verifier(t, func(c *Config) { c.CacheSize = -1 })
	if _, err := v.Verify(context.Background(), ks.statusToken(255)); err != nil {
		t.Fatalf("last entry of a 2-bit list of 64 bytes: %v", err)
	}
	if _, err := v.Verify(context.Background(), ks.statusToken(256)); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "beyond") {
		t.Fatalf("entry 256 of a 2-bit list of 64 bytes: %v; want beyond the list", err)
	}

	ks = newKeyServer(t)
	v = ks.verifier(t, func(c *Config) { c.CacheSize = -1 })
	for i := range maxStatusLists + 1 {
		c := ks.claims()
		c["status"] = map[string]any{"status_list": map[string]any{"idx": 0, "uri": fmt.Sprintf("%s/statuslists/x%d", ks.issuer, i)}}
		_, err := v.Verify(context.Background(), ks.mint(c))
		if too := err != nil && strings.Contains(err.Error(), "too many status lists"); too != (i == maxStatusLists) {
			t.Fatalf("list %d: %v", i+1, err)
		}
	}
}

// TestStatusListDecidesUntilExactlyStatusFailAfter: while the AS is down
// the cached list decides until exactly StatusFailAfter after its fetch.
func TestStatusListDecidesUntilExactlyStatusFailAfter(t *testing.T) {
	ks := newKeyServer(t)
	clk := &testClock{t: time.Now()}
	v := ks.verifier(t, func(c *Config) {
		c.Now, c.StatusMaxAge, c.StatusFailAfter, c.CacheSize = clk.Now, 10*time.Second, time.Minute, -1
	})
	tok := ks.statusToken(3)
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	ks.down.Store(true)
	clk.Advance(time.Minute)
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("AS down, list exactly StatusFailAfter old: %v", err)
	}
}

// TestStatusListRetryBackOff: while the AS is down a stale list is fetched
// again at most once per statusRetry, and again as soon as it has passed.
func TestStatusListRetryBackOff(t *testing.T) {
	ks := newKeyServer(t)
	var tries atomic.Int32
	inner := ks.srv.Config.Handler
	ks.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/statuslists/") {
			tries.Add(1)
		}
		inner.ServeHTTP(w, r)
	})
	clk := &testClock{t: time.Now()}
	v := ks.verifier(t, func(c *Config) {
		c.Now, c.StatusMaxAge, c.StatusFailAfter, c.CacheSize = clk.Now, 10*time.Second, time.Hour, -1
	})
	tok := ks.statusToken(1)
	verify := func(want int32) {
		t.Helper()
		if _, err := v.Verify(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
		if got := tries.Load(); got != want {
			t.Fatalf("%d fetches of the list; want %d", got, want)
		}
	}
	verify(1)
	ks.down.Store(true)
	clk.Advance(11 * time.Second)
	verify(2) // stale: tried, failed, the cached list decides
	verify(2) // at the same instant: not tried again
	clk.Advance(statusRetry / 2)
	verify(2)
	clk.Advance(statusRetry / 2)
	verify(3) // statusRetry after the last try
}

// TestStatusListResponseSizeLimitIsInclusive: a list token of exactly
// maxFetchBytes is read whole and used; one byte more is refused.
func TestStatusListResponseSizeLimitIsInclusive(t *testing.T) {
	for _, tc := range []struct {
		size int
		ok   bool
	}{{maxFetchBytes, true}, {maxFetchBytes + 1, false}} {
		ks := newKeyServer(t)
		ks.statusBody = ks.paddedStatusListToken(t, tc.size)
		var logs lockedBuffer
		v := ks.verifier(t, func(c *Config) { c.CacheSize, c.Logger = -1, slog.New(slog.NewTextHandler(&logs, nil)) })
		_, err := v.Verify(context.Background(), ks.statusToken(1))
		if tc.ok != (err == nil) {
			t.Fatalf("list token of %d bytes: %v", tc.size, err)
		}
		if !tc.ok && !strings.Contains(logs.String(), "larger than") {
			t.Fatalf("list token of %d bytes: log %q; want larger than the limit", tc.size, logs.String())
		}
	}
}

// paddedStatusListToken is the key server's list token, all entries VALID,
// with a padding claim that makes it exactly size bytes long. Base64url
// skips some lengths of a segment, so the key id's length varies too.
func (ks *keyServer) paddedStatusListToken(t *testing.T, size int) string {
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	_, _ = zw.Write(make([]byte, 16))
	_ = zw.Close()
	now := time.Now()
	mint := func(kid string, n int) string {
		return ks.mintWith(kid, "statuslist+jwt", map[string]any{
			"sub": ks.issuer + "/statuslists/1", "iss": ks.issuer, "iat": now.Unix(),
			"exp": now.Add(time.Hour).Unix(), "ttl": 300, "pad": strings.Repeat("x", n),
			"status_list": map[string]any{"bits": 1, "lst": base64.RawURLEncoding.EncodeToString(z.Bytes())},
		})
	}
	ks.mu.Lock()
	key := ks.keys[ks.current]
	ks.mu.Unlock()
	for _, kid := range []string{"p", "pp", "ppp", "pppp"} {
		ks.mu.Lock()
		ks.keys[kid] = key
		ks.mu.Unlock()
		n := (size - len(mint(kid, 0))) * 3 / 4
		for range 8 {
			tok := mint(kid, n)
			if len(tok) == size {
				return tok
			}
			if len(tok) < size {
				n++
			} else {
				n--
			}
		}
	}
	t.Fatalf("no padding gives a list token of %d bytes", size)
	return ""
}
