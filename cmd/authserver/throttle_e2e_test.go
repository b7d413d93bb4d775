package main

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/internal/password"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
)

var (
	aliceHashOnce sync.Once
	aliceHash     string
)

const alicePassword = "alice-password-0123"

func aliceUser(t *testing.T) string {
	t.Helper()
	aliceHashOnce.Do(func() {
		h, err := password.Hash(alicePassword)
		if err != nil {
			panic(err)
		}
		aliceHash = h
	})
	return aliceHash
}

// proxiedConfig is a configuration with one user, behind a reverse proxy on
// 127.0.0.1 (the test itself, which sets X-Forwarded-For).
func proxiedConfig(t *testing.T, issuer, listen, storage string) string {
	return fmt.Sprintf(`issuer: %s
listen: %s
storage: %s
secret: ${AUTHSERVER_SECRET}
trusted_proxies: [127.0.0.1]
resources:
  - uri: http://127.0.0.1:8080/mcp
    scopes: [mcp:tools]
users:
  - username: alice
    password_hash: %q
registration:
  rate_limit: {per_minute: 1, burst: 2}
`, issuer, listen, storage, aliceUser(t))
}

// loginFrom signs in on /consents as a browser whose address the proxy
// reports as addr, and returns the final status: 200 signed in, 401 wrong
// password, 429 throttled.
func loginFrom(t *testing.T, issuer, addr, user, pw string) int {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	do := func(method string, body url.Values) (int, string) {
		var r io.Reader
		if body != nil {
			r = strings.NewReader(body.Encode())
		}
		req, _ := http.NewRequest(method, issuer+"/consents", r)
		if body != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req.Header.Set("X-Forwarded-For", addr)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	_, page := do(http.MethodGet, nil)
	form := url.Values{"username": {user}, "password": {pw}}
	for _, m := range hiddenInput.FindAllStringSubmatch(page, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	if form.Get("csrf") == "" {
		t.Fatalf("no login form on /consents:\n%s", page)
	}
	status, _ := do(http.MethodPost, form)
	return status
}

// TestLoginThrottleIsSharedAndSeesThroughTheProxy runs two instances on one
// PostgreSQL behind a trusted proxy. Failures spread over both instances
// lock the account at the failing address as one instance would, and so do
// registrations for the registration rate limit; failures
// from many forwarded addresses do not lock out a person at another one;
// and audit lines name the forwarded address, not the proxy's.
func TestLoginThrottleIsSharedAndSeesThroughTheProxy(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	procs := startMany(t, 2, func(issuer, listen string) string { return proxiedConfig(t, issuer, listen, dsn) })

	// 21 failures for other accounts from 21 forwarded addresses.
	for i := range 21 {
		if got := loginFrom(t, procs[i%2].issuer, fmt.Sprintf("198.51.100.%d", i+1), fmt.Sprintf("mallory%d", i), "guess"); got != http.StatusUnauthorized {
			t.Fatalf("failure %d: status %d, want 401", i+1, got)
		}
	}
	if got := loginFrom(t, procs[0].issuer, "203.0.113.9", "alice", alicePassword); got != http.StatusOK {
		t.Fatalf("alice from a new address after failures from others: %d, want 200", got)
	}

	// Failures for alice from one address, alternating between the
	// instances: the sixth is the last whose password is checked (5 free,
	// the next locks), on whichever instance it lands.
	for i := range 6 {
		if got := loginFrom(t, procs[i%2].issuer, "192.0.2.50", "alice", "wrong"); got != http.StatusUnauthorized {
			t.Fatalf("failure %d: status %d, want 401", i+1, got)
		}
	}
	for i := range 2 {
		if got := loginFrom(t, procs[i].issuer, "192.0.2.50", "alice", alicePassword); got != http.StatusTooManyRequests {
			t.Fatalf("instance %d after six failures shared between both: status %d, want 429", i, got)
		}
	}
	// Alice elsewhere is unaffected.
	if got := loginFrom(t, procs[1].issuer, "203.0.113.10", "alice", alicePassword); got != http.StatusOK {
		t.Fatalf("alice from her own address: %d, want 200", got)
	}

	// The registration rate limit (a burst of 2 per address) is shared too:
	// the third registration from one address is refused on either
	// instance, another address still registers.
	register := func(issuer, addr string) int {
		req, _ := http.NewRequest(http.MethodPost, issuer+"/register",
			strings.NewReader(`{"redirect_uris":["https://app.example/cb"],"token_endpoint_auth_method":"none"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", addr)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i, want := range []int{http.StatusCreated, http.StatusCreated, http.StatusTooManyRequests, http.StatusTooManyRequests} {
		if got := register(procs[i%2].issuer, "198.51.100.200"); got != want {
			t.Fatalf("registration %d from one address, alternating instances: %d, want %d", i+1, got, want)
		}
	}
	if got := register(procs[0].issuer, "198.51.100.201"); got != http.StatusCreated {
		t.Fatalf("registration from another address: %d, want 201", got)
	}

	logs := procs[0].stderr.String() + procs[1].stderr.String()
	for _, want := range []string{"event=login.failed", "addr=192.0.2.50", "addr=198.51.100.21", "event=login.throttled"} {
		if !strings.Contains(logs, want) {
			t.Errorf("no %q in the logs", want)
		}
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "msg=audit") && (strings.Contains(line, "addr=127.0.0.1") || strings.Contains(line, "addr=addr:")) {
			t.Errorf("an audit line names the proxy instead of the client: %s", line)
		}
	}
}
