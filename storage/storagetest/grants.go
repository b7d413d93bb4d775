package storagetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// grantToken is a token of grant requestID for subject and client, with
// the grant's status index.
func grantToken(kind storage.TokenKind, sig, requestID, subject, clientID string, idx int64, at time.Time) *storage.Token {
	t := fullToken(kind, sig, requestID, at)
	t.Subject, t.ClientID, t.StatusIndex = subject, clientID, idx
	return t
}

// seedGrants stores three grants of two people and two clients, each with
// an access and a refresh token, and a consent for each (person, client)
// pair plus one of bob for client-2 with no grant.
func seedGrants(t *testing.T, s storage.Store, at time.Time) {
	t.Helper()
	ctx := context.Background()
	for i, g := range []struct {
		req, sub, cid string
		idx           int64
	}{{"r-alice-1", "alice", "client-1", 11}, {"r-alice-2", "alice", "client-2", 12}, {"r-bob-1", "bob", "client-1", 13}} {
		ok(t, s.CreateToken(ctx, grantToken(storage.KindAccessToken, "a-"+g.req, g.req, g.sub, g.cid, g.idx, at.Add(time.Duration(i)*time.Second))), "CreateToken")
		ok(t, s.CreateToken(ctx, grantToken(storage.KindRefreshToken, "r-"+g.req, g.req, g.sub, g.cid, g.idx, at.Add(time.Duration(i)*time.Second))), "CreateToken")
	}
	for _, c := range [][2]string{{"alice", "client-1"}, {"alice", "client-2"}, {"bob", "client-1"}, {"bob", "client-2"}} {
		ok(t, s.PutConsent(ctx, &storage.Consent{Subject: c[0], ClientID: c[1], Resource: "https://mcp.example/mcp", Scopes: []string{"mcp:tools"}, GrantedAt: at}), "PutConsent")
	}
}

func activeOf(t *testing.T, s storage.Store, sigs ...string) []bool {
	t.Helper()
	var out []bool
	for _, sig := range sigs {
		kind := storage.KindAccessToken
		if sig[0] == 'r' {
			kind = storage.KindRefreshToken
		}
		out = append(out, getToken(t, s, kind, sig).Active)
	}
	return out
}

func consentExists(t *testing.T, s storage.Store, subject, clientID string) bool {
	t.Helper()
	_, err := s.GetConsent(context.Background(), subject, clientID, "https://mcp.example/mcp")
	if err == nil {
		return true
	}
	is(t, err, storage.ErrNotFound, "GetConsent")
	return false
}

func invalidIndices(t *testing.T, s storage.Store, at time.Time) []int64 {
	t.Helper()
	_, inv, err := s.StatusList(context.Background(), at)
	ok(t, err, "StatusList")
	return inv
}

