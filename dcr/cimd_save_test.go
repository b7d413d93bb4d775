package dcr_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/mcpauth/mcpauth/dcr"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// racingStore is a memory store on which another instance saves the same
// CIMD client at the worst moments: updates find no record (updateMisses of
// them), and creates find one (createRaces of them, each creating it first).
type racingStore struct {
	storage.ClientStore
	mu           sync.Mutex
	updateMisses int
	createRaces  int
	updates      int
	creates      int
}

func (s *racingStore) UpdateClient(ctx context.Context, id string, update func(storage.Client) (storage.Client, error)) error {
	s.mu.Lock()
	s.updates++
	miss := s.updateMisses > 0
	if miss {
		s.updateMisses--
	}
	stop := s.updates > 20
	s.mu.Unlock()
	if stop {
		return errors.New("racingStore: too many updates")
	}
	if miss {
		return storage.ErrNotFound
	}
	return s.ClientStore.UpdateClient(ctx, id, update)
}

func (s *racingStore) CreateClient(ctx context.Context, c *storage.Client) error {
	s.mu.Lock()
	s.creates++
	race := s.createRaces > 0
	if race {
		s.createRaces--
	}
	stop := s.creates > 20
	s.mu.Unlock()
	if stop {
		return errors.New("racingStore: too many creates")
	}
	if race {
		other := *c
		other.Name = "saved by another instance"
		if err := s.ClientStore.CreateClient(ctx, &other); err != nil && !errors.Is(err, storage.ErrAlreadyExists) {
			return err
		}
		return storage.ErrAlreadyExists
	}
	return s.ClientStore.CreateClient(ctx, c)
}

func (s *racingStore) counts() (updates, creates int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updates, s.creates
}

func TestCIMDSaveRaces(t *testing.T) {
	t.Run("a record another instance created meanwhile is updated", func(t *testing.T) {
		d := newDocServer(t)
		id := d.serve("/race.json", claudeDoc(), "")
		store := &racingStore{ClientStore: memory.New(), createRaces: 1}
		re := newResolver(t, d, func(c *dcr.CIMDConfig) { c.Store = store })
		c, err := re.r.ResolveClient(context.Background(), id)
		if err != nil || c.Name != "Claude" {
			t.Fatalf("ResolveClient = %+v, %v", c, err)
		}
		if got := storedIn(t, store, id); got.Name != "Claude" || got.Source != "cimd" {
			t.Fatalf("stored %q from %q, want the document's Claude from cimd", got.Name, got.Source)
		}
		if u, cr := store.counts(); u != 2 || cr != 1 {
			t.Fatalf("%d updates and %d creates, want 2 and 1", u, cr)
		}
	})
	t.Run("three lost races answer unavailable", func(t *testing.T) {
		d := newDocServer(t)
		id := d.serve("/lost.json", claudeDoc(), "")
		store := &racingStore{ClientStore: memory.New(), updateMisses: 100, createRaces: 100}
		re := newResolver(t, d, func(c *dcr.CIMDConfig) { c.Store = store })
		c, err := re.r.ResolveClient(context.Background(), id)
		if c != nil || !errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("ResolveClient = %v, %v; want storage.ErrUnavailable", c, err)
		}
		if u, cr := store.counts(); u != 3 || cr != 3 {
			t.Fatalf("%d updates and %d creates, want 3 of each", u, cr)
		}
		if re.r.CacheLen() != 0 {
			t.Fatal("a document that could not be saved was cached")
		}
	})
}

// A metadata document cannot take over a client id another kind of client
// already has.
func TestCIMDDocumentCannotTakeAnotherClientsID(t *testing.T) {
	d := newDocServer(t)
	id := d.serve("/taken.json", claudeDoc(), "")
	re := newResolver(t, d, nil)
	ctx := context.Background()
	if err := re.store.CreateClient(ctx, &storage.Client{ID: id, Source: dcr.SourceAdmin, Name: "Operator's",
		RedirectURIs: []string{"https://operator.example/cb"}}); err != nil {
		t.Fatal(err)
	}
	c, err := re.r.ResolveClient(ctx, id)
	var me *dcr.MetadataError
	if c != nil || !errors.Is(err, dcr.ErrInvalidDocument) || !errors.As(err, &me) || me.Code != dcr.CodeInvalidClientMetadata ||
		!strings.Contains(me.Description, "taken by a client that is not a metadata document") {
		t.Fatalf("ResolveClient = %v, %v; want ErrInvalidDocument, client_id taken", c, err)
	}
	if got := storedIn(t, re.store, id); got.Source != dcr.SourceAdmin || got.Name != "Operator's" ||
		len(got.RedirectURIs) != 1 || got.RedirectURIs[0] != "https://operator.example/cb" {
		t.Fatalf("the stored client changed: %+v", got)
	}
}

// storedIn reads client id from s and fails the test when it cannot.
func storedIn(t *testing.T, s storage.ClientStore, id string) *storage.Client {
	t.Helper()
	c, err := s.GetClient(context.Background(), id)
	if err != nil {
		t.Fatalf("GetClient(%q): %v", id, err)
	}
	return c
}
