package storagetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// fullUser has every field set.
func fullUser(subject string, at time.Time) *storage.User {
	return &storage.User{
		Subject: subject, Upstream: "corp", UpstreamSubject: "00u-" + subject,
		Name: "Ada \"ü\" Lovelace", Email: subject + "@acme.example",
		Groups:          []string{"mcp-users", "mcp-admins"},
		Claims:          map[string][]string{"groups": {"mcp-users", "mcp-admins"}, "hd": {"acme.example"}},
		FirstSeen:       at,
		LastSeen:        at,
		UpstreamRefresh: []byte("sealed\x00refresh"),
		CheckedAt:       at,
	}
}

func normUser(u storage.User) storage.User {
	u.Groups = normStrings(u.Groups)
	if len(u.Claims) == 0 {
		u.Claims = nil
	}
	u.FirstSeen, u.LastSeen, u.CheckedAt = normTime(u.FirstSeen), normTime(u.LastSeen), normTime(u.CheckedAt)
	u.UpstreamRefresh = normBytes(u.UpstreamRefresh)
	return u
}

func getUser(t *testing.T, s storage.Store, subject string) storage.User {
	t.Helper()
	u, err := s.GetUser(context.Background(), subject)
	ok(t, err, "GetUser "+subject)
	return normUser(*u)
}

func recordLogin(t *testing.T, s storage.Store, u *storage.User) storage.User {
	t.Helper()
	got, err := s.RecordLogin(context.Background(), u)
	ok(t, err, "RecordLogin "+u.Subject)
	return normUser(*got)
}

