package rsmiddleware

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// heldTransport answers no request: each waits until the test ends, so a
// background refresh that reached the network stays running and visible.
type heldTransport struct {
	started chan struct{}
	release chan struct{}
}

func (h *heldTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	select {
	case h.started <- struct{}{}:
	default:
	}
	select {
	case <-h.release:
	case <-r.Context().Done():
	}
	return nil, errors.New("held by the test")
}

// holdFetches makes every later fetch of v wait until the test ends.
func holdFetches(t *testing.T, v *Verifier) *heldTransport {
	h := &heldTransport{started: make(chan struct{}, 1), release: make(chan struct{})}
	v.client = &http.Client{Transport: h}
	t.Cleanup(func() { close(h.release) })
	return h
}

// TestKeysRefreshInTheBackgroundPastKeysMaxAge: a known key older than
// KeysMaxAge (default one hour) starts a background key set fetch; a key
// up to exactly that age does not.
func TestKeysRefreshInTheBackgroundPastKeysMaxAge(t *testing.T) {
	cases := []struct {
		name        string
		maxAge, age time.Duration
		want        bool
	}{
		{"2 s old, default", 0, 2 * time.Second, false},
		{"exactly the default hour", 0, time.Hour, false},
		{"past the default hour", 0, time.Hour + time.Second, true},
		{"exactly KeysMaxAge", 10 * time.Minute, 10 * time.Minute, false},
		{"past KeysMaxAge", 10 * time.Minute, 10*time.Minute + time.Second, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ks := newKeyServer(t)
			clk := &testClock{t: time.Now()}
			v := ks.verifier(t, func(c *Config) {
				c.Now, c.CacheSize, c.KeysMaxAge, c.RefreshInterval = clk.Now, -1, tc.maxAge, time.Second
			})
			if _, err := v.Verify(context.Background(), ks.mint(ks.claims())); err != nil {
				t.Fatal(err)
			}
			h := holdFetches(t, v)
			clk.Advance(tc.age)
			if k, err := v.key(context.Background(), ks.current, "ES256", clk.Now()); err != nil || k == nil {
				t.Fatalf("known key: %v, %v", k, err)
			}
			if got := v.bgRunning.Load(); got != tc.want {
				t.Fatalf("background refresh started: %v; want %v", got, tc.want)
			}
			if tc.want {
				<-h.started // the refresh reached the network
			}
		})
	}
}

// TestStatusListRefreshesInTheBackgroundFromThreeQuartersOfItsAge: a list
// 45 s or more into its 60 s max age is fetched again in the background
// while the cached list still decides; a younger list is not.
func TestStatusListRefreshesInTheBackgroundFromThreeQuartersOfItsAge(t *testing.T) {
	cases := []struct {
		age  time.Duration
		want bool
	}{
		{10 * time.Second, false},
		{44 * time.Second, false},
		{45 * time.Second, true},
		{59 * time.Second, true},
	}
	for _, tc := range cases {
		t.Run(tc.age.String(), func(t *testing.T) {
			ks := newKeyServer(t)
			clk := &testClock{t: time.Now()}
			v := ks.verifier(t, func(c *Config) { c.Now, c.CacheSize, c.StatusMaxAge = clk.Now, -1, time.Minute })
			tok := ks.statusToken(1)
			if _, err := v.Verify(context.Background(), tok); err != nil {
				t.Fatal(err)
			}
			l := v.lists[ks.issuer+"/statuslists/1"]
			if l == nil {
				t.Fatal("no status list tracked")
			}
			h := holdFetches(t, v)
			clk.Advance(tc.age)
			if _, err := v.Verify(context.Background(), tok); err != nil {
				t.Fatalf("the cached list decides: %v", err)
			}
			if got := l.bg.Load(); got != tc.want {
				t.Fatalf("background refresh started: %v; want %v", got, tc.want)
			}
			if tc.want {
				<-h.started // the refresh reached the network
			}
		})
	}
}

// TestDefaultClientTimesOutAfter10s: without HTTPClient the Verifier's
// fetches use a client with a 10 s timeout; a given client keeps its own.
func TestDefaultClientTimesOutAfter10s(t *testing.T) {
	ks := newKeyServer(t)
	v := ks.verifier(t, func(c *Config) { c.HTTPClient = nil })
	if v.client.Timeout != 10*time.Second {
		t.Fatalf("default client timeout %v; want 10s", v.client.Timeout)
	}
	v = ks.verifier(t, func(c *Config) { c.HTTPClient = &http.Client{Timeout: 3 * time.Second} })
	if v.client.Timeout != 3*time.Second {
		t.Fatalf("given client timeout %v; want 3s", v.client.Timeout)
	}
}

// TestUnknownKidUsesTheKeysFetchedWhileItWaited: a token with a kid new to
// the cached keys, whose lookup waits while another caller fetches the key
// set, is verified with the fetched set, with no fetch of its own.
func TestUnknownKidUsesTheKeysFetchedWhileItWaited(t *testing.T) {
	ks := newKeyServer(t)
	clk := &testClock{t: time.Now()}
	v := ks.verifier(t, func(c *Config) { c.Now, c.CacheSize, c.RefreshInterval = clk.Now, -1, time.Minute })
	if _, err := v.Verify(context.Background(), ks.mint(ks.claims())); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute) // past RefreshInterval: a waiter may fetch
	ks.rotate("new")

	v.refreshMu.Lock() // the other caller's fetch
	done := make(chan error, 1)
	go func() {
		_, err := v.key(context.Background(), "new", "ES256", clk.Now())
		done <- err
	}()
	waitUntilBlockedInKey(t)
	if err := v.refreshLocked(context.Background()); err != nil {
		t.Fatal(err)
	}
	v.lastTry = clk.Now()
	hits := ks.jwksHits.Load()
	v.refreshMu.Unlock()

	if err := <-done; err != nil {
		t.Fatalf("kid in the keys fetched while waiting: %v", err)
	}
	if got := ks.jwksHits.Load() - hits; got != 0 {
		t.Fatalf("%d more key set fetches; want none", got)
	}
}

// waitUntilBlockedInKey returns once a goroutine waits in Verifier.key for
// the refresh lock (so it has read the cached keys before the refresh).
func waitUntilBlockedInKey(t *testing.T) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "(*Verifier).key(") && strings.Contains(g, "Mutex") {
				return
			}
		}
		runtime.Gosched()
	}
}
