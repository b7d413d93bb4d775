package as

import (
	"bytes"
	"encoding/json"
	"testing"
)

func claimsCases() []accessClaims {
	base := accessClaims{Issuer: "https://as.example", Subject: "ci-bot", Audience: "https://mcp.example/mcp", ClientID: "ci-bot",
		Scope: "mcp:tools mcp:read", IssuedAt: 1764590000, ExpiresAt: 1764590900, ID: "q1w2e3r4t5y6u7i8o9p0aa"}
	withStatus := base
	withStatus.Status = &statusClaim{StatusList: statusRef{Idx: 4097, URI: "https://as.example/statuslists/1"}}
	bound := withStatus
	bound.Cnf = &cnfClaim{JKT: "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"}
	noScope := bound
	noScope.Scope = ""
	html := bound
	html.Subject = "a<b>&\"c\\d\u2028é\x01"
	act := bound
	act.Act = map[string]any{"sub": "agent", "act": map[string]any{"sub": "inner"}}
	negative := base
	negative.IssuedAt, negative.ExpiresAt = -1, 0
	return []accessClaims{base, withStatus, bound, noScope, html, act, negative, {}}
}

// TestMarshalClaimsIsJSONMarshal checks the hand-written encoder against
// encoding/json for plain claims, status and cnf members, strings
// encoding/json escapes, the act claim and empty values.
func TestMarshalClaimsIsJSONMarshal(t *testing.T) {
	for i, c := range claimsCases() {
		got, err := marshalClaims(&c)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(c)
		if !bytes.Equal(got, want) {
			t.Errorf("case %d: marshalClaims\n%s\njson.Marshal\n%s", i, got, want)
		}
	}
}

// FuzzMarshalClaims checks marshalClaims against json.Marshal for any
// string and integer values.
func FuzzMarshalClaims(f *testing.F) {
	f.Add("https://as.example", "ci-bot", "https://mcp.example/mcp", "mcp:tools", "jti", "https://as.example/statuslists/1", "jkt", int64(1), int64(2), int64(3), true, true)
	f.Add("<&>", "\u2028", "\xff", "", "\"", "\\", "", int64(-1), int64(0), int64(0), false, true)
	f.Fuzz(func(t *testing.T, iss, sub, aud, scope, jti, uri, jkt string, iat, exp, idx int64, status, cnf bool) {
		c := accessClaims{Issuer: iss, Subject: sub, Audience: aud, ClientID: sub, Scope: scope, IssuedAt: iat, ExpiresAt: exp, ID: jti}
		if status {
			c.Status = &statusClaim{StatusList: statusRef{Idx: idx, URI: uri}}
		}
		if cnf {
			c.Cnf = &cnfClaim{JKT: jkt}
		}
		got, err := marshalClaims(&c)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(c)
		if !bytes.Equal(got, want) {
			t.Fatalf("marshalClaims\n%s\njson.Marshal\n%s", got, want)
		}
	})
}

// BenchmarkMarshalClaims compares the claim encoder of every access token
// with encoding/json on the same claims.
func BenchmarkMarshalClaims(b *testing.B) {
	c := claimsCases()[2]
	b.Run("marshalClaims", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = marshalClaims(&c)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(c)
		}
	})
}
