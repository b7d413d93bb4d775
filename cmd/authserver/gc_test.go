package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// testKeep keeps audit events a week and hourly counts 30 days.
var testKeep = keep{audit: 7 * 24 * time.Hour, stats: 30 * 24 * time.Hour}

type countingReaper struct{ calls, n int }

func (r *countingReaper) Reap(context.Context, time.Time) (int, error) {
	r.calls++
	return r.n, nil
}

func TestCollectDeletesExpiredRecordsInBatches(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	now := time.Now()
	// 23 expired and 4 live tokens, 3 expired and 1 live consent, 5 expired
	// and 2 live one-time ids; a batch of 5 needs several rounds.
	for i := range 27 {
		exp := now.Add(-time.Minute)
		if i >= 23 {
			exp = now.Add(time.Hour)
		}
		err := st.CreateToken(ctx, &storage.Token{Kind: storage.KindAccessToken, Signature: fmt.Sprint("sig", i),
			RequestID: fmt.Sprint("req", i), ClientID: "c", Active: true, CreatedAt: now.Add(-time.Hour), ExpiresAt: exp,
			StatusIndex: int64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Revoking every token records 27 statuses; the 23 of expired tokens go.
	if _, err := st.RevokeGrants(ctx, storage.GrantFilter{ClientID: "c"}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		exp := now.Add(-time.Minute)
		if i == 3 {
			exp = now.Add(time.Hour)
		}
		if err := st.PutConsent(ctx, &storage.Consent{Subject: fmt.Sprint("u", i), ClientID: "c", Resource: "https://r",
			Scopes: []string{"s"}, GrantedAt: now.Add(-time.Hour), ExpiresAt: exp}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 7 {
		exp := now.Add(-time.Second)
		if i >= 5 {
			exp = now.Add(time.Hour)
		}
		if err := st.UseJTI(ctx, fmt.Sprint("jti", i), exp); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		exp := now.Add(-time.Second)
		if i == 5 {
			exp = now.Add(time.Hour)
		}
		if err := st.UpdateCounters(ctx, []string{fmt.Sprint("counter", i)}, now.Add(-time.Hour), func(cs []storage.Counter) ([]storage.Counter, error) {
			cs[0].Count, cs[0].ExpiresAt = 1, exp
			return cs, nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateSession(ctx, &storage.Session{ID: fmt.Sprint("session", i), Subject: "u", CreatedAt: now.Add(-time.Hour),
			LastSeenAt: now.Add(-time.Hour), IdleExpiresAt: exp, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	// 6 expired approvals (pending, decided, used alike) and 1 live one.
	for i := range 7 {
		exp := now.Add(-time.Second)
		if i == 6 {
			exp = now.Add(time.Hour)
		}
		a := &storage.Approval{ID: fmt.Sprint("approval", i), ApprovalBinding: storage.ApprovalBinding{Subject: "u", ClientID: "c",
			Resource: "https://r", Tool: fmt.Sprint("t", i), ArgsDigest: "d"}, Arguments: []byte("{}"),
			CreatedAt: now.Add(-time.Hour), ExpiresAt: exp}
		if _, err := st.CreateApproval(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	r := &countingReaper{n: 2}
	res, err := collect(ctx, st, r, now, 5, testKeep)
	if err != nil {
		t.Fatal(err)
	}
	if want := (gcResult{Tokens: 23, Consents: 3, JTIs: 5, Clients: 2, Counters: 5, Sessions: 5, Statuses: 23, Approvals: 6}); res != want || r.calls != 1 {
		t.Fatalf("got %+v (reap calls %d), want %+v", res, r.calls, want)
	}
	for i := 23; i < 27; i++ {
		if _, err := st.GetToken(ctx, storage.KindAccessToken, fmt.Sprint("sig", i)); err != nil {
			t.Fatalf("live token %d: %v", i, err)
		}
	}
	// A second pass finds nothing.
	res, err = collect(ctx, st, nil, now, 5, testKeep)
	if err != nil || res != (gcResult{}) {
		t.Fatalf("second pass: %+v %v", res, err)
	}
}

func TestCollectStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res, err := collect(ctx, memory.New(), nil, time.Now(), 5, testKeep); !errors.Is(err, context.Canceled) || res != (gcResult{}) {
		t.Fatalf("collect with a cancelled context: %+v %v, want nothing done and context.Canceled", res, err)
	}
}

// Audit events older than admin.audit_retention and hourly counts older
// than 30 days are deleted; newer ones stay; a retention of 0 keeps none.
func TestCollectDeletesOldAuditEventsAndCounts(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	now := time.Now()
	var events []storage.AuditEvent
	for _, age := range []time.Duration{8 * 24 * time.Hour, 7*24*time.Hour + time.Minute, 6 * 24 * time.Hour, time.Minute} {
		events = append(events, storage.AuditEvent{Time: now.Add(-age), Event: "token.issued", Subject: age.String()})
	}
	if err := st.AppendAuditEvents(ctx, events); err != nil {
		t.Fatal(err)
	}
	var counts []storage.StatCount
	for _, days := range []int{40, 31, 29, 0} {
		counts = append(counts, storage.StatCount{Hour: now.Add(-time.Duration(days) * 24 * time.Hour), Name: "logins", Count: 1})
	}
	if err := st.AddStats(ctx, counts); err != nil {
		t.Fatal(err)
	}
	res, err := collect(ctx, st, nil, now, 1, testKeep)
	if err != nil || res.AuditEvents != 2 || res.Stats != 2 {
		t.Fatalf("collect = %+v, %v; want 2 audit events and 2 counts deleted", res, err)
	}
	kept, err := st.ListAuditEvents(ctx, storage.AuditFilter{Limit: 10})
	if err != nil || len(kept) != 2 || kept[0].Subject != time.Minute.String() || kept[1].Subject != (6*24*time.Hour).String() {
		t.Fatalf("kept events %+v, %v; want the two younger than a week", kept, err)
	}
	stats, err := st.ListStats(ctx, time.Time{})
	if err != nil || len(stats) != 2 {
		t.Fatalf("kept counts %+v, %v; want the two younger than 30 days", stats, err)
	}
	res, err = collect(ctx, st, nil, now, 1, keep{audit: 0, stats: testKeep.stats})
	if err != nil || res.AuditEvents != 2 {
		t.Fatalf("collect with retention 0 = %+v, %v; want the 2 remaining events deleted", res, err)
	}
}