var grantCases = []testCase{
	{"a grant is revoked whole when a token of another client in it matches (token exchange)", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		// r-shared: alice's grant to client-1, plus an access token that
		// client-2 got by exchanging one of it (same request id, subject
		// and status index); r-other: client-2's own grant.
		for _, tok := range []*storage.Token{
			grantToken(storage.KindAccessToken, "a-shared-1", "r-shared", "alice", "client-1", 21, at),
			grantToken(storage.KindRefreshToken, "r-shared-1", "r-shared", "alice", "client-1", 21, at),
			grantToken(storage.KindAccessToken, "a-shared-2", "r-shared", "alice", "client-2", 21, at.Add(time.Second)),
			grantToken(storage.KindAccessToken, "a-other", "r-other", "", "client-2", 22, at),
		} {
			ok(t, s.CreateToken(ctx, tok), "CreateToken")
		}
		n, err := s.RevokeGrants(ctx, storage.GrantFilter{Subject: "alice", ClientID: "client-1"})
		ok(t, err, "RevokeGrants")
		same(t, "grants revoked", n, 1)
		same(t, "active after revoking alice's grant to client-1", activeOf(t, s, "a-shared-1", "r-shared-1", "a-shared-2", "a-other"),
			[]bool{false, false, false, true})
		same(t, "invalid statuses", invalidIndices(t, s, at), []int64{21})

		// From the exchanging client's side: deleting client-2 ends the
		// grants it holds a token of, whole, so no token of a revoked
		// status index stays active.
		ok(t, s.CreateToken(ctx, grantToken(storage.KindAccessToken, "a-b-1", "r-b", "bob", "client-1", 23, at)), "CreateToken")
		ok(t, s.CreateToken(ctx, grantToken(storage.KindRefreshToken, "r-b-1", "r-b", "bob", "client-1", 23, at)), "CreateToken")
		ok(t, s.CreateToken(ctx, grantToken(storage.KindAccessToken, "a-b-2", "r-b", "bob", "client-2", 23, at)), "CreateToken")
		n, err = s.RevokeGrants(ctx, storage.GrantFilter{ClientID: "client-2"})
		ok(t, err, "RevokeGrants by client")
		same(t, "grants revoked by client", n, 2)
		same(t, "active after revoking client-2", activeOf(t, s, "a-b-1", "r-b-1", "a-b-2", "a-other"), []bool{false, false, false, false})
		same(t, "invalid statuses", invalidIndices(t, s, at), []int64{21, 22, 23})
	}},
	{"revoking a person's grants for a client revokes only those, with their status and consent", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		seedGrants(t, s, at)
		n, err := s.RevokeGrants(ctx, storage.GrantFilter{Subject: "alice", ClientID: "client-1"})
		ok(t, err, "RevokeGrants")
		if n != 1 {
			t.Fatalf("RevokeGrants = %d grants, want 1", n)
		}
		same(t, "active after revoke", activeOf(t, s, "a-r-alice-1", "r-r-alice-1", "a-r-alice-2", "r-r-alice-2", "a-r-bob-1", "r-r-bob-1"),
			[]bool{false, false, true, true, true, true})
		same(t, "invalid statuses", invalidIndices(t, s, at), []int64{11})
		same(t, "consents kept", []bool{consentExists(t, s, "alice", "client-1"), consentExists(t, s, "alice", "client-2"), consentExists(t, s, "bob", "client-1")},
			[]bool{false, true, true})
		n, err = s.RevokeGrants(ctx, storage.GrantFilter{Subject: "alice", ClientID: "client-1"})
		ok(t, err, "RevokeGrants again")
		if n != 0 {
			t.Fatalf("second RevokeGrants = %d grants, want 0", n)
		}
	}},
	{"revoking a client's grants revokes every person's and every consent for it", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		seedGrants(t, s, at)
		n, err := s.RevokeGrants(ctx, storage.GrantFilter{ClientID: "client-1"})
		ok(t, err, "RevokeGrants")
		if n != 2 {
			t.Fatalf("RevokeGrants = %d grants, want 2", n)
		}
		same(t, "active", activeOf(t, s, "a-r-alice-1", "a-r-alice-2", "a-r-bob-1", "r-r-bob-1"), []bool{false, true, false, false})
		same(t, "invalid statuses", invalidIndices(t, s, at), []int64{11, 13})
		same(t, "consents", []bool{consentExists(t, s, "alice", "client-1"), consentExists(t, s, "bob", "client-1"), consentExists(t, s, "bob", "client-2")},
			[]bool{false, false, true})
	}},
	{"revoking a person's grants revokes them for every client; one grant keeps the consent", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		seedGrants(t, s, at)
		n, err := s.RevokeGrants(ctx, storage.GrantFilter{RequestID: "r-bob-1"})
		ok(t, err, "RevokeGrants by request")
		if n != 1 {
			t.Fatalf("RevokeGrants by request = %d, want 1", n)
		}
		if !consentExists(t, s, "bob", "client-1") {
			t.Fatal("revoking one grant deleted the consent")
		}
		n, err = s.RevokeGrants(ctx, storage.GrantFilter{Subject: "alice"})
		ok(t, err, "RevokeGrants by subject")
		if n != 2 {
			t.Fatalf("RevokeGrants by subject = %d, want 2", n)
		}
		same(t, "active", activeOf(t, s, "a-r-alice-1", "r-r-alice-2", "a-r-bob-1"), []bool{false, false, false})
		same(t, "invalid statuses", invalidIndices(t, s, at), []int64{11, 12, 13})
		same(t, "consents", []bool{consentExists(t, s, "alice", "client-1"), consentExists(t, s, "alice", "client-2"), consentExists(t, s, "bob", "client-2")},
			[]bool{false, false, true})
	}},
	{"an empty filter revokes nothing", func(t *testing.T, s storage.Store) {
		at := now()
		seedGrants(t, s, at)
		_, err := s.RevokeGrants(context.Background(), storage.GrantFilter{})
		is(t, err, storage.ErrInvalidFilter, "RevokeGrants with an empty filter")
		same(t, "active", activeOf(t, s, "a-r-alice-1", "a-r-bob-1"), []bool{true, true})
	}},
	{"grants list newest first with their times, and drop out when revoked or expired", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		seedGrants(t, s, at)
		// A later token of alice's first grant (a refresh) makes it the newest.
		later := grantToken(storage.KindAccessToken, "a-r-alice-1-b", "r-alice-1", "alice", "client-1", 11, at.Add(time.Minute))
		later.ExpiresAt = at.Add(2 * time.Hour)
		ok(t, s.CreateToken(ctx, later), "CreateToken")
		gs, err := s.ListGrants(ctx, storage.GrantFilter{}, at, 0)
		ok(t, err, "ListGrants")
		for i := range gs {
			gs[i].CreatedAt, gs[i].LastUsedAt, gs[i].ExpiresAt = normTime(gs[i].CreatedAt), normTime(gs[i].LastUsedAt), normTime(gs[i].ExpiresAt)
		}
		same(t, "grants", gs, []storage.Grant{
			{RequestID: "r-alice-1", Subject: "alice", ClientID: "client-1", CreatedAt: at, LastUsedAt: at.Add(time.Minute), ExpiresAt: at.Add(2 * time.Hour), StatusIndex: 11},
			{RequestID: "r-bob-1", Subject: "bob", ClientID: "client-1", CreatedAt: at.Add(2 * time.Second), LastUsedAt: at.Add(2 * time.Second), ExpiresAt: at.Add(2*time.Second + time.Hour), StatusIndex: 13},
			{RequestID: "r-alice-2", Subject: "alice", ClientID: "client-2", CreatedAt: at.Add(time.Second), LastUsedAt: at.Add(time.Second), ExpiresAt: at.Add(time.Second + time.Hour), StatusIndex: 12},
		})
		gs, err = s.ListGrants(ctx, storage.GrantFilter{ClientID: "client-1"}, at, 1)
		ok(t, err, "ListGrants with limit")
		if len(gs) != 1 || gs[0].RequestID != "r-alice-1" {
			t.Fatalf("ListGrants(client-1, limit 1) = %+v", gs)
		}
		gs, err = s.ListGrants(ctx, storage.GrantFilter{Subject: "bob"}, at, 0)
		ok(t, err, "ListGrants bob")
		if len(gs) != 1 || gs[0].RequestID != "r-bob-1" {
			t.Fatalf("ListGrants(bob) = %+v", gs)
		}
		_, err = s.RevokeGrants(ctx, storage.GrantFilter{RequestID: "r-bob-1"})
		ok(t, err, "RevokeGrants")
		gs, err = s.ListGrants(ctx, storage.GrantFilter{}, at.Add(90*time.Minute), 0)
		ok(t, err, "ListGrants later")
		if len(gs) != 1 || gs[0].RequestID != "r-alice-1" {
			t.Fatalf("ListGrants after revoke and expiry = %+v, want r-alice-1 alone", gs)
		}
	}},
	{"deleting a client revokes its grants", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		seedGrants(t, s, at)
		ok(t, s.CreateClient(ctx, fullClient("client-1", at)), "CreateClient")
		ok(t, s.DeleteClient(ctx, "client-1"), "DeleteClient")
		same(t, "active", activeOf(t, s, "a-r-alice-1", "r-r-bob-1", "a-r-alice-2"), []bool{false, false, true})
		same(t, "invalid statuses", invalidIndices(t, s, at), []int64{11, 13})
		is(t, s.DeleteClient(ctx, "client-1"), storage.ErrNotFound, "DeleteClient again")
	}},
	{"reaping a client revokes its grants", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		seedGrants(t, s, at)
		c := fullClient("client-2", at.Add(-48*time.Hour))
		c.Source, c.LastUsedAt = "dcr", at.Add(-48*time.Hour)
		ok(t, s.CreateClient(ctx, c), "CreateClient")
		n, err := s.ReapClients(ctx, at.Add(-24*time.Hour), at.Add(-24*time.Hour), 10)
		ok(t, err, "ReapClients")
		if n != 1 {
			t.Fatalf("ReapClients = %d, want 1", n)
		}
		same(t, "active", activeOf(t, s, "a-r-alice-2", "r-r-alice-2", "a-r-alice-1"), []bool{false, false, true})
		same(t, "invalid statuses", invalidIndices(t, s, at), []int64{12})
	}},
	{"revoking a family records its status", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		seedGrants(t, s, at)
		ok(t, s.RevokeTokens(ctx, storage.KindRefreshToken, "r-alice-2"), "RevokeTokens")
		same(t, "invalid statuses", invalidIndices(t, s, at), []int64{12})
		same(t, "active", activeOf(t, s, "r-r-alice-2", "a-r-alice-2"), []bool{false, true})
	}},
	{"a rolled-back revocation leaves tokens and statuses as they were", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		seedGrants(t, s, at)
		tctx, err := s.BeginTX(ctx)
		ok(t, err, "BeginTX")
		_, err = s.RevokeGrants(tctx, storage.GrantFilter{ClientID: "client-1"})
		ok(t, err, "RevokeGrants in tx")
		ok(t, s.Rollback(tctx), "Rollback")
		same(t, "active", activeOf(t, s, "a-r-alice-1", "a-r-bob-1"), []bool{true, true})
		if inv := invalidIndices(t, s, at); len(inv) != 0 {
			t.Fatalf("statuses after rollback = %v, want none", inv)
		}
		if !consentExists(t, s, "bob", "client-1") {
			t.Fatal("consent gone after rollback")
		}
	}},
}

