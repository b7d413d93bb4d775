package as

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestMarshalClaimsEveryByte checks marshalClaims against encoding/json
// with each byte value in a string member (alone, and between letters), in
// the status list URI and in the cnf thumbprint, the other members plain,
// and in every member at once: fails if a byte encoding/json escapes is let through unescaped
// (plainJSON), or if a status URI or thumbprint that needs escaping is
// written by hand.
func TestMarshalClaimsEveryByte(t *testing.T) {
	base := claimsCases()[2] // with status and cnf
	strs := []string{"é", "\u2028", "\u2029"}
	for b := 0; b < 256; b++ {
		strs = append(strs, string([]byte{byte(b)}), "a"+string([]byte{byte(b)})+"z")
	}
	check := func(where string, c accessClaims) {
		t.Helper()
		got, err := marshalClaims(&c)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(c)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: marshalClaims\n%q\njson.Marshal\n%q", where, got, want)
		}
	}
	for _, s := range strs {
		c := base
		c.Subject = s
		check("sub "+s, c)

		c = base
		c.Status = &statusClaim{StatusList: statusRef{Idx: 1, URI: s}}
		check("status uri "+s, c)
		c.Cnf = nil
		check("status uri without cnf "+s, c)

		c = base
		c.Cnf = &cnfClaim{JKT: s}
		check("cnf jkt "+s, c)
		c.Status = nil
		check("cnf jkt without status "+s, c)

		// Every member the same string: plainJSON decides alone.
		c = accessClaims{Issuer: s, Subject: s, Audience: s, ClientID: s, Scope: s, ID: s,
			Status: &statusClaim{StatusList: statusRef{URI: s}}, Cnf: &cnfClaim{JKT: s}}
		check("every member "+s, c)
	}
}

// TestMarshalClaimsLongMembers: one member far longer than the others
// (the buffer's size estimate adds every length) is encoded as
// json.Marshal does.
func TestMarshalClaimsLongMembers(t *testing.T) {
	long := strings.Repeat("x", 5000)
	for i := range 8 {
		c := claimsCases()[2]
		switch i {
		case 0:
			c.Issuer = long
		case 1:
			c.Subject = long
		case 2:
			c.Audience = long
		case 3:
			c.ClientID = long
		case 4:
			c.Scope = long
		case 5:
			c.ID = long
		case 6:
			c.Status.StatusList.URI = long
		case 7:
			c.Cnf.JKT = long
		}
		got, err := marshalClaims(&c)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := json.Marshal(c); !bytes.Equal(got, want) {
			t.Errorf("member %d long: marshalClaims differs from json.Marshal", i)
		}
	}
}
