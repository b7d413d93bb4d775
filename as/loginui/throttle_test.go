package loginui

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// TestConcurrentLoginsCheckAtMostTheAllowance sends 40 login POSTs for one
// account at once, each with its own flow token from one session, the right
// password among them. Every attempt is reserved before its password is
// checked, so at most AccountFreeAttempts+1 of them get a password check
// (401 or a login); the rest are answered 429 without one.
func TestConcurrentLoginsCheckAtMostTheAllowance(t *testing.T) {
	const free, n = 3, 40
	// A lock of a minute outlasts the burst however loaded the machine is.
	h := newHarness(t, func(c *Config) { c.AccountFreeAttempts = free; c.LockoutBase = time.Minute })
	b := h.browser()
	forms := make([]form, n)
	for i := range forms {
		forms[i] = b.get("/consents").form(t, "username", "alice", "password", "wrong")
	}
	// The right password is in the last slot, so it is as likely as any
	// to be refused; what matters is how many passwords were checked.
	forms[n-1].Fields.Set("password", alicePW)
	statuses := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, f := range forms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, _ := http.NewRequest(http.MethodPost, h.srv.URL+f.Action, strings.NewReader(f.Fields.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			// Do not follow the 303 of a good login: it is counted as it is.
			c := &http.Client{Jar: b.c.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := c.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		}()
	}
	close(start)
	wg.Wait()
	checked, refused, succeeded := 0, 0, false
	for i, s := range statuses {
		switch s {
		case http.StatusSeeOther:
			succeeded = true
			checked++
		case http.StatusUnauthorized:
			checked++
		case http.StatusTooManyRequests:
			refused++
		default:
			t.Errorf("attempt %d: status %d", i, s)
		}
	}
	// A right password forgets the account's failures, so when it was among
	// the checked ones, the attempts reserved after it get a fresh allowance.
	allowed := free + 1
	if succeeded {
		allowed = 2 * (free + 1)
	}
	if checked > allowed || checked+refused != n {
		t.Fatalf("%d passwords checked, %d refused (right password accepted: %v); want at most %d checked", checked, refused, succeeded, allowed)
	}
}

// TestOneAddressDoesNotLockOutOthers: failures for other accounts from a
// shared address, and for alice from another address, leave alice's login
// from her own address working; only the account at the failing address is
// locked.
func TestOneAddressDoesNotLockOutOthers(t *testing.T) {
	var mu sync.Mutex
	addr := "198.51.100.1"
	h := newHarness(t, func(c *Config) {
		c.AccountFreeAttempts = 2
		c.AddressFreeAttempts = 10
		// The default first lock (2 s) could end before the next attempt
		// on a loaded machine, turning an expected 429 into a 200; a lock
		// of a minute outlasts every step of this test.
		c.LockoutBase = time.Minute
		c.ClientAddr = func(*http.Request) string { mu.Lock(); defer mu.Unlock(); return addr }
	})
	from := func(a string) { mu.Lock(); addr = a; mu.Unlock() }
	attempt := func(b *browser, user, pw string) int {
		return b.submit(b.get("/consents").form(t, "username", user, "password", pw)).StatusCode
	}
	b := h.browser()
	// Someone behind the shared address fails as bob until bob is locked there.
	for i := range 3 {
		if got := attempt(b, "bob", "wrong"); got != http.StatusUnauthorized {
			t.Fatalf("bob's failure %d: %d, want 401", i+1, got)
		}
	}
	if got := attempt(b, "bob", bobPW); got != http.StatusTooManyRequests {
		t.Fatalf("bob at the address after his failures: %d, want 429", got)
	}
	// Alice, behind the same address, is not locked out by that.
	if got := attempt(h.browser(), "alice", alicePW); got != http.StatusOK {
		t.Fatalf("alice behind the same address: %d, want 200", got)
	}
	// An attacker elsewhere locks alice's account at their own address only.
	from("203.0.113.66")
	for i := range 3 {
		if got := attempt(b, "alice", "wrong"); got != http.StatusUnauthorized {
			t.Fatalf("alice's failure %d at the attacker's address: %d, want 401", i+1, got)
		}
	}
	if got := attempt(b, "alice", alicePW); got != http.StatusTooManyRequests {
		t.Fatalf("alice at the attacker's address: %d, want 429", got)
	}
	from("198.51.100.1")
	if got := attempt(h.browser(), "alice", alicePW); got != http.StatusOK {
		t.Fatalf("alice at her own address: %d, want 200", got)
	}
	// The looser per-address cap still stops a spray of usernames.
	from("192.0.2.9")
	for i := range 11 {
		if got := attempt(b, "user"+url.QueryEscape(string(rune('a'+i))), "wrong"); got != http.StatusUnauthorized {
			t.Fatalf("spray attempt %d: %d, want 401", i+1, got)
		}
	}
	if got := attempt(h.browser(), "alice", alicePW); got != http.StatusTooManyRequests {
		t.Fatalf("after a spray from the address: %d, want 429", got)
	}
}

// TestRetryAfterIsTheLockRoundedUp: with the clock standing still, the
// Retry-After of a locked account is the remaining lock in whole seconds,
// rounded up (RFC 9110 §10.2.3), and the page says the same.
func TestRetryAfterIsTheLockRoundedUp(t *testing.T) {
	for _, tc := range []struct {
		base time.Duration
		want string
		text string
	}{
		{time.Minute, "60", "Please wait 60 seconds"},
		{1500 * time.Millisecond, "2", "Please wait 2 seconds"},
		{time.Second, "1", "Please wait 1 second "},
		{150 * time.Second, "150", "Please wait 3 minutes"},
		{5 * time.Minute, "300", "Please wait 5 minutes"},
	} {
		now := time.Now()
		h := newHarness(t, func(c *Config) {
			c.AccountFreeAttempts = 1
			c.LockoutBase = tc.base
			c.Now = func() time.Time { return now }
		})
		b := h.browser()
		for i := range 2 {
			if got := b.submit(b.get("/consents").form(t, "username", "alice", "password", "wrong")); got.StatusCode != http.StatusUnauthorized {
				t.Fatalf("lock %s, failure %d: %d, want 401", tc.base, i+1, got.StatusCode)
			}
		}
		got := b.submit(b.get("/consents").form(t, "username", "alice", "password", alicePW))
		if got.StatusCode != http.StatusTooManyRequests || got.Header.Get("Retry-After") != tc.want || !strings.Contains(got.Body, tc.text) {
			t.Errorf("lock %s: status %d Retry-After %q, want 429 and %s and %q in:\n%s", tc.base, got.StatusCode, got.Header.Get("Retry-After"), tc.want, tc.text, got.Body)
		}
	}
}

// TestThrottleDefaults: with nothing configured an account is locked after
// five free failures, for 2 seconds, doubling with each further failure up
// to 15 minutes. Fails if a default lock is zero (no lock at all) or
// another length.
func TestThrottleDefaults(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	h := newHarness(t, func(c *Config) {
		c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	})
	advance := func(secs int) { mu.Lock(); now = now.Add(time.Duration(secs) * time.Second); mu.Unlock() }
	b := h.browser()
	attempt := func(pw string) page {
		return b.submit(b.get("/consents").form(t, "username", "alice", "password", pw))
	}
	for i := range 6 {
		if got := attempt("wrong"); got.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i+1, got.StatusCode)
		}
	}
	wait := 2
	for _, next := range []int{4, 8, 16, 32, 64, 128, 256, 512, 900, 900} {
		if got := attempt(alicePW); got.StatusCode != http.StatusTooManyRequests || got.Header.Get("Retry-After") != strconv.Itoa(wait) {
			t.Fatalf("locked: status %d Retry-After %q, want 429 and %d", got.StatusCode, got.Header.Get("Retry-After"), wait)
		}
		advance(wait)
		if got := attempt("wrong"); got.StatusCode != http.StatusUnauthorized {
			t.Fatalf("after a lock of %d s: %d, want 401", wait, got.StatusCode)
		}
		wait = next
	}
	if got := attempt(alicePW); got.StatusCode != http.StatusTooManyRequests || got.Header.Get("Retry-After") != "900" {
		t.Fatalf("at the cap: status %d Retry-After %q, want 429 and 900", got.StatusCode, got.Header.Get("Retry-After"))
	}
}