var statusCases = []testCase{
	{"concurrent allocations never share an index", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		var mu sync.Mutex
		var firsts []int64
		n, errs := race(Concurrency, func(int) error {
			first, err := s.AllocateStatusIndices(ctx, 10)
			if err != nil {
				return err
			}
			mu.Lock()
			firsts = append(firsts, first)
			mu.Unlock()
			return nil
		})
		if n != Concurrency {
			t.Fatalf("%d of %d allocations succeeded: %v", n, Concurrency, errs)
		}
		slices.Sort(firsts)
		for i, f := range firsts {
			if f != int64(1+10*i) {
				t.Fatalf("allocation %d starts at %d, want %d (ranges %v)", i, f, 1+10*i, firsts)
			}
		}
		last, inv, err := s.StatusList(ctx, now())
		ok(t, err, "StatusList")
		if last != 10*Concurrency || len(inv) != 0 {
			t.Fatalf("StatusList = %d, %v; want %d, none", last, inv, 10*Concurrency)
		}
	}},
	{"statuses expire with their tokens and are collected", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		for i := range 5 {
			req := fmt.Sprintf("r%d", i)
			tok := grantToken(storage.KindAccessToken, "a"+req, req, "alice", "client-1", int64(i+1), at)
			tok.ExpiresAt = at.Add(time.Duration(i) * time.Hour)
			ok(t, s.CreateToken(ctx, tok), "CreateToken")
		}
		_, err := s.RevokeGrants(ctx, storage.GrantFilter{Subject: "alice"})
		ok(t, err, "RevokeGrants")
		same(t, "statuses now", invalidIndices(t, s, at), []int64{1, 2, 3, 4, 5})
		same(t, "statuses in 150 minutes", invalidIndices(t, s, at.Add(150*time.Minute)), []int64{4, 5})
		n, err := s.DeleteExpiredStatuses(ctx, at.Add(150*time.Minute), 2)
		ok(t, err, "DeleteExpiredStatuses")
		if n != 2 {
			t.Fatalf("DeleteExpiredStatuses = %d, want 2 (the limit)", n)
		}
		n, err = s.DeleteExpiredStatuses(ctx, at.Add(150*time.Minute), 10)
		ok(t, err, "DeleteExpiredStatuses")
		if n != 1 {
			t.Fatalf("second DeleteExpiredStatuses = %d, want 1", n)
		}
		same(t, "statuses left", invalidIndices(t, s, at), []int64{4, 5})
	}},
}