var userCases = []testCase{
	{"a first login creates the user with every field and returns it", func(t *testing.T, s storage.Store) {
		at := now()
		u := fullUser("ada", at)
		u.FirstSeen, u.Disabled = at.Add(-time.Hour), true // ignored
		want := normUser(*fullUser("ada", at))
		same(t, "returned", recordLogin(t, s, u), want)
		same(t, "stored", getUser(t, s, "ada"), want)
	}},
	{"a later login updates the profile and keeps first seen, disabled, refresh and check time", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		first := now().Add(-time.Hour)
		recordLogin(t, s, fullUser("ada", first))
		ok(t, s.SetUserDisabled(ctx, "ada", true), "SetUserDisabled")
		later := now()
		u := &storage.User{Subject: "ada", Upstream: "other", UpstreamSubject: "x", Name: "Ada L", Email: "ada@new.example",
			Groups: nil, Claims: map[string][]string{"groups": {"mcp-users"}}, LastSeen: later}
		want := normUser(*fullUser("ada", first))
		want.Upstream, want.UpstreamSubject, want.Name, want.Email = "other", "x", "Ada L", "ada@new.example"
		want.Groups, want.Claims, want.LastSeen, want.Disabled = nil, map[string][]string{"groups": {"mcp-users"}}, later, true
		same(t, "returned after login of a disabled user", recordLogin(t, s, u), want)
		same(t, "stored", getUser(t, s, "ada"), want)

		// Set refresh token and check time replace the stored ones.
		u.UpstreamRefresh, u.CheckedAt = []byte("new sealed"), later
		want.UpstreamRefresh, want.CheckedAt = []byte("new sealed"), later
		same(t, "with a new refresh token", recordLogin(t, s, u), want)
	}},
	{"a login without a last seen time is stored at the current time", func(t *testing.T, s storage.Store) {
		before := time.Now().Add(-time.Second)
		got := recordLogin(t, s, &storage.User{Subject: "bob"})
		if got.LastSeen.Before(before) || got.LastSeen.After(time.Now().Add(time.Second)) {
			t.Fatalf("LastSeen = %v, want about now", got.LastSeen)
		}
		same(t, "first seen", got.FirstSeen, got.LastSeen)
		same(t, "local user", got.Upstream, "")
	}},
	{"an unknown user is not found, and disabling one creates a record never seen", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		_, err := s.GetUser(ctx, "carol")
		is(t, err, storage.ErrNotFound, "GetUser unknown")
		ok(t, s.SetUserDisabled(ctx, "carol", true), "SetUserDisabled unknown")
		same(t, "minimal record", getUser(t, s, "carol"), storage.User{Subject: "carol", Disabled: true})
		at := now()
		got := recordLogin(t, s, &storage.User{Subject: "carol", Name: "Carol", LastSeen: at})
		same(t, "after the first login", got, storage.User{Subject: "carol", Name: "Carol", FirstSeen: at, LastSeen: at, Disabled: true})
		ok(t, s.SetUserDisabled(ctx, "carol", false), "SetUserDisabled false")
		ok(t, s.SetUserDisabled(ctx, "carol", false), "SetUserDisabled false twice")
		same(t, "enabled", getUser(t, s, "carol"), storage.User{Subject: "carol", Name: "Carol", FirstSeen: at, LastSeen: at})
	}},
	{"ListUsers pages through every user in subject byte order", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		for _, sub := range []string{"b", "corp:00u/1", "a", "é", "Z", "a b"} {
			recordLogin(t, s, fullUser(sub, at))
		}
		ok(t, s.SetUserDisabled(ctx, "never-seen", true), "SetUserDisabled")
		var got []string
		after := ""
		for range 10 {
			page, err := s.ListUsers(ctx, after, 2)
			ok(t, err, "ListUsers")
			if len(page) > 2 {
				t.Fatalf("ListUsers(limit 2) returned %d users", len(page))
			}
			if len(page) == 0 {
				break
			}
			for _, u := range page {
				got = append(got, u.Subject)
			}
			after = page[len(page)-1].Subject
		}
		same(t, "subjects", got, []string{"Z", "a", "a b", "b", "corp:00u/1", "never-seen", "é"})
		page, err := s.ListUsers(ctx, "", 1)
		ok(t, err, "ListUsers")
		if len(page) != 1 {
			t.Fatalf("ListUsers(limit 1) = %d users", len(page))
		}
		same(t, "listed user", normUser(page[0]), normUser(*fullUser("Z", at)))
		none, err := s.ListUsers(ctx, "", 0)
		ok(t, err, "ListUsers limit 0")
		if len(none) != 0 {
			t.Fatalf("ListUsers(limit 0) = %d users", len(none))
		}
	}},
	{"an upstream session update stores groups, claims and check time and keeps the refresh token unless given one", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now().Add(-time.Hour)
		recordLogin(t, s, fullUser("ada", at))
		checked := now()
		is(t, s.UpdateUpstreamSession(ctx, "nobody", []byte("x"), checked, nil, nil), storage.ErrNotFound, "UpdateUpstreamSession unknown")
		_, err := s.GetUser(ctx, "nobody")
		is(t, err, storage.ErrNotFound, "UpdateUpstreamSession created a record")

		ok(t, s.UpdateUpstreamSession(ctx, "ada", nil, checked, []string{"mcp-users"}, map[string][]string{"groups": {"mcp-users"}}), "UpdateUpstreamSession")
		want := normUser(*fullUser("ada", at))
		want.CheckedAt, want.Groups, want.Claims = checked, []string{"mcp-users"}, map[string][]string{"groups": {"mcp-users"}}
		same(t, "refresh token kept", getUser(t, s, "ada"), want)

		ok(t, s.UpdateUpstreamSession(ctx, "ada", []byte("rotated"), checked.Add(time.Minute), nil, nil), "UpdateUpstreamSession")
		want.UpstreamRefresh, want.CheckedAt, want.Groups, want.Claims = []byte("rotated"), checked.Add(time.Minute), nil, nil
		same(t, "refresh token rotated, groups and claims cleared", getUser(t, s, "ada"), want)

		ok(t, s.SetUserDisabled(ctx, "ada", true), "SetUserDisabled")
		ok(t, s.UpdateUpstreamSession(ctx, "ada", nil, checked, nil, nil), "UpdateUpstreamSession")
		if !getUser(t, s, "ada").Disabled {
			t.Fatal("UpdateUpstreamSession enabled a disabled user")
		}
	}},
	{"user writes of a rolled-back transaction leave nothing behind", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		recordLogin(t, s, fullUser("existing", at))
		txCtx, err := s.BeginTX(ctx)
		ok(t, err, "BeginTX")
		_, err = s.RecordLogin(txCtx, fullUser("tx-user", at))
		ok(t, err, "RecordLogin in tx")
		ok(t, s.SetUserDisabled(txCtx, "existing", true), "SetUserDisabled in tx")
		ok(t, s.UpdateUpstreamSession(txCtx, "existing", []byte("tx"), at.Add(time.Minute), nil, nil), "UpdateUpstreamSession in tx")
		u, err := s.GetUser(txCtx, "existing")
		ok(t, err, "GetUser in tx")
		if !u.Disabled {
			t.Fatal("the transaction does not see its own SetUserDisabled")
		}
		ok(t, s.Rollback(txCtx), "Rollback")
		_, err = s.GetUser(ctx, "tx-user")
		is(t, err, storage.ErrNotFound, "user created in rolled-back tx")
		same(t, "existing user", getUser(t, s, "existing"), normUser(*fullUser("existing", at)))
	}},
	{"concurrent logins of one new user all succeed on one record, and a disable among them holds", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		base := now()
		disabled := Concurrency / 2
		n, errs := race(Concurrency, func(i int) error {
			if i == disabled {
				return s.SetUserDisabled(ctx, "ada", true)
			}
			u := fullUser("ada", base.Add(time.Duration(i)*time.Millisecond))
			_, err := s.RecordLogin(ctx, u)
			return err
		})
		if n != Concurrency {
			t.Fatalf("%d of %d concurrent writes succeeded (errors %v)", n, Concurrency, errs)
		}
		u := getUser(t, s, "ada")
		if !u.Disabled {
			t.Fatal("a concurrent login lost the disable")
		}
		end := base.Add(Concurrency * time.Millisecond)
		if u.FirstSeen.Before(base) || !u.FirstSeen.Before(end) || u.LastSeen.Before(base) || !u.LastSeen.Before(end) {
			t.Fatalf("FirstSeen %v, LastSeen %v: want the times of logins", u.FirstSeen, u.LastSeen)
		}
		list, err := s.ListUsers(ctx, "", 10)
		ok(t, err, "ListUsers")
		same(t, "records", len(list), 1)
	}},
}

