package as

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
	"github.com/mcpauth/mcpauth/storage/postgres"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
	"github.com/mcpauth/mcpauth/storage/sqlite"
)

// raceRounds overrides the number of rounds of the race tests, for long
// local runs: go test ./as -run Race -racerounds 500.
var raceRounds = flag.Int("racerounds", 0, "rounds of each race test (0: the committed default)")

// raceLog sends the race clusters' logs (internal errors, audit events) to
// stderr, to see why an answer was a 5xx.
var raceLog = flag.Bool("racelog", false, "log what the race tests' servers log")

func rounds(def int) int {
	if *raceRounds > 0 {
		return *raceRounds
	}
	if testing.Short() {
		return max(1, def/10)
	}
	return def
}

// raceBackend opens the stores of a cluster of instances that share one
// database: memory and SQLite hand every instance the same Store (one
// process), PostgreSQL gives each instance a pool of its own on one schema,
// as separate processes have.
type raceBackend struct {
	name   string
	rounds int // default rounds: each backend's share of ~10 s
	open   func(t *testing.T, instances int) []storage.Store
}

func same(s storage.Store, n int) []storage.Store {
	out := make([]storage.Store, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// raceBackends are the three stores: memory, SQLite on a file, and
// PostgreSQL in a schema of its own (skipped without AUTHSERVER_TEST_POSTGRES
// unless CI is set).
var raceBackends = []raceBackend{
	{name: "memory", rounds: 200, open: func(_ *testing.T, n int) []storage.Store { return same(memory.New(), n) }},
	{name: "sqlite", rounds: 100, open: func(t *testing.T, n int) []storage.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "as.db"))
		if err != nil {
			t.Fatalf("sqlite.Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		if _, err := s.Migrate(context.Background()); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		return same(s, n)
	}},
	{name: "postgres", rounds: 200, open: func(t *testing.T, n int) []storage.Store {
		dsn, _ := pgtest.Schema(t)
		var out []storage.Store
		for i := 0; i < n; i++ {
			s, err := postgres.Open(context.Background(), dsn, postgres.Options{MaxConns: 2})
			if err != nil {
				t.Fatalf("postgres.Open: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			if i == 0 {
				if _, err := s.Migrate(context.Background()); err != nil {
					t.Fatalf("Migrate: %v", err)
				}
			}
			out = append(out, s)
		}
		return out
	}},
}

// cluster starts one AS instance per store, all under the issuer of the
// first, as behind a load balancer. mod may change every config.
func cluster(t *testing.T, stores []storage.Store, mod func(*Config)) []*harness {
	t.Helper()
	var hs []*harness
	for _, store := range stores {
		var issuer string
		if len(hs) > 0 {
			issuer = hs[0].issuer
		}
		hs = append(hs, newHarness(t, func(c *Config) {
			c.Store = store
			if *raceLog {
				c.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
			}
			if issuer != "" {
				c.Issuer = issuer
			}
			if mod != nil {
				mod(c)
			}
		}))
	}
	// Each harness's clock starts at the real time it was created; on a
	// loaded machine instances start seconds apart, more than a grace
	// window. Instances behind one load balancer share the time: move every
	// clock to the latest.
	latest := hs[0].clock.Now()
	for _, h := range hs {
		if n := h.clock.Now(); n.After(latest) {
			latest = n
		}
	}
	for _, h := range hs {
		h.clock.Advance(latest.Sub(h.clock.Now()))
	}
	return hs
}

// answer is one response of a race.
type answer struct {
	status int
	body   map[string]any
}

// raceOnce posts form to /token at every instance in turn, width times in
// all, released together, and returns the answers.
func raceOnce(hs []*harness, width int, form url.Values) []answer {
	out := make([]answer, width)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < width; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			resp, body := hs[i%len(hs)].post("/token", form, "", "")
			out[i] = answer{resp.StatusCode, body}
		}()
	}
	close(gate)
	wg.Wait()
	return out
}

// tally sums answers by status and error code, e.g. "200" or "400 invalid_grant".
func tally(ans []answer) map[string]int {
	m := map[string]int{}
	for _, a := range ans {
		k := fmt.Sprint(a.status)
		if e, _ := a.body["error"].(string); e != "" {
			k += " " + e
		}
		m[k]++
	}
	return m
}

func tallyString(m map[string]int) string {
	var ks []string
	for k, v := range m {
		ks = append(ks, fmt.Sprintf("%s x%d", k, v))
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// fiveHundreds lists the answers with a 5xx status.
func fiveHundreds(ans []answer) []answer {
	var out []answer
	for _, a := range ans {
		if a.status >= 500 {
			out = append(out, a)
		}
	}
	return out
}

// refreshForm is a refresh request of the public client demo-app.
func refreshForm(rt string) url.Values {
	return url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {"demo-app"}}
}

// raceEach posts one refresh request per token, at the instances in turn,
// released together.
func raceEach(hs []*harness, tokens []string) []answer {
	out := make([]answer, len(tokens))
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i, rt := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			resp, body := hs[i%len(hs)].post("/token", refreshForm(rt), "", "")
			out[i] = answer{resp.StatusCode, body}
		}()
	}
	close(gate)
	wg.Wait()
	return out
}

// clocks reads the instances' clocks.
func clocks(hs []*harness) []time.Time {
	out := make([]time.Time, len(hs))
	for i, h := range hs {
		out[i] = h.clock.Now()
	}
	return out
}

// setClocks sets the instances' clocks back to what clocks read.
func setClocks(hs []*harness, ts []time.Time) {
	for i, h := range hs {
		h.clock.mu.Lock()
		h.clock.t = ts[i]
		h.clock.mu.Unlock()
	}
}