// raceCases: a revocation racing a refresh that rotates a token of the
// grant in a transaction and writes its successor leaves nothing active.
var raceCases = []testCase{
	{"a revocation racing a rotation leaves no token of the grant active", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		for i := range 20 {
			req := fmt.Sprintf("race-%d", i)
			ok(t, s.CreateToken(ctx, grantToken(storage.KindRefreshToken, "r0-"+req, req, "alice", "client-1", int64(i+1), at)), "CreateToken")
			// The revocation starts once the rotation has happened and
			// while its transaction, which still writes the successor,
			// is open: it must wait for it (row locks, the single writer,
			// the memory store's transaction slot) and revoke the successor.
			var wg sync.WaitGroup
			rotated := make(chan struct{})
			var rotateErr error
			wg.Add(2)
			go func() {
				defer wg.Done()
				tctx, err := s.BeginTX(ctx)
				if err != nil {
					close(rotated)
					rotateErr = err
					return
				}
				err = s.RotateToken(tctx, storage.KindRefreshToken, "r0-"+req, at, 0)
				close(rotated)
				if err != nil {
					_ = s.Rollback(tctx)
					rotateErr = err
					return
				}
				time.Sleep(5 * time.Millisecond)
				if err := s.CreateToken(tctx, grantToken(storage.KindRefreshToken, "r1-"+req, req, "alice", "client-1", int64(i+1), at)); err != nil {
					_ = s.Rollback(tctx)
					rotateErr = err
					return
				}
				rotateErr = s.Commit(tctx)
			}()
			go func() {
				defer wg.Done()
				<-rotated
				_, err := s.RevokeGrants(ctx, storage.GrantFilter{RequestID: req})
				if err != nil {
					t.Errorf("RevokeGrants: %v", err)
				}
			}()
			wg.Wait()
			ok(t, rotateErr, "rotation")
			for _, sig := range []string{"r0-" + req, "r1-" + req} {
				tok, err := s.GetToken(ctx, storage.KindRefreshToken, sig)
				if err == nil && tok.Active {
					t.Fatalf("round %d: %s is active after the grant was revoked", i, sig)
				}
			}
		}
	}},
}
