package storagetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// binding is the binding of the approvals of these cases; tool varies it.
func binding(subject, tool string) storage.ApprovalBinding {
	return storage.ApprovalBinding{
		Subject: subject, ClientID: "gateway", Resource: "https://mcp.example/mcp", Tool: tool,
		ArgsDigest: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
	}
}

// pendingApproval is a new approval of b, created at and live for ttl.
func pendingApproval(id string, b storage.ApprovalBinding, at time.Time, ttl time.Duration) *storage.Approval {
	return &storage.Approval{
		ID: id, ApprovalBinding: b,
		Arguments: []byte(`{"body":"<b>hi</b>\u0007","to":["bob@example.com"]}`),
		Status:    storage.ApprovalPending, CreatedAt: at, ExpiresAt: at.Add(ttl),
	}
}

func normApproval(a storage.Approval) storage.Approval {
	a.Arguments = normBytes(a.Arguments)
	a.CreatedAt, a.ExpiresAt = normTime(a.CreatedAt), normTime(a.ExpiresAt)
	a.DecidedAt, a.UsedAt = normTime(a.DecidedAt), normTime(a.UsedAt)
	return a
}

func createApproval(t *testing.T, s storage.Store, a *storage.Approval) storage.Approval {
	t.Helper()
	got, err := s.CreateApproval(context.Background(), a)
	ok(t, err, "CreateApproval "+a.ID)
	return normApproval(*got)
}

func getApproval(t *testing.T, s storage.Store, id string) storage.Approval {
	t.Helper()
	got, err := s.GetApproval(context.Background(), id)
	ok(t, err, "GetApproval "+id)
	return normApproval(*got)
}

func approvalIDs(list []storage.Approval) []string {
	out := []string{}
	for _, a := range list {
		out = append(out, a.ID)
	}
	return out
}

