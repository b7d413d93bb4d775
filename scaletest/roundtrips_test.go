package scaletest

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/mcpauth/mcpauth/scaletest/load"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
)

// TestTokenRequestsRoundTripsOnPostgreSQL counts, through the wire-protocol
// proxy of the benchmarks, what one token request sends to PostgreSQL once
// the connections are warm (statements prepared): a code redemption is the
// code's SELECT (joined with the person's record: may they still use the
// grant?), [BEGIN, UPDATE of the code] and [INSERT access, INSERT refresh,
// COMMIT], three round trips and one commit; a refresh adds the UPDATE that
// ends its parent's grace window, four. The answers and the
// stored state are those of RFC 6749 §4.1.2 and RFC 9700 §4.14.2: a code
// redeems once, the tokens it issued are active, a replay is invalid_grant.
// The copy of the audit events the console reads (admin.audit_retention)
// is written off the request path, in batches, so it is turned off here:
// these sequential requests would each make a batch of one.
func TestTokenRequestsRoundTripsOnPostgreSQL(t *testing.T) {
	dsnVia, _ := benchDB(t)
	base, _ := url.Parse(pgtest.BaseDSN(t))
	counter := newPGCounter(t, base.Host)
	in := newInstance(t, conf{storage: dsnVia(counter.ln.Addr().String()), extra: "admin:\n  audit_retention: 0s\n"})
	if !in.start(t) {
		t.FailNow()
	}
	const n = 40
	codes, err := load.MintCodes(context.Background(), load.Config{
		Issuer: in.issuer, Connections: 1, Scope: "mcp:tools", Resource: resource,
		PublicClientID: appID, RedirectURI: redirectURI, Username: username, Password: userPass,
	}, n)
	if err != nil {
		t.Fatal(err)
	}
	// The first redemptions prepare the statements on the connection.
	var refresh string
	for _, c := range codes[:n/2] {
		a := in.redeem(t, c.Code, c.Verifier)
		if a.status != http.StatusOK || a.AccessToken == "" || a.RefreshToken == "" {
			t.Fatalf("redemption: %d %s", a.status, a.raw)
		}
		refresh = a.RefreshToken
	}
	for range 5 {
		a := in.refresh(t, refresh)
		if a.status != http.StatusOK {
			t.Fatalf("refresh: %d %s", a.status, a.raw)
		}
		refresh = a.RefreshToken
	}

	trips0, commits0 := counter.trips.Load(), counter.commits.Load()
	var access []string
	for _, c := range codes[n/2:] {
		a := in.redeem(t, c.Code, c.Verifier)
		if a.status != http.StatusOK || a.AccessToken == "" || a.RefreshToken == "" {
			t.Fatalf("redemption: %d %s", a.status, a.raw)
		}
		access = append(access, a.AccessToken)
	}
	k := int64(n - n/2)
	if trips, commits := counter.trips.Load()-trips0, counter.commits.Load()-commits0; trips > 3*k || commits != k {
		t.Errorf("%d redemptions: %d round trips, %d commits; want at most %d and exactly %d", k, trips, commits, 3*k, k)
	}

	trips0, commits0 = counter.trips.Load(), counter.commits.Load()
	const rounds = 10
	for range rounds {
		a := in.refresh(t, refresh)
		if a.status != http.StatusOK || a.RefreshToken == "" {
			t.Fatalf("refresh: %d %s", a.status, a.raw)
		}
		refresh = a.RefreshToken
	}
	if trips, commits := counter.trips.Load()-trips0, counter.commits.Load()-commits0; trips > 4*rounds || commits != rounds {
		t.Errorf("%d refreshes: %d round trips, %d commits; want at most %d and exactly %d", rounds, trips, commits, 4*rounds, rounds)
	}

	// What the pipelines wrote is committed: the tokens are active, the
	// codes redeemed once.
	for _, tok := range access {
		if !in.introspect(t, tok) {
			t.Fatal("an access token issued by a pipelined redemption is not active")
		}
	}
	c := codes[n-1]
	if a := in.redeem(t, c.Code, c.Verifier); a.status != http.StatusBadRequest || a.Error != "invalid_grant" {
		t.Fatalf("second redemption: %d %s, want 400 invalid_grant", a.status, a.raw)
	}
	if in.introspect(t, access[len(access)-1]) {
		t.Fatal("the tokens of a code presented twice are still active (RFC 6749 §4.1.2)")
	}
}
