package dcr_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// failingStore is a memory store whose client operations fail with err
// while err is set.
type failingStore struct {
	storage.ClientStore
	mu  sync.Mutex
	err error
}

func (s *failingStore) fail(err error) { s.mu.Lock(); s.err = err; s.mu.Unlock() }

func (s *failingStore) failure() error { s.mu.Lock(); defer s.mu.Unlock(); return s.err }

func (s *failingStore) GetClient(ctx context.Context, id string) (*storage.Client, error) {
	if err := s.failure(); err != nil {
		return nil, err
	}
	return s.ClientStore.GetClient(ctx, id)
}

func (s *failingStore) CreateClient(ctx context.Context, c *storage.Client) error {
	if err := s.failure(); err != nil {
		return err
	}
	return s.ClientStore.CreateClient(ctx, c)
}

func (s *failingStore) UpdateClient(ctx context.Context, id string, update func(storage.Client) (storage.Client, error)) error {
	if err := s.failure(); err != nil {
		return err
	}
	return s.ClientStore.UpdateClient(ctx, id, update)
}

func (s *failingStore) DeleteClient(ctx context.Context, id string) error {
	if err := s.failure(); err != nil {
		return err
	}
	return s.ClientStore.DeleteClient(ctx, id)
}

// A storage failure is answered 503 temporarily_unavailable with Retry-After
// when the store says it is unavailable, else 500 server_error; the body
// never carries the store's error text.
func TestStorageFailuresAnswerWithoutInternals(t *testing.T) {
	const detail = "dial tcp 10.0.0.9:5432: connection refused"
	for _, tc := range []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"unavailable", fmt.Errorf("postgres: %s: %w", detail, storage.ErrUnavailable), http.StatusServiceUnavailable, "temporarily_unavailable"},
		{"other", errors.New("postgres: " + detail), http.StatusInternalServerError, "server_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &failingStore{ClientStore: memory.New()}
			e := newEnvWithStore(t, defaultPolicy(), store)
			body := `{"client_name":"Claude","redirect_uris":["https://claude.ai/api/mcp/auth_callback"],"token_endpoint_auth_method":"none"}`
			reg := e.register(body)
			if reg.status != http.StatusCreated {
				t.Fatalf("register: %d %s", reg.status, reg.body)
			}
			ci := reg.info(t)
			update := strings.Replace(body, `{`, `{"client_id":"`+ci.ClientID+`",`, 1)
			store.fail(tc.err)
			for _, req := range []struct{ method, url, token, body string }{
				{http.MethodPost, e.srv.URL + "/register", "", body},
				{http.MethodGet, ci.RegistrationClientURI, ci.RegistrationAccessToken, ""},
				{http.MethodPut, ci.RegistrationClientURI, ci.RegistrationAccessToken, update},
				{http.MethodDelete, ci.RegistrationClientURI, ci.RegistrationAccessToken, ""},
			} {
				r := e.do(req.method, req.url, req.token, req.body, nil)
				if r.status != tc.status {
					t.Fatalf("%s: status %d, want %d: %s", req.method, r.status, tc.status, r.body)
				}
				if m := r.json(t); m["error"] != tc.code {
					t.Errorf("%s: error %v, want %s", req.method, m["error"], tc.code)
				}
				if strings.Contains(string(r.body), "10.0.0.9") || strings.Contains(string(r.body), "postgres") {
					t.Errorf("%s: body %s carries the store's error", req.method, r.body)
				}
				if got := r.header.Get("Retry-After"); (got != "") != (tc.status == http.StatusServiceUnavailable) {
					t.Errorf("%s: Retry-After %q with status %d", req.method, got, r.status)
				}
			}
			store.fail(nil)
			if r := e.do(http.MethodGet, ci.RegistrationClientURI, ci.RegistrationAccessToken, "", nil); r.status != http.StatusOK {
				t.Fatalf("after recovery: %d %s", r.status, r.body)
			}
		})
	}
}
