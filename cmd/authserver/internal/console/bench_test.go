package console

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/ops"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/sqlite"
)

// benchSize is how many clients and people the benchmarks store.
const benchSize = 100_000

var (
	benchOnce    sync.Once
	benchConsole *Console
	benchErr     error
)

// benchSetup stores benchSize registered clients and benchSize people in
// a SQLite database (BENCH_CONSOLE_DB keeps it between runs) and builds the
// console over the real operations and authorization server.
func benchSetup(b *testing.B) *Console {
	b.Helper()
	benchOnce.Do(func() { benchConsole, benchErr = newBenchConsole() })
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchConsole
}

func newBenchConsole() (*Console, error) {
	ctx := context.Background()
	path := os.Getenv("BENCH_CONSOLE_DB")
	if path == "" {
		dir, err := os.MkdirTemp("", "console-bench")
		if err != nil {
			return nil, err
		}
		path = filepath.Join(dir, "bench.db")
	}
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	if _, err := st.Migrate(ctx); err != nil {
		return nil, err
	}
	if n, err := st.CountClients(ctx, "dcr"); err != nil {
		return nil, err
	} else if n < benchSize {
		if err := fill(ctx, st); err != nil {
			return nil, err
		}
	}
	secret := []byte(strings.Repeat("s", 32))
	srv, err := as.New(ctx, as.Config{Issuer: "http://127.0.0.1:9000", Resources: []as.Resource{{URI: "http://127.0.0.1:8080/mcp", Scopes: []string{"mcp:tools"}}},
		Store: st, Secret: secret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	o := &ops.Ops{Store: st, Secret: secret, Grants: srv, SigningAlg: "ES256"}
	return New(Config{Issuer: "http://127.0.0.1:9000", BaseURL: "http://127.0.0.1:9001/console", ClientID: "c", ClientSecret: "s", Resource: "r",
		Secret: secret, Ops: func() Operations { return o }, Sessions: st, Allowed: func(context.Context, string) (bool, error) { return true, nil },
		AuditKept: true, Logger: slog.New(slog.DiscardHandler)})
}

// fill stores the clients and people, 5,000 to a transaction.
func fill(ctx context.Context, st *sqlite.Store) error {
	now := time.Now()
	for start := 0; start < benchSize; start += 5000 {
		tx, err := st.BeginTX(ctx)
		if err != nil {
			return err
		}
		for i := start; i < start+5000; i++ {
			c := &storage.Client{ID: fmt.Sprintf("client-%06d", i), Name: fmt.Sprintf("Agent %d", i), Source: "dcr", Public: true,
				RedirectURIs: []string{"http://127.0.0.1/cb"}, GrantTypes: []string{"authorization_code"}, TokenEndpointAuthMethod: "none", CreatedAt: now, UpdatedAt: now}
			if i%3 == 0 {
				c.LastUsedAt = now
			}
			if err := st.CreateClient(tx, c); err != nil {
				return err
			}
			if _, err := st.RecordLogin(tx, &storage.User{Subject: fmt.Sprintf("corp:person-%06d", i), Upstream: "corp", UpstreamSubject: fmt.Sprint(i),
				Name: fmt.Sprintf("Person %d", i), Email: fmt.Sprintf("p%d@example.com", i), LastSeen: now}); err != nil {
				return err
			}
		}
		if err := st.Commit(tx); err != nil {
			return err
		}
	}
	return nil
}

// benchPage serves one page to a signed-in person, as the console does
// after its session check, and fails on anything but 200.
func benchPage(b *testing.B, h func(*Console) func(w io.Writer, target string) int, target string) {
	c := benchSetup(b)
	serve := h(c)
	b.ResetTimer()
	for b.Loop() {
		if code := serve(io.Discard, target); code != 200 {
			b.Fatalf("%s: %d", target, code)
		}
	}
}

func handlerOf(page func(*Console) pageFunc) func(*Console) func(io.Writer, string) int {
	return func(c *Console) func(io.Writer, string) int {
		s := &session{Subject: "bench", CSRF: "x"}
		return func(_ io.Writer, target string) int {
			w := httptest.NewRecorder()
			page(c)(w, httptest.NewRequest("GET", target, nil), s)
			return w.Code
		}
	}
}

type pageFunc = func(w http.ResponseWriter, r *http.Request, s *session)

func BenchmarkClientsFirstPage(b *testing.B) {
	benchPage(b, handlerOf(func(c *Console) pageFunc { return c.clients }), "/console/clients")
}

func BenchmarkClientsMiddlePage(b *testing.B) {
	benchPage(b, handlerOf(func(c *Console) pageFunc { return c.clients }), "/console/clients?after=client-050000")
}

func BenchmarkClientsSearch(b *testing.B) {
	benchPage(b, handlerOf(func(c *Console) pageFunc { return c.clients }), "/console/clients?q=client-0999")
}

func BenchmarkPeopleMiddlePage(b *testing.B) {
	benchPage(b, handlerOf(func(c *Console) pageFunc { return c.people }), "/console/people?after=corp:person-050000")
}

func BenchmarkPeopleSearch(b *testing.B) {
	benchPage(b, handlerOf(func(c *Console) pageFunc { return c.people }), "/console/people?q=corp:person-0999")
}

func BenchmarkClientPage(b *testing.B) {
	benchPage(b, handlerOf(func(c *Console) pageFunc { return c.showClient }), "/console/client?id=client-050000")
}

func BenchmarkAuditPage(b *testing.B) {
	benchPage(b, handlerOf(func(c *Console) pageFunc { return c.audit }), "/console/audit")
}

// BenchmarkOverviewCounts is the overview's first load, which counts
// every person and client (then kept for a minute).
func BenchmarkOverviewCounts(b *testing.B) {
	c := benchSetup(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.recount(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOverviewCached is the overview within the minute its counts
// are kept.
func BenchmarkOverviewCached(b *testing.B) {
	benchPage(b, handlerOf(func(c *Console) pageFunc { return c.overview }), "/console/")
}
