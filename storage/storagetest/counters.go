package storagetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// addOne is the update of the counter races: one more, kept for an hour.
func addOne(now time.Time) func([]storage.Counter) ([]storage.Counter, error) {
	return func(cs []storage.Counter) ([]storage.Counter, error) {
		for i := range cs {
			cs[i].Count++
			cs[i].Until = now.Add(time.Duration(cs[i].Count) * time.Second)
			cs[i].ExpiresAt = now.Add(time.Hour)
		}
		return cs, nil
	}
}

// readCounters returns the counters of keys without changing them.
func readCounters(t *testing.T, s storage.Store, at time.Time, keys ...string) []storage.Counter {
	t.Helper()
	var got []storage.Counter
	ok(t, s.UpdateCounters(context.Background(), keys, at, func(cs []storage.Counter) ([]storage.Counter, error) {
		got = append([]storage.Counter(nil), cs...)
		return cs, nil
	}), "UpdateCounters (read)")
	for i := range got {
		got[i].Until, got[i].ExpiresAt = normTime(got[i].Until), normTime(got[i].ExpiresAt)
	}
	return got
}

var counterCases = []testCase{
	{"a counter reads as zero, then as written, in the order of its keys", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		base := now()
		same(t, "fresh", readCounters(t, s, base, "b", "a"), []storage.Counter{{Key: "b"}, {Key: "a"}})
		ok(t, s.UpdateCounters(ctx, []string{"b", "a"}, base, func(cs []storage.Counter) ([]storage.Counter, error) {
			cs[0] = storage.Counter{Count: 2, Until: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)}
			cs[1] = storage.Counter{Count: 7, ExpiresAt: base.Add(time.Hour)}
			return cs, nil
		}), "UpdateCounters")
		same(t, "written", readCounters(t, s, base, "a", "b", "c"), []storage.Counter{
			{Key: "a", Count: 7, ExpiresAt: base.Add(time.Hour)},
			{Key: "b", Count: 2, Until: base.Add(time.Minute), ExpiresAt: base.Add(time.Hour)},
			{Key: "c"},
		})
	}},
	{"a counter past its expiry reads as new, and a zero expiry deletes it", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		base := now()
		ok(t, s.UpdateCounters(ctx, []string{"k", "gone"}, base, addOne(base)), "UpdateCounters")
		same(t, "a minute later", readCounters(t, s, base.Add(time.Minute), "k")[0].Count, 1)
		same(t, "an hour later", readCounters(t, s, base.Add(time.Hour), "k"), []storage.Counter{{Key: "k"}})
		ok(t, s.UpdateCounters(ctx, []string{"gone"}, base, func(cs []storage.Counter) ([]storage.Counter, error) {
			return []storage.Counter{{}}, nil
		}), "UpdateCounters (reset)")
		same(t, "reset", readCounters(t, s, base, "gone"), []storage.Counter{{Key: "gone"}})
	}},
	{"an update that fails writes nothing", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		base := now()
		ok(t, s.UpdateCounters(ctx, []string{"k"}, base, addOne(base)), "UpdateCounters")
		boom := errors.New("boom")
		err := s.UpdateCounters(ctx, []string{"k", "other"}, base, func(cs []storage.Counter) ([]storage.Counter, error) {
			cs[0].Count = 99
			cs[1].Count = 99
			return cs, boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("UpdateCounters = %v, want the update's error", err)
		}
		same(t, "after the failed update", []int{readCounters(t, s, base, "k")[0].Count, readCounters(t, s, base, "other")[0].Count}, []int{1, 0})
	}},
	{"concurrent updates of overlapping keys are serialised", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		base := now()
		n, errs := race(Concurrency, func(i int) error {
			// Half name the keys in one order, half in the other: no deadlock.
			keys := []string{"shared", fmt.Sprintf("own-%d", i), "shared-2"}
			if i%2 == 1 {
				keys = []string{"shared-2", fmt.Sprintf("own-%d", i), "shared"}
			}
			return s.UpdateCounters(ctx, keys, base, addOne(base))
		})
		if n != Concurrency {
			t.Fatalf("%d of %d updates succeeded: %v", n, Concurrency, errs)
		}
		got := readCounters(t, s, base, "shared", "shared-2", "own-3")
		same(t, "counts", []int{got[0].Count, got[1].Count, got[2].Count}, []int{Concurrency, Concurrency, 1})
	}},
	{"expired counters are deleted in batches", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		base := now()
		for i := range 5 {
			ok(t, s.UpdateCounters(ctx, []string{fmt.Sprintf("old-%d", i)}, base.Add(-2*time.Hour), addOne(base.Add(-2*time.Hour))), "UpdateCounters")
		}
		ok(t, s.UpdateCounters(ctx, []string{"live"}, base, addOne(base)), "UpdateCounters")
		for _, want := range []int{2, 2, 1, 0} {
			n, err := s.DeleteExpiredCounters(ctx, base, 2)
			ok(t, err, "DeleteExpiredCounters")
			if n != want {
				t.Fatalf("DeleteExpiredCounters = %d, want %d", n, want)
			}
		}
		same(t, "live counter", readCounters(t, s, base, "live")[0].Count, 1)
	}},
}

