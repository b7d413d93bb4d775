package policy

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// mapping caps by the claim "group": "admins" may have mcp:admin and
// mcp:tools, anyone else mcp:tools.
type mapping struct{}

func (mapping) Capped() bool { return true }
func (mapping) Scopes(claims map[string][]string) []string {
	if slices.Contains(claims["group"], "admins") {
		return []string{"mcp:tools", "mcp:admin"}
	}
	return []string{"mcp:tools"}
}

// TestActive is the table of who is active.
func TestActive(t *testing.T) {
	local := LocalUsers{"alice": false, "dave": true}
	p := NewPeople(PeopleConfig{Local: local, Upstreams: []Upstream{{ID: "corp"}}})
	open := NewPeople(PeopleConfig{Upstreams: []Upstream{{ID: "corp"}}})
	for _, tc := range []struct {
		name    string
		people  *People
		subject string
		rec     *storage.User
		want    bool
	}{
		{"a configured local account", p, "alice", nil, true},
		{"a configured local account with a record", p, "alice", &storage.User{Subject: "alice"}, true},
		{"a local account whose record is disabled", p, "alice", &storage.User{Subject: "alice", Disabled: true}, false},
		{"a local account disabled in the configuration", p, "dave", nil, false},
		{"a local account no longer configured", p, "carol", &storage.User{Subject: "carol"}, false},
		{"a recorded person of a configured provider", p, "corp:1", &storage.User{Subject: "corp:1", Upstream: "corp"}, true},
		{"a disabled person of a configured provider", p, "corp:1", &storage.User{Subject: "corp:1", Upstream: "corp", Disabled: true}, false},
		{"a person of a provider no longer configured", p, "old:1", &storage.User{Subject: "old:1", Upstream: "old"}, false},
		{"a subject of a configured provider without a record", p, "corp:2", nil, false},
		{"a subject of a configured provider with a record", p, "corp:2", &storage.User{Subject: "corp:2"}, true},
		{"without a directory, anyone local", open, "bob", nil, true},
		{"without a directory, a disabled record", open, "bob", &storage.User{Subject: "bob", Disabled: true}, false},
		{"without a directory, a provider's record still counts", open, "old:1", &storage.User{Subject: "old:1", Upstream: "old"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.people.Active(tc.subject, tc.rec); got != tc.want {
				t.Errorf("Active(%q, %+v) = %v, want %v", tc.subject, tc.rec, got, tc.want)
			}
		})
	}
	if p.LocalActive("corp:1", &storage.User{Subject: "corp:1", Upstream: "corp"}) {
		t.Error("LocalActive accepts a person of an upstream provider")
	}
	if !p.LocalActive("alice", &storage.User{Subject: "alice"}) || p.LocalActive("dave", nil) {
		t.Error("LocalActive does not follow Active for local accounts")
	}
}

// brokenRecords fails every read.
type brokenRecords struct{}

func (brokenRecords) GetUser(context.Context, string) (*storage.User, error) {
	return nil, storage.ErrUnavailable
}

// TestIsActiveReadsTheRecord: the stored record decides with the
// configuration; an unreadable record is an error, never an answer.
func TestIsActiveReadsTheRecord(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	p := NewPeople(PeopleConfig{Local: LocalUsers{"alice": false}, Records: store})
	if ok, err := p.IsActive(ctx, "alice"); !ok || err != nil {
		t.Fatalf("alice without a record: %v, %v", ok, err)
	}
	if _, err := store.RecordLogin(ctx, &storage.User{Subject: "alice", LastSeen: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := store.SetUserDisabled(ctx, "alice", true); err != nil {
		t.Fatal(err)
	}
	if ok, err := p.IsActive(ctx, "alice"); ok || err != nil {
		t.Fatalf("alice disabled in the store: %v, %v", ok, err)
	}
	broken := NewPeople(PeopleConfig{Local: LocalUsers{"alice": false}, Records: brokenRecords{}})
	if ok, err := broken.IsActive(ctx, "alice"); ok || !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("unreadable record: %v, %v", ok, err)
	}
}

// TestPeopleCap: a person of a provider with a claim mapping is capped by
// their record's claims; nobody else is.
func TestPeopleCap(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	p := NewPeople(PeopleConfig{
		Local:     LocalUsers{"alice": false},
		Upstreams: []Upstream{{ID: "corp", Claims: mapping{}}, {ID: "free"}},
		Records:   store,
	})
	for _, u := range []*storage.User{
		{Subject: "corp:admin", Upstream: "corp", Claims: map[string][]string{"group": {"admins"}}},
		{Subject: "corp:user", Upstream: "corp"},
		{Subject: "free:1", Upstream: "free"},
	} {
		u.LastSeen = time.Now()
		if _, err := store.RecordLogin(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		subject string
		allowed []string
		capped  bool
	}{
		{"alice", nil, false},
		{"corp:admin", []string{"mcp:tools", "mcp:admin"}, true},
		{"corp:user", []string{"mcp:tools"}, true},
		{"corp:unrecorded", nil, true},
		{"free:1", nil, false},
		{"gone:1", nil, false},
	} {
		allowed, capped, err := p.Cap(ctx, tc.subject)
		if err != nil || capped != tc.capped || !slices.Equal(allowed, tc.allowed) {
			t.Errorf("Cap(%q) = %q, %v, %v; want %q, %v", tc.subject, allowed, capped, err, tc.allowed, tc.capped)
		}
	}
	broken := NewPeople(PeopleConfig{Upstreams: []Upstream{{ID: "corp", Claims: mapping{}}}, Records: brokenRecords{}})
	if _, capped, err := broken.Cap(ctx, "corp:admin"); !capped || err == nil {
		t.Errorf("an unreadable record: capped %v err %v; want capped with the error", capped, err)
	}
}
