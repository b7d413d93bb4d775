package storagetest

import (
	"context"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// RunSharedTests checks exactly-once behaviour across several stores opened
// on one database, as several authserver instances see it: a code redeemed
// through all of them at once succeeds once, a refresh token rotated through
// all of them with grace 0 succeeds once, a jti is used once, hourly
// counts added through all of them add up, and a write through one is read
// through the others. instances must hold at least two
// stores on the same, migrated, empty database.
func RunSharedTests(t *testing.T, instances []storage.Store) {
	if len(instances) < 2 {
		t.Fatal("RunSharedTests needs at least two instances")
	}
	ctx := context.Background()
	pick := func(i int) storage.Store { return instances[i%len(instances)] }

	t.Run("a write through one instance is read through the others", func(t *testing.T) {
		ok(t, pick(0).CreateClient(ctx, fullClient("shared", now())), "CreateClient")
		ok(t, pick(0).CreateKey(ctx, key("shared-key", now())), "CreateKey")
		for i := 1; i < len(instances); i++ {
			if _, err := pick(i).GetClient(ctx, "shared"); err != nil {
				t.Fatalf("instance %d: GetClient: %v", i, err)
			}
			ks, err := pick(i).ListKeys(ctx)
			if err != nil || len(ks) != 1 {
				t.Fatalf("instance %d: ListKeys = %d keys, %v", i, len(ks), err)
			}
		}
	})
	t.Run("a counter updated through every instance at once counts every update", func(t *testing.T) {
		base := now()
		n, errs := race(Concurrency, func(i int) error {
			return pick(i).UpdateCounters(ctx, []string{"shared-counter", "shared-counter-2"}, base, addOne(base))
		})
		if n != Concurrency {
			t.Fatalf("%d of %d updates succeeded: %v", n, Concurrency, errs)
		}
		for i := range instances {
			if got := readCounters(t, pick(i), base, "shared-counter")[0].Count; got != Concurrency {
				t.Fatalf("instance %d reads %d, want %d", i, got, Concurrency)
			}
		}
	})
	t.Run("hourly counts added through every instance at once add up, and events appended through each are listed through all", func(t *testing.T) {
		h := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
		n, errs := race(Concurrency, func(i int) error {
			err := pick(i).AddStats(ctx, []storage.StatCount{{Hour: h, Name: "shared_logins", Count: 1}, {Hour: h, Name: "shared_tokens", Count: 3}})
			if err == nil {
				err = pick(i).AppendAuditEvents(ctx, []storage.AuditEvent{auditEvent("shared.event", "alice", "app", now())})
			}
			return err
		})
		if n != Concurrency {
			t.Fatalf("%d of %d additions succeeded: %v", n, Concurrency, errs)
		}
		for i := range instances {
			same(t, "counts", listStats(t, pick(i), h), []storage.StatCount{
				{Hour: h, Name: "shared_logins", Count: Concurrency},
				{Hour: h, Name: "shared_tokens", Count: 3 * Concurrency},
			})
			if got := listAudit(t, pick(i), storage.AuditFilter{Event: "shared.", Limit: 1000}); len(got) != Concurrency {
				t.Fatalf("instance %d lists %d events, want %d", i, len(got), Concurrency)
			}
		}
	})
	t.Run("a session ended through one instance is gone for the others", func(t *testing.T) {
		ok(t, pick(0).CreateSession(ctx, fullSession("shared-session", "alice", now())), "CreateSession")
		getSession(t, pick(1), "shared-session")
		ok(t, pick(1).DeleteSession(ctx, "alice", "shared-session"), "DeleteSession")
		_, err := pick(0).GetSession(ctx, "shared-session")
		is(t, err, storage.ErrNotFound, "GetSession after DeleteSession elsewhere")
	})
	t.Run("a user disabled through one instance is disabled for the others, also at their next login", func(t *testing.T) {
		recordLogin(t, pick(0), fullUser("shared-user", now()))
		ok(t, pick(1).SetUserDisabled(ctx, "shared-user", true), "SetUserDisabled")
		if !getUser(t, pick(0), "shared-user").Disabled {
			t.Fatal("GetUser on another instance does not see the disable")
		}
		if !recordLogin(t, pick(0), fullUser("shared-user", now())).Disabled {
			t.Fatal("RecordLogin on another instance returned the user enabled")
		}
	})
	t.Run("a code redeemed through every instance at once succeeds once", func(t *testing.T) {
		ok(t, pick(0).CreateToken(ctx, fullToken(storage.KindAuthorizeCode, "shared-code", "r", now())), "CreateToken")
		n, errs := race(Concurrency, func(i int) error {
			return pick(i).DeactivateToken(ctx, storage.KindAuthorizeCode, "shared-code")
		})
		if n != 1 {
			t.Fatalf("%d redemptions succeeded, want 1", n)
		}
		allAre(t, errs, storage.ErrInactive)
	})
	t.Run("a code redeemed in transactions on every instance succeeds once", func(t *testing.T) {
		ok(t, pick(0).CreateToken(ctx, fullToken(storage.KindAuthorizeCode, "shared-code-tx", "r", now())), "CreateToken")
		n, errs := race(Concurrency, func(i int) error {
			s := pick(i)
			txCtx, err := s.BeginTX(ctx)
			if err != nil {
				return err
			}
			if err := s.DeactivateToken(txCtx, storage.KindAuthorizeCode, "shared-code-tx"); err != nil {
				_ = s.Rollback(txCtx)
				return err
			}
			return s.Commit(txCtx)
		})
		if n != 1 {
			t.Fatalf("%d transactional redemptions succeeded, want 1", n)
		}
		allAre(t, errs, storage.ErrInactive)
	})
	t.Run("a refresh token rotated through every instance with grace 0 succeeds once", func(t *testing.T) {
		ok(t, pick(0).CreateToken(ctx, fullToken(storage.KindRefreshToken, "shared-rt", "r", now())), "CreateToken")
		at := now()
		n, errs := race(Concurrency, func(i int) error {
			return pick(i).RotateToken(ctx, storage.KindRefreshToken, "shared-rt", at, 0)
		})
		if n != 1 {
			t.Fatalf("%d rotations succeeded, want 1", n)
		}
		allAre(t, errs, storage.ErrInactive)
	})
	t.Run("an approval used through every instance at once is used once", func(t *testing.T) {
		at := now()
		b := binding("shared-person", "send_email")
		createApproval(t, pick(0), pendingApproval("shared-approval", b, at, time.Hour))
		_, err := pick(1).DecideApproval(ctx, "shared-approval", "shared-person", true, at)
		ok(t, err, "DecideApproval")
		n, errs := race(Concurrency, func(i int) error {
			_, err := pick(i).UseApproval(ctx, b, at)
			return err
		})
		if n != 1 {
			t.Fatalf("%d uses succeeded, want 1", n)
		}
		allAre(t, errs, storage.ErrNotFound)
	})
	t.Run("a jti used through every instance at once succeeds once", func(t *testing.T) {
		exp := time.Now().Add(time.Hour)
		n, errs := race(Concurrency, func(i int) error { return pick(i).UseJTI(ctx, "shared-jti", exp) })
		if n != 1 {
			t.Fatalf("%d UseJTI calls succeeded, want 1", n)
		}
		allAre(t, errs, storage.ErrAlreadyUsed)
	})
}
