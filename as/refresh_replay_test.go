package as

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// refreshRacesOnStore pins the two sides of the refresh grace window
// (RFC 9700 §4.14.2) on a backend: racing refreshes of one token all end
// with a working token, and a rotated token presented after one of its
// successors was used is a replay that revokes the family, inside the
// window as after it. The server runs with the default window.
func refreshRacesOnStore(t *testing.T, store storage.Store) {
	h := newHarness(t, func(c *Config) { c.Store = store })

	t.Run("two concurrent refreshes of one token both end with a working token", func(t *testing.T) {
		rt1 := h.codeFlow("mcp:tools").RefreshToken
		var wg sync.WaitGroup
		answers := make([]map[string]any, 2)
		statuses := make([]int, 2)
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i], answers[i] = refresh(h, rt1)
			}()
		}
		wg.Wait()
		for i, a := range answers {
			if statuses[i] != http.StatusOK {
				t.Fatalf("racing refresh %d: %d %v", i, statuses[i], a)
			}
		}
		// Each racer goes on with its own successor, one after the other.
		for i, a := range answers {
			if !active(t, h, a["access_token"].(string)) {
				t.Errorf("racer %d: its access token is not active", i)
			}
			status, next := refresh(h, a["refresh_token"].(string))
			if status != http.StatusOK {
				t.Fatalf("racer %d: its refresh token no longer works: %d %v", i, status, next)
			}
			if !active(t, h, next["access_token"].(string)) {
				t.Errorf("racer %d: the access token of its next refresh is not active", i)
			}
		}
	})

	t.Run("a rotated token presented seconds later still works while no successor was used", func(t *testing.T) {
		rt1 := h.codeFlow("mcp:tools").RefreshToken
		if status, a := refresh(h, rt1); status != http.StatusOK {
			t.Fatalf("first refresh: %d %v", status, a)
		}
		h.clock.Advance(20 * time.Second)
		status, b := refresh(h, rt1)
		if status != http.StatusOK {
			t.Fatalf("the same token 20 s later (another process of the client): %d %v", status, b)
		}
		if status, c := refresh(h, b["refresh_token"].(string)); status != http.StatusOK {
			t.Fatalf("the late racer's own successor: %d %v", status, c)
		}
	})

	t.Run("RT1 after RT2 was used, inside the window, revokes the family", func(t *testing.T) {
		rt1 := h.codeFlow("mcp:tools").RefreshToken
		status, a := refresh(h, rt1)
		if status != http.StatusOK {
			t.Fatalf("RT1 -> RT2: %d %v", status, a)
		}
		rt2 := a["refresh_token"].(string)
		h.clock.Advance(time.Second)
		status, b := refresh(h, rt2)
		if status != http.StatusOK {
			t.Fatalf("RT2 -> RT3: %d %v", status, b)
		}
		rt3, at3 := b["refresh_token"].(string), b["access_token"].(string)
		h.clock.Advance(time.Second)
		if status, r := refresh(h, rt1); status != http.StatusBadRequest || r["error"] != "invalid_grant" {
			t.Fatalf("RT1 replayed after RT2 was used: %d %v, want 400 invalid_grant", status, r)
		}
		if status, r := refresh(h, rt3); status != http.StatusBadRequest || r["error"] != "invalid_grant" {
			t.Errorf("RT3 still works after the replay: %d %v", status, r)
		}
		if active(t, h, at3) {
			t.Error("the family's access token is still active after the replay")
		}
	})
}

func TestRefreshRacesAndReplaysOnMemory(t *testing.T) {
	refreshRacesOnStore(t, memory.New())
}

func TestRefreshRacesAndReplaysOnSQLite(t *testing.T) {
	refreshRacesOnStore(t, openSQLite(t))
}

// TestRefreshRacesAndReplaysOnPostgreSQL needs AUTHSERVER_TEST_POSTGRES
// (skipped when unset unless CI is set).
func TestRefreshRacesAndReplaysOnPostgreSQL(t *testing.T) {
	refreshRacesOnStore(t, openPostgres(t, 8))
}