func fullSession(id, subject string, at time.Time) *storage.Session {
	return &storage.Session{ID: id, Subject: subject, CreatedAt: at, LastSeenAt: at, IdleExpiresAt: at.Add(2 * time.Hour),
		ExpiresAt: at.Add(12 * time.Hour), UserAgent: "Mozilla/5.0 \"ü\"", Address: "2001:db8::1"}
}

func normSession(x storage.Session) storage.Session {
	x.CreatedAt, x.LastSeenAt = normTime(x.CreatedAt), normTime(x.LastSeenAt)
	x.IdleExpiresAt, x.ExpiresAt = normTime(x.IdleExpiresAt), normTime(x.ExpiresAt)
	return x
}

func getSession(t *testing.T, s storage.Store, id string) storage.Session {
	t.Helper()
	x, err := s.GetSession(context.Background(), id)
	ok(t, err, "GetSession")
	return normSession(*x)
}

func sessionIDs(t *testing.T, s storage.Store, subject string) []string {
	t.Helper()
	list, err := s.ListSessions(context.Background(), subject)
	ok(t, err, "ListSessions")
	var out []string
	for _, x := range list {
		if x.Subject != subject {
			t.Fatalf("ListSessions(%q) returned %q's session", subject, x.Subject)
		}
		out = append(out, x.ID)
	}
	return out
}

var sessionCases = []testCase{
	{"a session reads back, is touched, and a duplicate id is refused", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		x := fullSession("s1", "alice", now())
		ok(t, s.CreateSession(ctx, x), "CreateSession")
		same(t, "session", getSession(t, s, "s1"), normSession(*x))
		is(t, s.CreateSession(ctx, fullSession("s1", "bob", now())), storage.ErrAlreadyExists, "CreateSession duplicate")
		later := now().Add(time.Minute)
		ok(t, s.TouchSession(ctx, "s1", later, later.Add(2*time.Hour)), "TouchSession")
		want := normSession(*x)
		want.LastSeenAt, want.IdleExpiresAt = later, later.Add(2*time.Hour)
		same(t, "touched", getSession(t, s, "s1"), want)
		is(t, s.TouchSession(ctx, "nope", later, later), storage.ErrNotFound, "TouchSession unknown")
		_, err := s.GetSession(ctx, "nope")
		is(t, err, storage.ErrNotFound, "GetSession unknown")
	}},
	{"sessions are listed newest first per subject and deleted only by their subject", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		base := now()
		ok(t, s.CreateSession(ctx, fullSession("a-old", "alice", base.Add(-time.Hour))), "CreateSession")
		ok(t, s.CreateSession(ctx, fullSession("a-new", "alice", base)), "CreateSession")
		ok(t, s.CreateSession(ctx, fullSession("b", "bob", base)), "CreateSession")
		same(t, "alice", sessionIDs(t, s, "alice"), []string{"a-new", "a-old"})
		same(t, "nobody", len(sessionIDs(t, s, "nobody")), 0)
		ok(t, s.DeleteSession(ctx, "alice", "b"), "DeleteSession of another's")
		same(t, "bob untouched", sessionIDs(t, s, "bob"), []string{"b"})
		ok(t, s.DeleteSession(ctx, "alice", "a-old"), "DeleteSession")
		same(t, "alice after", sessionIDs(t, s, "alice"), []string{"a-new"})
		ok(t, s.DeleteSession(ctx, "", "b"), "DeleteSession of any subject")
		same(t, "bob after", len(sessionIDs(t, s, "bob")), 0)
		ok(t, s.DeleteSession(ctx, "", "b"), "DeleteSession of nothing")
	}},
	{"sessions past their idle or absolute end are deleted in batches", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		base := now()
		for i := range 3 {
			x := fullSession(fmt.Sprintf("idle-%d", i), "alice", base.Add(-time.Hour))
			x.IdleExpiresAt = base.Add(-time.Minute)
			ok(t, s.CreateSession(ctx, x), "CreateSession")
		}
		for i := range 2 {
			x := fullSession(fmt.Sprintf("old-%d", i), "alice", base.Add(-24*time.Hour))
			x.IdleExpiresAt, x.ExpiresAt = base.Add(time.Hour), base.Add(-time.Minute)
			ok(t, s.CreateSession(ctx, x), "CreateSession")
		}
		ok(t, s.CreateSession(ctx, fullSession("live", "alice", base)), "CreateSession")
		for _, want := range []int{2, 2, 1, 0} {
			n, err := s.DeleteExpiredSessions(ctx, base, 2)
			ok(t, err, "DeleteExpiredSessions")
			if n != want {
				t.Fatalf("DeleteExpiredSessions = %d, want %d", n, want)
			}
		}
		same(t, "left", sessionIDs(t, s, "alice"), []string{"live"})
	}},
}