var approvalCases = []testCase{
	{"a created approval is pending and reads back with every field", func(t *testing.T, s storage.Store) {
		at := now()
		a := pendingApproval("ap-1", binding("alice", "send_email"), at, 5*time.Minute)
		a.Status, a.DecidedAt, a.UsedAt = storage.ApprovalApproved, at, at // ignored
		want := normApproval(*pendingApproval("ap-1", binding("alice", "send_email"), at, 5*time.Minute))
		same(t, "returned", createApproval(t, s, a), want)
		same(t, "stored", getApproval(t, s, "ap-1"), want)
		_, err := s.GetApproval(context.Background(), "ap-unknown")
		is(t, err, storage.ErrNotFound, "GetApproval of an unknown id")
	}},
	{"a duplicate id is refused", func(t *testing.T, s storage.Store) {
		at := now()
		createApproval(t, s, pendingApproval("ap-dup", binding("alice", "a"), at, time.Minute))
		_, err := s.CreateApproval(context.Background(), pendingApproval("ap-dup", binding("alice", "b"), at, time.Minute))
		is(t, err, storage.ErrAlreadyExists, "CreateApproval with a duplicate id")
	}},
	{"a second create for a binding with a live pending approval returns that one", func(t *testing.T, s storage.Store) {
		at := now()
		createApproval(t, s, pendingApproval("ap-first", binding("alice", "send_email"), at, 5*time.Minute))
		got := createApproval(t, s, pendingApproval("ap-second", binding("alice", "send_email"), at.Add(time.Second), 5*time.Minute))
		if got.ID != "ap-first" {
			t.Fatalf("second create returned %s, want ap-first", got.ID)
		}
		if _, err := s.GetApproval(context.Background(), "ap-second"); err == nil {
			t.Fatal("the second approval was stored next to the live pending one")
		}
		// Another tool, subject or digest is another binding.
		other := binding("alice", "send_email")
		other.ArgsDigest = "00" + other.ArgsDigest[2:]
		for i, b := range []storage.ApprovalBinding{binding("alice", "delete_file"), binding("bob", "send_email"), other} {
			id := fmt.Sprintf("ap-other-%d", i)
			if got := createApproval(t, s, pendingApproval(id, b, at, time.Minute)); got.ID != id {
				t.Fatalf("create for binding %+v returned %s", b, got.ID)
			}
		}
	}},
	{"a create after the pending approval expired makes a new one", func(t *testing.T, s storage.Store) {
		at := now()
		createApproval(t, s, pendingApproval("ap-old", binding("alice", "t"), at, time.Minute))
		got := createApproval(t, s, pendingApproval("ap-new", binding("alice", "t"), at.Add(time.Minute), time.Minute))
		if got.ID != "ap-new" || got.Status != storage.ApprovalPending {
			t.Fatalf("create after expiry returned %+v, want the new pending one", got)
		}
	}},
	{"concurrent creates for one binding all return the same approval", func(t *testing.T, s storage.Store) {
		at := now()
		ids := make([]string, Concurrency)
		n, errs := race(Concurrency, func(i int) error {
			got, err := s.CreateApproval(context.Background(), pendingApproval(fmt.Sprintf("ap-race-%02d", i), binding("alice", "t"), at, time.Minute))
			if err == nil {
				ids[i] = got.ID
			}
			return err
		})
		if n != Concurrency {
			t.Fatalf("%d of %d creates succeeded: %v", n, Concurrency, errs)
		}
		for _, id := range ids {
			if id != ids[0] {
				t.Fatalf("concurrent creates returned %s and %s", ids[0], id)
			}
		}
		list, err := s.ListApprovals(context.Background(), "alice", "", 100)
		ok(t, err, "ListApprovals")
		if len(list) != 1 {
			t.Fatalf("%d approvals stored, want 1", len(list))
		}
	}},
	{"the subject approves or denies a pending approval once", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		createApproval(t, s, pendingApproval("ap-yes", binding("alice", "a"), at, time.Minute))
		createApproval(t, s, pendingApproval("ap-no", binding("alice", "b"), at, time.Minute))
		dec := at.Add(10 * time.Second)
		got, err := s.DecideApproval(ctx, "ap-yes", "alice", true, dec)
		ok(t, err, "DecideApproval approve")
		if got.Status != storage.ApprovalApproved || !got.DecidedAt.Equal(dec) {
			t.Fatalf("approved = %+v", got)
		}
		got, err = s.DecideApproval(ctx, "ap-no", "alice", false, dec)
		ok(t, err, "DecideApproval deny")
		if got.Status != storage.ApprovalDenied {
			t.Fatalf("denied = %+v", got)
		}
		same(t, "stored status", getApproval(t, s, "ap-yes").Status, storage.ApprovalApproved)
		same(t, "stored decision time", getApproval(t, s, "ap-no").DecidedAt, dec)
		for _, id := range []string{"ap-yes", "ap-no"} {
			for _, approve := range []bool{true, false} {
				_, err := s.DecideApproval(ctx, id, "alice", approve, dec)
				is(t, err, storage.ErrInactive, "deciding "+id+" twice")
			}
		}
		same(t, "status after a second decision", getApproval(t, s, "ap-no").Status, storage.ApprovalDenied)
	}},
	{"another subject cannot decide, and an unknown id is not found", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		createApproval(t, s, pendingApproval("ap-alice", binding("alice", "a"), at, time.Minute))
		_, err := s.DecideApproval(ctx, "ap-alice", "mallory", true, at)
		is(t, err, storage.ErrNotFound, "DecideApproval by another subject")
		_, err = s.DecideApproval(ctx, "ap-alice", "", true, at)
		is(t, err, storage.ErrNotFound, "DecideApproval by the empty subject")
		_, err = s.DecideApproval(ctx, "ap-nobody", "alice", true, at)
		is(t, err, storage.ErrNotFound, "DecideApproval of an unknown id")
		same(t, "status", getApproval(t, s, "ap-alice").Status, storage.ApprovalPending)
	}},
	{"an expired approval cannot be decided or used", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		createApproval(t, s, pendingApproval("ap-late", binding("alice", "a"), at, time.Minute))
		_, err := s.DecideApproval(ctx, "ap-late", "alice", true, at.Add(time.Minute))
		is(t, err, storage.ErrInactive, "DecideApproval at expiry")
		createApproval(t, s, pendingApproval("ap-unused", binding("alice", "b"), at, time.Minute))
		_, err = s.DecideApproval(ctx, "ap-unused", "alice", true, at.Add(30*time.Second))
		ok(t, err, "DecideApproval in time")
		_, err = s.UseApproval(ctx, binding("alice", "b"), at.Add(time.Minute))
		is(t, err, storage.ErrNotFound, "UseApproval at expiry")
		same(t, "status", getApproval(t, s, "ap-unused").Status, storage.ApprovalApproved)
	}},
	{"an approved approval is used once, and only for its binding", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		b := binding("alice", "send_email")
		createApproval(t, s, pendingApproval("ap-use", b, at, time.Minute))
		_, err := s.UseApproval(ctx, b, at)
		is(t, err, storage.ErrNotFound, "UseApproval of a pending approval")
		_, err = s.DecideApproval(ctx, "ap-use", "alice", true, at)
		ok(t, err, "DecideApproval")
		other := b
		other.ArgsDigest = "ff" + b.ArgsDigest[2:]
		for _, x := range []storage.ApprovalBinding{other, binding("bob", "send_email"), binding("alice", "send_mail"),
			{Subject: "alice", ClientID: "other", Resource: b.Resource, Tool: b.Tool, ArgsDigest: b.ArgsDigest},
			{Subject: "alice", ClientID: b.ClientID, Resource: "https://other.example/mcp", Tool: b.Tool, ArgsDigest: b.ArgsDigest}} {
			_, err := s.UseApproval(ctx, x, at)
			is(t, err, storage.ErrNotFound, fmt.Sprintf("UseApproval for another binding %+v", x))
		}
		used := at.Add(time.Second)
		got, err := s.UseApproval(ctx, b, used)
		ok(t, err, "UseApproval")
		if got.ID != "ap-use" || got.Status != storage.ApprovalUsed || !got.UsedAt.Equal(used) {
			t.Fatalf("used = %+v", got)
		}
		same(t, "stored", getApproval(t, s, "ap-use").Status, storage.ApprovalUsed)
		_, err = s.UseApproval(ctx, b, used)
		is(t, err, storage.ErrNotFound, "UseApproval a second time")
		_, err = s.DecideApproval(ctx, "ap-use", "alice", true, used)
		is(t, err, storage.ErrInactive, "DecideApproval of a used approval")
	}},
	{"a denial is reported once and the approval stays denied", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		b := binding("alice", "rm")
		createApproval(t, s, pendingApproval("ap-deny", b, at, time.Minute))
		_, err := s.DecideApproval(ctx, "ap-deny", "alice", false, at)
		ok(t, err, "DecideApproval")
		got, err := s.UseApproval(ctx, b, at)
		ok(t, err, "UseApproval of a denied approval")
		if got.Status != storage.ApprovalDenied || !got.UsedAt.Equal(at) {
			t.Fatalf("reported denial = %+v", got)
		}
		_, err = s.UseApproval(ctx, b, at)
		is(t, err, storage.ErrNotFound, "UseApproval after the denial was reported")
		// The binding can be asked about again.
		if got := createApproval(t, s, pendingApproval("ap-again", b, at, time.Minute)); got.ID != "ap-again" {
			t.Fatalf("create after a denial returned %s", got.ID)
		}
	}},
	{"exactly one of concurrent uses of an approval succeeds", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		b := binding("alice", "send_email")
		createApproval(t, s, pendingApproval("ap-race", b, at, time.Minute))
		_, err := s.DecideApproval(ctx, "ap-race", "alice", true, at)
		ok(t, err, "DecideApproval")
		n, errs := race(Concurrency, func(int) error {
			_, err := s.UseApproval(ctx, b, at)
			return err
		})
		if n != 1 {
			t.Fatalf("%d uses succeeded, want 1", n)
		}
		allAre(t, errs, storage.ErrNotFound)
	}},
	{"exactly one of concurrent decisions succeeds", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		createApproval(t, s, pendingApproval("ap-decide-race", binding("alice", "x"), at, time.Minute))
		n, errs := race(Concurrency, func(i int) error {
			_, err := s.DecideApproval(ctx, "ap-decide-race", "alice", i%2 == 0, at)
			return err
		})
		if n != 1 {
			t.Fatalf("%d decisions succeeded, want 1", n)
		}
		allAre(t, errs, storage.ErrInactive)
	}},
	{"approvals are listed by subject or all, in id order, a page at a time", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		for i, sub := range []string{"bob", "alice", "bob", "alice", "carol"} {
			createApproval(t, s, pendingApproval(fmt.Sprintf("ap-%d", 5-i), binding(sub, fmt.Sprint("tool", i)), at, time.Minute))
		}
		list, err := s.ListApprovals(ctx, "alice", "", 10)
		ok(t, err, "ListApprovals alice")
		same(t, "alice's", approvalIDs(list), []string{"ap-2", "ap-4"})
		list, err = s.ListApprovals(ctx, "", "", 2)
		ok(t, err, "ListApprovals first page")
		same(t, "first page", approvalIDs(list), []string{"ap-1", "ap-2"})
		list, err = s.ListApprovals(ctx, "", "ap-2", 2)
		ok(t, err, "ListApprovals second page")
		same(t, "second page", approvalIDs(list), []string{"ap-3", "ap-4"})
		list, err = s.ListApprovals(ctx, "", "ap-4", 2)
		ok(t, err, "ListApprovals last page")
		same(t, "last page", approvalIDs(list), []string{"ap-5"})
		list, err = s.ListApprovals(ctx, "", "", 0)
		ok(t, err, "ListApprovals limit 0")
		same(t, "limit 0", approvalIDs(list), []string{})
		list, err = s.ListApprovals(ctx, "nobody", "", 10)
		ok(t, err, "ListApprovals nobody")
		same(t, "nobody's", approvalIDs(list), []string{})
		if got := normApproval(listAll(t, s, "carol")[0]); got.Tool != "tool4" || string(got.Arguments) == "" {
			t.Fatalf("listed approval = %+v", got)
		}
	}},
	{"an approval is deleted by its subject or by anyone's delete, once", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		createApproval(t, s, pendingApproval("ap-del-1", binding("alice", "a"), at, time.Minute))
		createApproval(t, s, pendingApproval("ap-del-2", binding("alice", "b"), at, time.Minute))
		is(t, s.DeleteApproval(ctx, "bob", "ap-del-1"), storage.ErrNotFound, "DeleteApproval by another subject")
		getApproval(t, s, "ap-del-1")
		ok(t, s.DeleteApproval(ctx, "alice", "ap-del-1"), "DeleteApproval by its subject")
		ok(t, s.DeleteApproval(ctx, "", "ap-del-2"), "DeleteApproval of any subject")
		for _, id := range []string{"ap-del-1", "ap-del-2"} {
			_, err := s.GetApproval(ctx, id)
			is(t, err, storage.ErrNotFound, "GetApproval after delete")
			is(t, s.DeleteApproval(ctx, "", id), storage.ErrNotFound, "DeleteApproval twice")
		}
	}},
	{"expired approvals are deleted, a batch at a time", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		for i := range 3 {
			createApproval(t, s, pendingApproval(fmt.Sprint("ap-exp-", i), binding("alice", fmt.Sprint("t", i)), at.Add(-time.Hour), time.Minute))
		}
		createApproval(t, s, pendingApproval("ap-live", binding("alice", "live"), at, time.Hour))
		n, err := s.DeleteExpiredApprovals(ctx, at, 0)
		ok(t, err, "DeleteExpiredApprovals limit 0")
		same(t, "deleted with limit 0", n, 0)
		n, err = s.DeleteExpiredApprovals(ctx, at, 2)
		ok(t, err, "DeleteExpiredApprovals")
		same(t, "deleted in the first batch", n, 2)
		n, err = s.DeleteExpiredApprovals(ctx, at, 10)
		ok(t, err, "DeleteExpiredApprovals")
		same(t, "deleted in the second batch", n, 1)
		same(t, "left", approvalIDs(listAll(t, s, "alice")), []string{"ap-live"})
	}},
	{"a decision and a use in a rolled-back transaction are undone", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		b := binding("alice", "tx")
		createApproval(t, s, pendingApproval("ap-tx", b, at, time.Minute))
		txCtx, err := s.BeginTX(ctx)
		ok(t, err, "BeginTX")
		_, err = s.DecideApproval(txCtx, "ap-tx", "alice", true, at)
		ok(t, err, "DecideApproval in a transaction")
		ok(t, s.Rollback(txCtx), "Rollback")
		same(t, "status after rollback", getApproval(t, s, "ap-tx").Status, storage.ApprovalPending)
	}},
}

// listAll lists every approval of subject.
func listAll(t *testing.T, s storage.Store, subject string) []storage.Approval {
	t.Helper()
	list, err := s.ListApprovals(context.Background(), subject, "", 1000)
	ok(t, err, "ListApprovals "+subject)
	return list
}
