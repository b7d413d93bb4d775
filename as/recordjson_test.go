package as

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/ory/fosite"
)

func recordCases() []storedRequest {
	at := time.Date(2026, 12, 1, 16, 4, 5, 123456789, time.UTC)
	cc := storedRequest{
		ID: "3f1c2b9e-8d7a-4c6b-9e5f-1a2b3c4d5e6f", RequestedAt: at, ClientID: "ci-bot",
		RequestedScope: []string{"mcp:tools"}, GrantedScope: []string{"mcp:tools"},
		RequestedAud: []string{"https://mcp.example/mcp"}, GrantedAud: []string{"https://mcp.example/mcp"},
		Form: url.Values{"grant_type": {"client_credentials"}, "resource": {"https://mcp.example/mcp"}, "scope": {"mcp:tools"}},
		Session: &session{Subject: "ci-bot", ExpiresAt: map[fosite.TokenType]time.Time{fosite.AccessToken: at.Add(time.Hour)},
			TokenHash: "qL8R4QIcQ_ZsRqOAbeRfcZhilN_MksRtDaErMA", StatusIdx: 4097},
	}
	person := cc
	person.Session = &session{Subject: "alice", GrantedAt: at.Add(-time.Minute), Scopes: []string{"mcp:tools", "mcp:read"},
		ExpiresAt: map[fosite.TokenType]time.Time{fosite.AccessToken: at.Add(time.Hour), fosite.RefreshToken: at.Add(24 * time.Hour), fosite.AuthorizeCode: at},
		CnfJKT:    "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I", RefreshJKT: "rjkt", AuthorizeJKT: "ajkt", Federated: "https://idp.example"}
	person.AccessSignature, person.Parent = "access-sig", "parent-sig"
	person.PKCE = &pkceChallenge{Challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", Method: "S256"}
	empty := storedRequest{}
	nilSession := cc
	nilSession.Session = nil
	emptySession := cc
	emptySession.Session = &session{}
	nilFormValue := cc
	nilFormValue.Form = url.Values{"a": nil, "b": {}, "c": {"", "x"}}
	emptyLists := cc
	emptyLists.RequestedScope, emptyLists.GrantedAud, emptyLists.Form = []string{}, []string{}, url.Values{}
	escaped := cc
	escaped.Session = &session{Subject: "a<b>&\"c\\d\u2028é\x01"}
	escapedForm := cc
	escapedForm.Form = url.Values{"scope": {"<script>"}}
	escapedKey := cc
	escapedKey.Form = url.Values{"ké": {"v"}}
	act := cc
	act.Session = &session{Subject: "ci-bot", Act: map[string]any{"sub": "agent"}}
	zone := cc
	zone.RequestedAt = at.In(time.FixedZone("", 5*3600+30*60))
	badYear := cc
	badYear.RequestedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	badZone := cc
	badZone.Session = &session{GrantedAt: at.In(time.FixedZone("", 25*3600))}
	monotonic := cc
	monotonic.RequestedAt = time.Now()
	negative := cc
	negative.Session = &session{StatusIdx: -7}
	return []storedRequest{cc, person, empty, nilSession, emptySession, nilFormValue, emptyLists, escaped, escapedForm,
		escapedKey, act, zone, badYear, badZone, monotonic, negative}
}

// TestStoredRequestMarshalIsJSONMarshal checks the hand-written encoder of
// the stored record against encoding/json: every member, omitted and
// empty ones, sorted maps, strings and times encoding/json escapes or
// refuses, and the act claim.
func TestStoredRequestMarshalIsJSONMarshal(t *testing.T) {
	for i, sr := range recordCases() {
		got, err := sr.marshal()
		want, werr := json.Marshal(&sr)
		if (err != nil) != (werr != nil) || !bytes.Equal(got, want) {
			t.Errorf("case %d: marshal\n%s (%v)\njson.Marshal\n%s (%v)", i, got, err, want, werr)
		}
	}
}

// FuzzStoredRequestMarshal checks marshal against json.Marshal for any
// strings, integers and times.
func FuzzStoredRequestMarshal(f *testing.F) {
	f.Add("id", "ci-bot", "mcp:tools", "grant_type", "client_credentials", "sub", "access_token", "jkt", int64(1764600000), int64(5), int64(7))
	f.Add("<&>", "\u2028", "\xff", "", "\"", "\\", "", "é", int64(-62135596800), int64(-1), int64(0))
	f.Fuzz(func(t *testing.T, id, cid, scope, key, value, sub, kind, jkt string, sec, nsec, idx int64) {
		at := time.Unix(sec, nsec).UTC()
		sr := storedRequest{ID: id, RequestedAt: at, ClientID: cid, RequestedScope: []string{scope}, GrantedAud: []string{value, scope},
			Form: url.Values{key: {value}, "grant_type": {scope}}, AccessSignature: jkt,
			Session: &session{Subject: sub, ExpiresAt: map[fosite.TokenType]time.Time{fosite.TokenType(kind): at, fosite.AccessToken: at},
				GrantedAt: at, Scopes: []string{scope}, StatusIdx: idx, CnfJKT: jkt, Federated: value}}
		if idx%2 == 0 {
			sr.PKCE = &pkceChallenge{Challenge: jkt, Method: sub}
		}
		got, err := sr.marshal()
		want, werr := json.Marshal(&sr)
		if (err != nil) != (werr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("marshal\n%s (%v)\njson.Marshal\n%s (%v)", got, err, want, werr)
		}
	})
}

// BenchmarkStoredRequestMarshal encodes the record of a client-credentials
// token.
func BenchmarkStoredRequestMarshal(b *testing.B) {
	sr := recordCases()[0]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sr.marshal(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWriteAccessResponseIsFosites checks the token response writer
// against fosite's WriteAccessResponse: status, headers and body, for the
// responses of each grant, a DPoP-bound one and values encoding/json
// escapes or encodes otherwise.
func TestWriteAccessResponseIsFosites(t *testing.T) {
	cases := []map[string]any{
		{"expires_in": int64(900), "scope": "mcp:tools"},
		{"expires_in": int64(900), "scope": "mcp:tools mcp:read", "refresh_token": "rt.abc-_", "id_token": "a.b.c"},
		{"expires_in": int64(0), "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"},
		{"expires_in": -5, "scope": "<b>"},
		{"expires_in": int64(900), "é": "x"},
		{"expires_in": 1.5, "aud": []string{"x"}},
		{},
	}
	f := &fosite.Fosite{}
	for i, extra := range cases {
		for _, typ := range []string{"bearer", "DPoP"} {
			resp := func() *fosite.AccessResponse {
				r := fosite.NewAccessResponse()
				r.SetAccessToken("eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJjaS1ib3QifQ.c2ln")
				r.SetTokenType(typ)
				for k, v := range extra {
					r.SetExtra(k, v)
				}
				return r
			}
			got, want := httptest.NewRecorder(), httptest.NewRecorder()
			if i%2 == 1 {
				// Headers set before, as a middleware may: replaced whole.
				for _, rec := range []*httptest.ResponseRecorder{got, want} {
					rec.Header().Add("Cache-Control", "no-store")
					rec.Header().Add("Cache-Control", "max-age=60")
					rec.Header().Add("Pragma", "no-cache")
					rec.Header().Add("Pragma", "x")
				}
			}
			writeAccessResponse(got, resp())
			f.WriteAccessResponse(context.Background(), want, nil, resp())
			if got.Code != want.Code || !reflect.DeepEqual(got.Header(), want.Header()) || got.Body.String() != want.Body.String() {
				t.Errorf("case %d %s: writeAccessResponse %d %v\n%s\nfosite %d %v\n%s", i, typ, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
			}
		}
	}
}

// BenchmarkMarshalTokenResponse encodes a client-credentials token
// response.
func BenchmarkMarshalTokenResponse(b *testing.B) {
	m := map[string]any{"access_token": "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJjaS1ib3QifQ.c2ln", "token_type": "bearer", "expires_in": int64(900), "scope": "mcp:tools"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := marshalTokenResponse(m); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzStoredRequestMarshalShapes checks marshal against json.Marshal for
// every mix of nil, empty and filled lists and maps, nil and empty
// sessions, the act claim and any zone offset: each bit of shape picks one.
func FuzzStoredRequestMarshalShapes(f *testing.F) {
	f.Add(uint32(0), int32(0), "mcp:tools", "ci-bot")
	f.Add(^uint32(0), int32(5*3600+30*60), "a<b", "\u2029")
	f.Add(uint32(0x5555), int32(-86400), "", "\xc3")
	f.Add(uint32(1<<8|1<<9|1<<13|1<<14|1<<16|1<<17), int32(-3600), "f", "g")
	f.Fuzz(func(t *testing.T, shape uint32, offset int32, s1, s2 string) {
		bit := func(i int) bool { return shape&(1<<i) != 0 }
		// list is nil, empty, or {s1, s2}, by bits i and i+1.
		list := func(i int) []string {
			switch {
			case bit(i) && bit(i+1):
				return []string{s1, s2}
			case bit(i):
				return []string{}
			case bit(i + 1):
				return []string{s1}
			}
			return nil
		}
		at := time.Date(2026, 12, 1, 16, 4, 5, int(offset)&0x3fffffff, time.FixedZone("", int(offset)))
		sr := storedRequest{ID: s1, RequestedAt: at, ClientID: s2, RequestedScope: list(0), GrantedScope: list(2),
			RequestedAud: list(4), GrantedAud: list(6)}
		if bit(8) {
			sr.Form = url.Values{}
			if bit(9) {
				sr.Form[s1], sr.Form["scope"] = list(10), list(12)
			}
		}
		if bit(14) {
			sr.Session = &session{}
			if bit(15) {
				sr.Session.ExpiresAt = map[fosite.TokenType]time.Time{}
			}
			if bit(16) {
				sr.Session.ExpiresAt = map[fosite.TokenType]time.Time{fosite.TokenType(s2): at, fosite.AccessToken: at.Add(time.Hour)}
			}
			if bit(17) {
				sr.Session.GrantedAt = at
			}
			sr.Session.Scopes = list(18)
			if bit(20) {
				sr.Session.Subject, sr.Session.TokenHash, sr.Session.RefreshJKT, sr.Session.AuthorizeJKT = s1, s2, s1, s2
			}
			if bit(21) {
				sr.Session.StatusIdx = int64(offset) << 32
			}
			if bit(22) {
				sr.Session.Act = map[string]any{"sub": s1}
			}
		}
		if bit(23) {
			sr.PKCE = &pkceChallenge{Challenge: s1, Method: s2}
		}
		if bit(24) {
			sr.AccessSignature, sr.Parent = s2, s1
		}
		got, err := sr.marshal()
		want, werr := json.Marshal(&sr)
		if (err != nil) != (werr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("marshal\n%s (%v)\njson.Marshal\n%s (%v)", got, err, want, werr)
		}
	})
}

// FuzzMarshalTokenResponse checks marshalTokenResponse against
// json.Marshal for any keys, strings and integers, and values of other
// types that it leaves to encoding/json.
func FuzzMarshalTokenResponse(f *testing.F) {
	f.Add("scope", "mcp:tools", "refresh_token", "rt", int64(900), uint8(0))
	f.Add("<&>", "\u2028", "\xff", "\x7f\x01", int64(-1<<63), uint8(7))
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string, n int64, kind uint8) {
		m := map[string]any{"access_token": "a.b.c", "token_type": "bearer", k1: v1, k2: v2}
		switch kind % 5 {
		case 0:
			m["expires_in"] = n
		case 1:
			m["expires_in"] = int(n)
		case 2:
			m["expires_in"] = int32(n)
		case 3:
			m["expires_in"] = float64(n)
		case 4:
			m["expires_in"] = []string{v1}
		}
		got, err := marshalTokenResponse(m)
		want, werr := json.Marshal(m)
		if (err != nil) != (werr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("marshalTokenResponse\n%s (%v)\njson.Marshal\n%s (%v)", got, err, want, werr)
		}
	})
}
