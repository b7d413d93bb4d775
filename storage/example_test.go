package storage_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// Backends report conditions with the package's sentinel errors, which
// callers compare with errors.Is (backends may wrap them).
func ExampleClientStore() {
	ctx := context.Background()
	var s storage.Store = memory.New()

	_, err := s.GetClient(ctx, "demo-app")
	fmt.Println(errors.Is(err, storage.ErrNotFound))

	c := &storage.Client{ID: "demo-app", Source: "dcr", RedirectURIs: []string{"http://127.0.0.1:7777/callback"}}
	fmt.Println(s.CreateClient(ctx, c))
	fmt.Println(errors.Is(s.CreateClient(ctx, c), storage.ErrAlreadyExists))
	// Output:
	// true
	// <nil>
	// true
}

// A transaction travels in the context (fosite's storage.Transactional
// shape); the work of a rolled-back transaction is invisible afterwards.
func ExampleTransactional() {
	ctx := context.Background()
	var s storage.Store = memory.New()

	tx, _ := s.BeginTX(ctx)
	_ = s.CreateClient(tx, &storage.Client{ID: "made-in-tx", Source: "dcr"})
	_ = s.Rollback(tx)

	_, err := s.GetClient(ctx, "made-in-tx")
	fmt.Println(errors.Is(err, storage.ErrNotFound))
	// Output: true
}

// UpdateCounters runs a read-modify-write on counters atomically, on every
// instance sharing the store: here a counter of attempts that expires an
// hour after the last one.
func ExampleCounterStore() {
	ctx := context.Background()
	var s storage.Store = memory.New()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

	attempt := func(cs []storage.Counter) ([]storage.Counter, error) {
		cs[0].Count++
		cs[0].ExpiresAt = now.Add(time.Hour)
		return cs, nil
	}
	for range 3 {
		_ = s.UpdateCounters(ctx, []string{"login:alice"}, now, attempt)
	}
	_ = s.UpdateCounters(ctx, []string{"login:alice"}, now, func(cs []storage.Counter) ([]storage.Counter, error) {
		fmt.Println(cs[0].Key, cs[0].Count)
		return cs, nil
	})
	// Two hours later the counter reads as new.
	_ = s.UpdateCounters(ctx, []string{"login:alice"}, now.Add(2*time.Hour), func(cs []storage.Counter) ([]storage.Counter, error) {
		fmt.Println(cs[0].Key, cs[0].Count)
		return cs, nil
	})
	// Output:
	// login:alice 3
	// login:alice 0
}

// RecordLogin returns the stored record, so a login of a person disabled
// by an operator is seen as disabled; the first login's time is kept.
func ExampleUserStore() {
	ctx := context.Background()
	var s storage.Store = memory.New()
	first := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

	_, _ = s.RecordLogin(ctx, &storage.User{Subject: "alice", Name: "Alice", LastSeen: first})
	_ = s.SetUserDisabled(ctx, "alice", true)
	u, _ := s.RecordLogin(ctx, &storage.User{Subject: "alice", Name: "Alice B", LastSeen: first.Add(time.Hour)})
	fmt.Println(u.Name, u.Disabled, u.FirstSeen.Format(time.Kitchen), u.LastSeen.Format(time.Kitchen))
	// Output: Alice B true 9:00AM 10:00AM
}

// Backends that can read a token together with its person's status
// implement TokenPersonReader; callers check for it and otherwise read the
// token and the person's record one after the other.
func ExampleTokenPersonReader() {
	ctx := context.Background()
	var s storage.Store = memory.New()
	_, _ = s.RecordLogin(ctx, &storage.User{Subject: "alice"})
	_ = s.SetUserDisabled(ctx, "alice", true)
	_ = s.CreateToken(ctx, &storage.Token{Kind: storage.KindRefreshToken, Signature: "sig", RequestID: "grant-1", Subject: "alice", Active: true})

	if r, ok := s.(storage.TokenPersonReader); ok {
		tok, person, _ := r.GetTokenWithPerson(ctx, storage.KindRefreshToken, "sig")
		fmt.Println(tok.RequestID, tok.Subject, person.Recorded, person.Disabled)
	}
	// Output: grant-1 alice true true
}

// An approval of a held tool call is created pending, decided once by its
// person, and used once for exactly its binding; a second use finds none.
func ExampleApprovalStore() {
	ctx := context.Background()
	var s storage.Store = memory.New()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	b := storage.ApprovalBinding{Subject: "alice", ClientID: "claude", Resource: "https://mcp.example.com/mcp",
		Tool: "send_email", ArgsDigest: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}

	a, _ := s.CreateApproval(ctx, &storage.Approval{ID: "ap-1", ApprovalBinding: b, Arguments: []byte(`{}`),
		CreatedAt: now, ExpiresAt: now.Add(5 * time.Minute)})
	fmt.Println(a.Status)
	_, err := s.DecideApproval(ctx, "ap-1", "mallory", true, now)
	fmt.Println(errors.Is(err, storage.ErrNotFound))
	a, _ = s.DecideApproval(ctx, "ap-1", "alice", true, now.Add(time.Minute))
	fmt.Println(a.Status)
	a, _ = s.UseApproval(ctx, b, now.Add(2*time.Minute))
	fmt.Println(a.Status)
	_, err = s.UseApproval(ctx, b, now.Add(2*time.Minute))
	fmt.Println(errors.Is(err, storage.ErrNotFound))
	// Output:
	// pending
	// true
	// approved
	// used
	// true
}

// Audit events are listed newest first and paged by id: the last ID of a
// page is the BeforeID of the next. An Event ending in "." matches the
// events it prefixes.
func ExampleAuditStore() {
	ctx := context.Background()
	var s storage.Store = memory.New()
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

	_ = s.AppendAuditEvents(ctx, []storage.AuditEvent{
		{Time: at, Event: "token.issued", Subject: "alice", ClientID: "demo-app"},
		{Time: at.Add(time.Second), Event: "login.failed"},
		{Time: at.Add(2 * time.Second), Event: "token.revoked", ClientID: "demo-app"},
		{Time: at.Add(3 * time.Second), Event: "admin.grants.revoked", Subject: "alice", AdminSubject: "ops-bot"},
	})
	f := storage.AuditFilter{Event: "token.", Limit: 1}
	for {
		page, _ := s.ListAuditEvents(ctx, f)
		if len(page) == 0 {
			break
		}
		fmt.Println(page[0].ID, page[0].Event)
		f.BeforeID = page[len(page)-1].ID
	}
	// Output:
	// 3 token.revoked
	// 1 token.issued
}

// AddStats adds to the hourly counts, so that every instance sharing the
// store contributes; the hour is truncated.
func ExampleStatsStore() {
	ctx := context.Background()
	var s storage.Store = memory.New()
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

	_ = s.AddStats(ctx, []storage.StatCount{{Hour: at.Add(10 * time.Minute), Name: "tokens_issued", Count: 3}}) // one instance
	_ = s.AddStats(ctx, []storage.StatCount{{Hour: at.Add(50 * time.Minute), Name: "tokens_issued", Count: 2}}) // another
	cs, _ := s.ListStats(ctx, at)
	for _, c := range cs {
		fmt.Println(c.Hour.Format(time.TimeOnly), c.Name, c.Count)
	}
	// Output: 12:00:00 tokens_issued 5
}
