package storagetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// fullConnection has every field set.
func fullConnection(subject, id string, at time.Time) *storage.Connection {
	return &storage.Connection{
		Subject: subject, ConnectionID: id,
		AccessToken:  []byte("sealed\x00access " + subject + " " + id),
		RefreshToken: []byte("sealed\x00refresh"),
		TokenType:    "bearer",
		ExpiresAt:    at.Add(8 * time.Hour),
		Scopes:       []string{"repo", "read:user"},
		CreatedAt:    at,
		UpdatedAt:    at,
	}
}

func normConnection(c storage.Connection) storage.Connection {
	c.Scopes = normStrings(c.Scopes)
	c.RefreshToken = normBytes(c.RefreshToken)
	c.ExpiresAt, c.CreatedAt, c.UpdatedAt = normTime(c.ExpiresAt), normTime(c.CreatedAt), normTime(c.UpdatedAt)
	return c
}

func getConnection(t *testing.T, s storage.Store, subject, id string) storage.Connection {
	t.Helper()
	c, err := s.GetConnection(context.Background(), subject, id)
	ok(t, err, "GetConnection "+subject+" "+id)
	return normConnection(*c)
}

var errRefusedUpdate = errors.New("refused by the update")

var connectionCases = []testCase{
	{"a connection round-trips with every field", func(t *testing.T, s storage.Store) {
		c := fullConnection("corp:ada", "github", now())
		ok(t, s.PutConnection(context.Background(), c), "PutConnection")
		same(t, "stored", getConnection(t, s, "corp:ada", "github"), normConnection(*fullConnection("corp:ada", "github", c.CreatedAt)))
	}},
	{"a connection without refresh token, expiry or scopes round-trips", func(t *testing.T, s storage.Store) {
		at := now()
		c := &storage.Connection{Subject: "ada", ConnectionID: "slack", AccessToken: []byte{1, 2, 3}, TokenType: "Bearer", CreatedAt: at, UpdatedAt: at}
		ok(t, s.PutConnection(context.Background(), c), "PutConnection")
		same(t, "stored", getConnection(t, s, "ada", "slack"), normConnection(*c))
	}},
	{"an unknown connection is not found", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		ok(t, s.PutConnection(ctx, fullConnection("ada", "github", now())), "PutConnection")
		_, err := s.GetConnection(ctx, "ada", "google")
		is(t, err, storage.ErrNotFound, "GetConnection of another connection")
		_, err = s.GetConnection(ctx, "bob", "github")
		is(t, err, storage.ErrNotFound, "GetConnection of another person")
		_, err = s.GetConnection(ctx, "ada\x00", "github")
		is(t, err, storage.ErrNotFound, "GetConnection of an unstorable subject")
	}},
	{"a second put replaces the tokens and keeps the creation time", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		ok(t, s.PutConnection(ctx, fullConnection("ada", "github", at)), "PutConnection")
		later := at.Add(time.Hour)
		n := &storage.Connection{Subject: "ada", ConnectionID: "github", AccessToken: []byte("new"), TokenType: "bearer",
			Scopes: []string{"repo"}, CreatedAt: later, UpdatedAt: later}
		ok(t, s.PutConnection(ctx, n), "PutConnection again")
		want := normConnection(*n)
		want.CreatedAt = at
		same(t, "replaced", getConnection(t, s, "ada", "github"), want)
	}},
	{"an update changes the record and keeps its key", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		ok(t, s.PutConnection(ctx, fullConnection("ada", "github", at)), "PutConnection")
		err := s.UpdateConnection(ctx, "ada", "github", func(c storage.Connection) (storage.Connection, error) {
			if string(c.RefreshToken) != "sealed\x00refresh" {
				t.Errorf("update saw %+v", c)
			}
			c.Subject, c.ConnectionID = "mallory", "other"
			c.NeedsReconnect = true
			c.UpdatedAt = at.Add(time.Minute)
			return c, nil
		})
		ok(t, err, "UpdateConnection")
		want := normConnection(*fullConnection("ada", "github", at))
		want.NeedsReconnect, want.UpdatedAt = true, at.Add(time.Minute)
		same(t, "updated", getConnection(t, s, "ada", "github"), want)
		_, err = s.GetConnection(ctx, "mallory", "other")
		is(t, err, storage.ErrNotFound, "the key the update returned")
	}},
	{"an update that fails writes nothing, and an absent record is not found", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		ok(t, s.PutConnection(ctx, fullConnection("ada", "github", at)), "PutConnection")
		err := s.UpdateConnection(ctx, "ada", "github", func(c storage.Connection) (storage.Connection, error) {
			c.AccessToken = []byte("changed")
			return c, errRefusedUpdate
		})
		is(t, err, errRefusedUpdate, "UpdateConnection returning an error")
		same(t, "unchanged", getConnection(t, s, "ada", "github"), normConnection(*fullConnection("ada", "github", at)))
		err = s.UpdateConnection(ctx, "bob", "github", func(c storage.Connection) (storage.Connection, error) { return c, nil })
		is(t, err, storage.ErrNotFound, "UpdateConnection of an absent record")
	}},
	{"concurrent updates run one after the other", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		c := fullConnection("ada", "github", now())
		c.Scopes = nil
		ok(t, s.PutConnection(ctx, c), "PutConnection")
		n, errs := race(Concurrency, func(int) error {
			return s.UpdateConnection(ctx, "ada", "github", func(c storage.Connection) (storage.Connection, error) {
				c.Scopes = append(c.Scopes, "x")
				return c, nil
			})
		})
		if n != Concurrency {
			t.Fatalf("%d of %d updates succeeded: %v", n, Concurrency, errs)
		}
		if got := getConnection(t, s, "ada", "github"); len(got.Scopes) != Concurrency {
			t.Fatalf("%d scopes after %d updates: an update was lost", len(got.Scopes), Concurrency)
		}
	}},
	{"delete removes one connection of one person", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		for _, c := range []*storage.Connection{fullConnection("ada", "github", at), fullConnection("ada", "google", at), fullConnection("bob", "github", at)} {
			ok(t, s.PutConnection(ctx, c), "PutConnection")
		}
		ok(t, s.DeleteConnection(ctx, "ada", "github"), "DeleteConnection")
		is(t, s.DeleteConnection(ctx, "ada", "github"), storage.ErrNotFound, "DeleteConnection again")
		_, err := s.GetConnection(ctx, "ada", "github")
		is(t, err, storage.ErrNotFound, "GetConnection after delete")
		getConnection(t, s, "ada", "google")
		getConnection(t, s, "bob", "github")
	}},
	{"list returns one person's connections, or everyone's, in order", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		for _, k := range [][2]string{{"bob", "github"}, {"ada", "slack"}, {"ada", "github"}, {"Zed", "github"}} {
			ok(t, s.PutConnection(ctx, fullConnection(k[0], k[1], at)), "PutConnection")
		}
		keys := func(cs []storage.Connection) []string {
			var out []string
			for _, c := range cs {
				out = append(out, c.Subject+"/"+c.ConnectionID)
			}
			return out
		}
		ada, err := s.ListConnections(ctx, "ada")
		ok(t, err, "ListConnections ada")
		same(t, "ada's", keys(ada), []string{"ada/github", "ada/slack"})
		same(t, "a listed record", normConnection(ada[0]), normConnection(*fullConnection("ada", "github", at)))
		all, err := s.ListConnections(ctx, "")
		ok(t, err, "ListConnections all")
		same(t, "everyone's", keys(all), []string{"Zed/github", "ada/github", "ada/slack", "bob/github"})
		none, err := s.ListConnections(ctx, "carol")
		ok(t, err, "ListConnections carol")
		if len(none) != 0 {
			t.Fatalf("carol has %v", keys(none))
		}
	}},
	{"a rolled-back put leaves nothing", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		tctx, err := s.BeginTX(ctx)
		ok(t, err, "BeginTX")
		ok(t, s.PutConnection(tctx, fullConnection("ada", "github", now())), "PutConnection in the transaction")
		ok(t, s.Rollback(tctx), "Rollback")
		_, err = s.GetConnection(ctx, "ada", "github")
		is(t, err, storage.ErrNotFound, "GetConnection after rollback")
	}},
}