// TestASuccessGivesTheAddressItsAttemptBack: a right password refunds the
// attempt it took from its address's allowance and forgets the account's
// failures, but leaves the address's other failures counted; a counter
// left at nothing is deleted. Fails if a success clears the address's
// count, refunds nothing, or keeps an account's failures.
func TestASuccessGivesTheAddressItsAttemptBack(t *testing.T) {
	const addr = "198.51.100.7"
	h := newHarnessAt(t, func(h *harness, c *Config) {
		c.AddressFreeAttempts = 4
		c.LockoutBase = time.Minute
		c.ClientAddr = func(*http.Request) string { return addr }
		c.Counters = h.store
	})
	attempt := func(user, pw string) int {
		b := h.browser()
		return b.submit(b.get("/consents").form(t, "username", user, "password", pw)).StatusCode
	}
	stored := func(key string) (storage.Counter, bool) {
		var c storage.Counter
		err := h.store.UpdateCounters(context.Background(), []string{key}, h.clock.Now(), func(cs []storage.Counter) ([]storage.Counter, error) {
			c = cs[0]
			return cs, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return c, !c.ExpiresAt.IsZero()
	}
	keyAddr := "login:addr:" + addr
	keyAcct := "login:acct:" + h.ui.throttleName("alice")
	keyAcctAddr := "login:acct+addr:" + h.ui.throttleName("alice") + "|" + addr
	if got := attempt("alice", alicePW); got != http.StatusOK {
		t.Fatalf("alice: %d, want 200", got)
	}
	for _, key := range []string{keyAddr, keyAcct, keyAcctAddr} {
		if c, ok := stored(key); ok {
			t.Fatalf("after one good login, %s is stored: %+v", key, c)
		}
	}
	for _, f := range []struct{ user, pw string }{{"user-a", "wrong"}, {"alice", "wrong"}} {
		if got := attempt(f.user, f.pw); got != http.StatusUnauthorized {
			t.Fatalf("%s: %d, want 401", f.user, got)
		}
	}
	if got := attempt("alice", alicePW); got != http.StatusOK {
		t.Fatalf("alice: %d, want 200", got)
	}
	if c, _ := stored(keyAddr); c.Count != 2 {
		t.Fatalf("the address's count after two failures and a success: %d, want 2", c.Count)
	}
	for _, key := range []string{keyAcct, keyAcctAddr} {
		if c, ok := stored(key); ok {
			t.Fatalf("after alice's good login, %s is stored: %+v", key, c)
		}
	}
	// Three more failures use up the address's allowance and lock it.
	for _, user := range []string{"user-c", "user-d", "user-e"} {
		if got := attempt(user, "wrong"); got != http.StatusUnauthorized {
			t.Fatalf("%s: %d, want 401", user, got)
		}
	}
	if got := attempt("alice", alicePW); got != http.StatusTooManyRequests {
		t.Fatalf("alice after the address's fifth failure: %d, want 429", got)
	}
}