// tokenUserCases check storage.TokenPersonReader where a backend has it.
var tokenUserCases = []testCase{
	{"GetTokenWithPerson returns the token with its person's status, or none", func(t *testing.T, s storage.Store) {
		r, has := s.(storage.TokenPersonReader)
		if !has {
			t.Skip("the backend reads tokens and users separately")
		}
		ctx := context.Background()
		at := now()
		recordLogin(t, s, fullUser("ada", at))
		ok(t, s.SetUserDisabled(ctx, "ada", true), "SetUserDisabled")
		local := fullUser("lin", at)
		local.Upstream, local.UpstreamSubject = "", ""
		recordLogin(t, s, local)
		ok(t, s.SetUserDisabled(ctx, "", true), "SetUserDisabled of the empty subject")
		for _, tok := range []*storage.Token{
			grantToken(storage.KindRefreshToken, "of-ada", "g1", "ada", "app", 1, at),
			grantToken(storage.KindRefreshToken, "of-lin", "g4", "lin", "app", 4, at),
			grantToken(storage.KindRefreshToken, "of-bob", "g2", "bob", "app", 2, at),
			grantToken(storage.KindAccessToken, "of-a-client", "g3", "", "app", 3, at),
		} {
			ok(t, s.CreateToken(ctx, tok), "CreateToken")
		}
		for _, tc := range []struct {
			kind storage.TokenKind
			sig  string
			want storage.PersonStatus
		}{
			{storage.KindRefreshToken, "of-ada", storage.PersonStatus{Recorded: true, Upstream: "corp", Disabled: true}},
			{storage.KindRefreshToken, "of-lin", storage.PersonStatus{Recorded: true}},
			{storage.KindRefreshToken, "of-bob", storage.PersonStatus{}},
			{storage.KindAccessToken, "of-a-client", storage.PersonStatus{}},
		} {
			tok, ps, err := r.GetTokenWithPerson(ctx, tc.kind, tc.sig)
			ok(t, err, "GetTokenWithPerson "+tc.sig)
			same(t, "token "+tc.sig, normToken(*tok), getToken(t, s, tc.kind, tc.sig))
			same(t, "person of "+tc.sig, ps, tc.want)
		}
		_, _, err := r.GetTokenWithPerson(ctx, storage.KindRefreshToken, "nope")
		is(t, err, storage.ErrNotFound, "GetTokenWithPerson unknown")
		_, _, err = r.GetTokenWithPerson(ctx, storage.KindAccessToken, "of-ada")
		is(t, err, storage.ErrNotFound, "GetTokenWithPerson of another kind")
	}},
}

// checkUserRoundTrip is CheckRoundTrip's part for users.
func checkUserRoundTrip(t *testing.T, s storage.Store, unique, a, b string, raw []byte) {
	t.Helper()
	ctx := context.Background()
	at := now()
	u := &storage.User{Subject: unique + a, Upstream: b, UpstreamSubject: a, Name: b, Email: a,
		Groups: []string{a, b}, Claims: map[string][]string{a: {b}, "k" + b: {a, b}},
		FirstSeen: at, LastSeen: at, UpstreamRefresh: raw, CheckedAt: at}
	if _, err := s.RecordLogin(ctx, u); err != nil {
		refused(t, err, "RecordLogin")
		if _, gerr := s.GetUser(ctx, u.Subject); gerr == nil {
			t.Fatalf("RecordLogin failed (%v) but GetUser found the user", err)
		}
		return
	}
	same(t, "user", getUser(t, s, u.Subject), normUser(*u))
	ok(t, s.UpdateUpstreamSession(ctx, u.Subject, raw, at, []string{b}, map[string][]string{b: {a}}), fmt.Sprintf("UpdateUpstreamSession(%q)", u.Subject))
	u.Groups, u.Claims = []string{b}, map[string][]string{b: {a}}
	same(t, "user after session update", getUser(t, s, u.Subject), normUser(*u))
}
