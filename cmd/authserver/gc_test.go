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
	res, err := collect(ctx, st, r, now, 5)
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
	res, err = collect(ctx, st, nil, now, 5)
	if err != nil || res != (gcResult{}) {
		t.Fatalf("second pass: %+v %v", res, err)
	}
}

func TestCollectStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res, err := collect(ctx, memory.New(), nil, time.Now(), 5); !errors.Is(err, context.Canceled) || res != (gcResult{}) {
		t.Fatalf("collect with a cancelled context: %+v %v, want nothing done and context.Canceled", res, err)
	}
}
