package as

import (
	"context"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/postgres"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
	"github.com/mcpauth/mcpauth/storage/sqlite"
)

// openPostgres opens a fresh, migrated PostgreSQL schema with at most
// maxConns connections (pgtest.Schema: skipped when AUTHSERVER_TEST_POSTGRES
// is unset, unless CI is set).
func openPostgres(t *testing.T, maxConns int32) *postgres.Store {
	t.Helper()
	dsn, _ := pgtest.Schema(t)
	s, err := postgres.Open(context.Background(), dsn, postgres.Options{MaxConns: maxConns})
	if err != nil {
		t.Fatalf("postgres.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

// openSQLite opens a fresh, migrated SQLite database in t.TempDir().
func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "as.db"))
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

// coreOnStore runs the protocol cases whose correctness rests on the
// backend (exactly-once code redemption, rotation with grace, family
// revocation, jti replay, transactions) against a real database.
func coreOnStore(t *testing.T, store storage.Store) {
	h := newHarness(t, func(c *Config) {
		c.Store = store
		c.RefreshGrace = 10 * time.Second
	})

	t.Run("redeems a code exactly once under concurrency and revokes on replay", func(t *testing.T) {
		code, verifier := h.authorizeCode()
		f := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {appRedirect}, "client_id": {"demo-app"}, "code_verifier": {verifier}}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var tokens []map[string]any
		statuses := map[int]int{}
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, body := h.post("/token", f, "", "")
				mu.Lock()
				defer mu.Unlock()
				statuses[resp.StatusCode]++
				if resp.StatusCode == 200 {
					tokens = append(tokens, body)
				}
			}()
		}
		wg.Wait()
		if statuses[200] != 1 || statuses[400] != 7 {
			t.Fatalf("statuses %v", statuses)
		}
		// The replays above revoked what the one success issued.
		if active(t, h, tokens[0]["access_token"].(string)) {
			t.Error("access token still active after code replay")
		}
	})

	t.Run("rotates refresh tokens with a grace window and revokes the family on late replay", func(t *testing.T) {
		tok := h.codeFlow("mcp:tools")
		var wg sync.WaitGroup
		var mu sync.Mutex
		var next []string
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, body := refresh(h, tok.RefreshToken)
				mu.Lock()
				defer mu.Unlock()
				if status != 200 {
					t.Errorf("racing refresh: %d %v", status, body)
					return
				}
				next = append(next, body["refresh_token"].(string))
			}()
		}
		wg.Wait()
		h.clock.Advance(time.Minute)
		if status, body := refresh(h, tok.RefreshToken); status != 400 || body["error"] != "invalid_grant" {
			t.Fatalf("late replay: %d %v", status, body)
		}
		for _, rt := range next {
			if status, body := refresh(h, rt); status != 400 || body["error"] != "invalid_grant" {
				t.Errorf("family member survived reuse detection: %d %v", status, body)
			}
		}
	})

	t.Run("refuses a replayed client assertion", func(t *testing.T) {
		a := h.assertion(t, h.jwtKey, "backend-jti", h.issuer, time.Minute)
		form := url.Values{"grant_type": {"client_credentials"}, "client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {a}}
		if resp, body := h.post("/token", form, "", ""); resp.StatusCode != 200 {
			t.Fatalf("first: %d %v", resp.StatusCode, body)
		}
		if resp, body := h.post("/token", form, "", ""); resp.StatusCode != 401 || body["error"] != "invalid_client" {
			t.Errorf("replay: %d %v", resp.StatusCode, body)
		}
	})

	t.Run("introspects and revokes client credentials tokens", func(t *testing.T) {
		_, tok := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
		at := tok["access_token"].(string)
		if !active(t, h, at) {
			t.Fatal("fresh token inactive")
		}
		if resp, _ := h.post("/revoke", url.Values{"token": {at}}, "ci-bot", ciSecret); resp.StatusCode != 200 {
			t.Fatalf("revoke: %d", resp.StatusCode)
		}
		if active(t, h, at) {
			t.Error("revoked token still active")
		}
	})
}

// TestCoreOnPostgreSQL needs AUTHSERVER_TEST_POSTGRES (skipped when unset
// unless CI is set).
func TestCoreOnPostgreSQL(t *testing.T) {
	s := openPostgres(t, 8)
	coreOnStore(t, s)
}

func TestCoreOnSQLite(t *testing.T) {
	s := openSQLite(t)
	coreOnStore(t, s)
}
