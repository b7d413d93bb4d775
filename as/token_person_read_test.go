package as

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// personReadCounter is a memory store that reads a token with its person
// (storage.TokenPersonReader) and counts those reads and those of GetUser.
type personReadCounter struct {
	*memory.Store
	mu                 sync.Mutex
	withUser, getUsers int
}

func (s *personReadCounter) GetTokenWithPerson(ctx context.Context, kind storage.TokenKind, sig string) (*storage.Token, storage.PersonStatus, error) {
	s.mu.Lock()
	s.withUser++
	s.mu.Unlock()
	t, err := s.Store.GetToken(ctx, kind, sig)
	if err != nil || t.Subject == "" {
		return t, storage.PersonStatus{}, err
	}
	u, err := s.Store.GetUser(ctx, t.Subject)
	if errors.Is(err, storage.ErrNotFound) {
		return t, storage.PersonStatus{}, nil
	}
	if err != nil {
		return t, storage.PersonStatus{}, err
	}
	return t, storage.PersonStatus{Recorded: true, Upstream: u.Upstream, Disabled: u.Disabled}, nil
}

func (s *personReadCounter) GetUser(ctx context.Context, subject string) (*storage.User, error) {
	s.mu.Lock()
	s.getUsers++
	s.mu.Unlock()
	return s.Store.GetUser(ctx, subject)
}

func (s *personReadCounter) counts() (withUser, getUsers int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, g := s.withUser, s.getUsers
	s.withUser, s.getUsers = 0, 0
	return w, g
}

// TestTokenEndpointReadsThePersonWithTheGrant: on a backend that reads a
// token together with its person's status (storage.TokenPersonReader), a
// refresh reads the person that way and not again with GetUser.
func TestTokenEndpointReadsThePersonWithTheGrant(t *testing.T) {
	st := &personReadCounter{Store: memory.New()}
	h := newHarness(t, func(c *Config) { c.Store = st })
	tok := h.codeFlow("mcp:tools")
	st.counts()
	status, body := refresh(h, tok.RefreshToken)
	if status != 200 {
		t.Fatalf("refresh: %d %v", status, body)
	}
	if withUser, getUsers := st.counts(); withUser == 0 || getUsers != 0 {
		t.Fatalf("refresh read the person with the token %d times and with GetUser %d times; want at least once and never", withUser, getUsers)
	}
}
