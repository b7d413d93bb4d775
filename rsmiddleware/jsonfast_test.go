package rsmiddleware

import (
	"encoding/base64"
	"encoding/json"
	"testing"
)

// jsonTexts are JSON values, and texts that are none, for the fast paths
// that read ids and strings without the decoder. Their callers pass them
// valid JSON only (the body, the payload and each message are checked with
// json.Valid first), so the tests compare on the valid ones.
var jsonTexts = []string{
	`"abc"`, `""`, `"a\"b"`, `"a\\b"`, `"\u0041"`, "\"a\x01b\"", "\"\xff\"", `"é"`, `"a b"`, `"`, `"a`, `a"`,
	`0`, `7`, `-7`, `-0`, `01`, `-01`, `00`, `-`, `123456789012345`, `1234567890123456`, `12345678901234567890`,
	`1.5`, `1e3`, `-1.0`, `null`, `true`, `{}`, `[]`, ``, `7a`, `--1`, `1-`,
}

// TestJSONStringAgreesWithTheDecoder: jsonString gives what
// json.Unmarshal into a string gives, for every valid JSON text.
func TestJSONStringAgreesWithTheDecoder(t *testing.T) {
	for _, in := range jsonTexts {
		if !json.Valid([]byte(in)) {
			continue
		}
		var want string
		wantErr := json.Unmarshal([]byte(in), &want)
		got, err := jsonString([]byte(in))
		if (err == nil) != (wantErr == nil) || got != want {
			t.Errorf("jsonString(%q) = %q, %v; json.Unmarshal gives %q, %v", in, got, err, want, wantErr)
		}
	}
}

// TestIDKeyAgreesWithCanonicalJSON: idKey is the RFC 8785 form of an id,
// as CanonicalJSON gives it, for every valid JSON text.
func TestIDKeyAgreesWithCanonicalJSON(t *testing.T) {
	for _, in := range jsonTexts {
		if !json.Valid([]byte(in)) {
			continue
		}
		want, wantErr := CanonicalJSON([]byte(in))
		got, err := idKey([]byte(in))
		if (err == nil) != (wantErr == nil) || (err == nil && got != string(want)) {
			t.Errorf("idKey(%q) = %q, %v; CanonicalJSON gives %q, %v", in, got, err, want, wantErr)
		}
	}
}

// TestClaimOfNeedsThreeSegments: claimOf reads the payload of a compact
// JWS only.
func TestClaimOfNeedsThreeSegments(t *testing.T) {
	payload := base64.RawURLEncoding.EncodeToString([]byte(`{"tenant":"acme","n":5,"s":"a\u0041"}`))
	if got := claimOf("h."+payload+".sig", "tenant"); got != "acme" {
		t.Fatalf("claimOf of a JWS = %q; want acme", got)
	}
	if got := claimOf("h."+payload+".sig", "n"); got != "5" {
		t.Fatalf("a number claim = %q; want 5", got)
	}
	if got := claimOf("h."+payload+".sig", "s"); got != "aA" {
		t.Fatalf("an escaped string claim = %q; want aA", got)
	}
	for _, tok := range []string{"h." + payload, payload, "h." + payload + ".sig.x", ""} {
		if got := claimOf(tok, "tenant"); got != "" {
			t.Errorf("claimOf(%q) = %q; want nothing", tok, got)
		}
	}
}
