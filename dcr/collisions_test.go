package dcr_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/mcpauth/mcpauth/dcr"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// collidingStore answers ErrAlreadyExists to the first collisions creates,
// as if each generated client id were taken, and records every id tried.
type collidingStore struct {
	storage.ClientStore
	mu         sync.Mutex
	collisions int
	tried      []string
}

func (s *collidingStore) CreateClient(ctx context.Context, c *storage.Client) error {
	s.mu.Lock()
	s.tried = append(s.tried, c.ID)
	n := len(s.tried)
	s.mu.Unlock()
	if n > 20 {
		// A retry loop that does not end: stop it (the HTTP server
		// recovers and drops the connection, failing the request).
		panic("collidingStore: too many creates")
	}
	if n <= s.collisions {
		return storage.ErrAlreadyExists
	}
	return s.ClientStore.CreateClient(ctx, c)
}

func (s *collidingStore) ids() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.tried...)
}

// A taken client id is replaced by a fresh one, at most three ids in all.
func TestClientIDCollisions(t *testing.T) {
	const body = `{"client_name":"Claude","redirect_uris":["https://claude.ai/api/mcp/auth_callback"],"token_endpoint_auth_method":"none"}`
	for _, tc := range []struct {
		name       string
		collisions int
		status     int
	}{
		{"one taken id is replaced", 1, http.StatusCreated},
		{"two taken ids are replaced", 2, http.StatusCreated},
		{"three taken ids end the registration", 3, http.StatusInternalServerError},
	} {
		t.Run("registration: "+tc.name, func(t *testing.T) {
			store := &collidingStore{ClientStore: memory.New(), collisions: tc.collisions}
			e := newEnvWithStore(t, defaultPolicy(), store)
			r := e.register(body)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			tried := store.ids()
			if want := min(tc.collisions+1, 3); len(tried) != want {
				t.Fatalf("%d ids tried, want %d", len(tried), want)
			}
			for i := 1; i < len(tried); i++ {
				if tried[i] == tried[i-1] {
					t.Fatalf("id %q tried twice", tried[i])
				}
			}
			if tc.status != http.StatusCreated {
				if m := r.json(t); m["error"] != "server_error" || e.count() != 0 {
					t.Fatalf("body %v, %d clients stored", m, e.count())
				}
				return
			}
			ci := r.info(t)
			last := tried[len(tried)-1]
			if ci.ClientID != last || ci.RegistrationClientURI != e.srv.URL+"/register/"+last || r.header.Get("Location") != ci.RegistrationClientURI {
				t.Fatalf("client_id %q, registration_client_uri %q, Location %q; want the stored id %q",
					ci.ClientID, ci.RegistrationClientURI, r.header.Get("Location"), last)
			}
			if g := e.do(http.MethodGet, ci.RegistrationClientURI, ci.RegistrationAccessToken, "", nil); g.status != http.StatusOK || g.info(t).ClientID != last {
				t.Fatalf("reading the registration: %d %s", g.status, g.body)
			}
		})
		t.Run("Create: "+tc.name, func(t *testing.T) {
			store := &collidingStore{ClientStore: memory.New(), collisions: tc.collisions}
			e := newEnvWithStore(t, defaultPolicy(), store)
			info, err := e.h.Create(context.Background(), dcr.ClientMetadata{ClientName: "Operator's",
				RedirectURIs: []string{"https://operator.example/cb"}, TokenEndpointAuthMethod: "none"})
			tried := store.ids()
			if want := min(tc.collisions+1, 3); len(tried) != want {
				t.Fatalf("%d ids tried, want %d", len(tried), want)
			}
			if tc.status != http.StatusCreated {
				if !errors.Is(err, storage.ErrAlreadyExists) || info != nil {
					t.Fatalf("Create = %v, %v; want ErrAlreadyExists", info, err)
				}
				return
			}
			if err != nil || info.ClientID != tried[len(tried)-1] {
				t.Fatalf("Create = %+v, %v; want the stored id %q", info, err, tried[len(tried)-1])
			}
			if c := e.stored(t, info.ClientID); c.Source != dcr.SourceAdmin || c.Name != "Operator's" {
				t.Fatalf("stored %+v", c)
			}
		})
	}
}
