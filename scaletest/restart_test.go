package scaletest

import (
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ccLoad sends client-credentials requests from a few workers until stopped,
// keeping every acknowledged token and counting the other answers.
type ccLoad struct {
	in      *instance
	stopped atomic.Bool
	wg      sync.WaitGroup

	mu       sync.Mutex
	tokens   []string       // access tokens answered 200
	statuses map[string]int // "503 temporarily_unavailable", ...
	bad      []string       // answers other than 200 and 503 temporarily_unavailable
	ok503    atomic.Int64
	ok200    atomic.Int64
}

func startCCLoad(in *instance, workers int) *ccLoad {
	l := &ccLoad{in: in, statuses: map[string]int{}}
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			c := in.client()
			for !l.stopped.Load() {
				a, err := postWith(c, in.issuer+"/token", url.Values{"grant_type": {"client_credentials"}}, botID, botSecret)
				l.record(a, err)
				if a.status != http.StatusOK {
					time.Sleep(20 * time.Millisecond) // a client backing off
				}
			}
		}()
	}
	return l
}

func (l *ccLoad) record(a answer, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		// The client's timeout is 30 s: a hanging server ends up here.
		l.statuses["transport error"]++
		l.bad = append(l.bad, err.Error())
	case a.status == http.StatusOK && a.AccessToken != "":
		l.tokens = append(l.tokens, a.AccessToken)
		l.ok200.Add(1)
	case a.status == http.StatusServiceUnavailable && a.Error == "temporarily_unavailable":
		l.statuses["503 temporarily_unavailable"]++
		l.ok503.Add(1)
	default:
		l.statuses[http.StatusText(a.status)+" "+a.Error]++
		l.bad = append(l.bad, a.raw)
	}
}

func (l *ccLoad) stop() {
	l.stopped.Store(true)
	l.wg.Wait()
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestPostgresRestartUnderLoad(t *testing.T) {
	t.Parallel()
	pg := privatePostgres(t)
	in := newInstance(t, conf{storage: pg.dsn(), grace: "0"})
	if !in.start(t) {
		t.FailNow()
	}

	// Grants committed before the restart: refresh tokens of code grants
	// and their access tokens.
	type grant struct{ access, refresh string }
	var grants []grant
	cs := codes(t, in, 5)
	spare := cs[4] // redeemed while the database is down, then after
	for _, c := range cs[:4] {
		a := in.redeem(t, c.Code, c.Verifier)
		if a.status != http.StatusOK || a.RefreshToken == "" {
			t.Fatalf("code redemption: %d %s", a.status, a.raw)
		}
		grants = append(grants, grant{a.AccessToken, a.RefreshToken})
	}

	l := startCCLoad(in, 4)
	defer l.stop()
	waitFor(t, 30*time.Second, "tokens issued under load", func() bool { return l.ok200.Load() >= 100 })

	pg.stop(t)
	down := l.ok503.Load()
	// While the database is down the AS answers 503 temporarily_unavailable
	// (RFC 6749 §4.1.2.1, §5.2 by extension), quickly and repeatedly.
	waitFor(t, 30*time.Second, "503 temporarily_unavailable answers while PostgreSQL is down", func() bool { return l.ok503.Load() >= down+20 })
	resp, err := in.client().Get(in.issuer + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/healthz while PostgreSQL is down: %s", resp.Status)
	}
	// Every endpoint that needs storage fails the same way, and a failed
	// redemption or refresh writes nothing (checked after the restart).
	down503 := []struct {
		name string
		a    answer
	}{
		{"introspection", in.post(t, "/introspect", url.Values{"token": {grants[0].access}}, botID, botSecret)},
		{"code redemption", in.redeem(t, spare.Code, spare.Verifier)},
		{"refresh", in.refresh(t, grants[0].refresh)},
	}
	for _, d := range down503 {
		if d.a.status != http.StatusServiceUnavailable || d.a.Error != "temporarily_unavailable" {
			t.Errorf("%s while PostgreSQL is down: %d %s", d.name, d.a.status, d.a.raw)
		}
	}

	pg.start(t)
	// The AS recovers by itself: same process, no restart.
	up := l.ok200.Load()
	waitFor(t, 60*time.Second, "tokens issued again after PostgreSQL came back", func() bool { return l.ok200.Load() >= up+100 })
	l.stop()
	select {
	case err := <-in.done:
		t.Fatalf("the authserver exited during the outage: %v", err)
	default:
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("answers: %d tokens, %v", len(l.tokens), l.statuses)
	if len(l.bad) > 0 {
		t.Fatalf("%d answers were neither 200 nor 503 temporarily_unavailable, first: %s", len(l.bad), l.bad[0])
	}

	// Nothing acknowledged was lost: every token answered 200 (before,
	// during and after the outage) is active, and every refresh token
	// committed before it still rotates (grace 0: also the one whose
	// refresh failed during the outage, so that failure rotated nothing).
	var inactive atomic.Int64
	var wg sync.WaitGroup
	work := make(chan string)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := in.client()
			for tok := range work {
				a, err := postWith(c, in.issuer+"/introspect", url.Values{"token": {tok}}, botID, botSecret)
				if err != nil || a.status != http.StatusOK || !a.Active {
					inactive.Add(1)
				}
			}
		}()
	}
	for _, tok := range l.tokens {
		work <- tok
	}
	close(work)
	wg.Wait()
	if n := inactive.Load(); n > 0 {
		t.Fatalf("%d of %d acknowledged access tokens are not active after the restart", n, len(l.tokens))
	}
	// The code whose redemption failed during the outage is still unused.
	if a := in.redeem(t, spare.Code, spare.Verifier); a.status != http.StatusOK {
		t.Fatalf("a code whose redemption failed while PostgreSQL was down: %d %s", a.status, a.raw)
	}
	for i, g := range grants {
		if !in.introspect(t, g.access) {
			t.Fatalf("grant %d: access token inactive after the restart", i)
		}
		if a := in.refresh(t, g.refresh); a.status != http.StatusOK || a.RefreshToken == "" {
			t.Fatalf("grant %d: refresh token committed before the restart: %d %s", i, a.status, a.raw)
		}
	}
}
