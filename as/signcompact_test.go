package as

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// TestSignCompactMatchesJose checks that the precomputed-header signer
// produces what go-jose's Signer and CompactSerialize produce: the same
// protected header and payload segments, a signature go-jose verifies with
// the public key, and the signing-input hash signingInputHash computes.
func TestSignCompactMatchesJose(t *testing.T) {
	payload := []byte(`{"iss":"https://as.example","sub":"ci-bot","status":{"status_list":{"idx":7,"uri":"https://as.example/statuslists/1"}}}`)
	for _, alg := range []string{"ES256", "RS256", "EdDSA"} {
		t.Run(alg, func(t *testing.T) {
			k, err := newSigningKey(alg)
			if err != nil {
				t.Fatal(err)
			}
			tok, inputHash, err := k.signCompact(payload)
			if err != nil {
				t.Fatal(err)
			}
			jws, err := k.signer.Sign(payload)
			if err != nil {
				t.Fatal(err)
			}
			want, err := jws.CompactSerialize()
			if err != nil {
				t.Fatal(err)
			}
			got, exp := strings.Split(tok, "."), strings.Split(want, ".")
			if len(got) != 3 || got[0] != exp[0] || got[1] != exp[1] {
				t.Fatalf("token %q, go-jose made %q: header or payload differ", tok, want)
			}
			if len(got[2]) != len(exp[2]) {
				t.Fatalf("signature %q has another length than go-jose's %q", got[2], exp[2])
			}
			parsed, err := jose.ParseSigned(tok, []jose.SignatureAlgorithm{jose.SignatureAlgorithm(alg)})
			if err != nil {
				t.Fatal(err)
			}
			out, err := parsed.Verify(k.priv.Public())
			if err != nil || string(out) != string(payload) {
				t.Fatalf("go-jose does not verify the token: %v", err)
			}
			if inputHash != signingInputHash(tok) {
				t.Fatalf("input hash %q, signingInputHash says %q", inputHash, signingInputHash(tok))
			}
			sum := sha256.Sum256([]byte(got[0] + "." + got[1]))
			if inputHash != base64.RawURLEncoding.EncodeToString(sum[:]) {
				t.Fatal("input hash is not the SHA-256 of the signing input")
			}
		})
	}
}

// TestTokenHashIs checks tokenHashIs against signingInputHash for tokens
// hashed from the stack copy, tokens too long for it, and strings without
// a dot.
func TestTokenHashIs(t *testing.T) {
	for _, tok := range []string{"a.b.c", "eyJh.eyJz.sig", strings.Repeat("x", 4096) + ".s", strings.Repeat("y", 9000) + ".p.s", "nodot", ""} {
		h := signingInputHash(tok)
		if !tokenHashIs(tok, h) {
			t.Errorf("tokenHashIs(%.20q, its own hash %q) = false", tok, h)
		}
		if tokenHashIs(tok, h+"x") || (h != "" && tokenHashIs(tok, "")) {
			t.Errorf("tokenHashIs(%.20q) accepts another hash", tok)
		}
	}
	if tokenHashIs("a.b.c", signingInputHash("a.x.c")) {
		t.Error("tokenHashIs accepts the hash of another signing input")
	}
}
