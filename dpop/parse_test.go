package dpop

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// TestParseLengthLimits: a proof of exactly maxProofLen bytes and a jti of
// exactly maxJTILen bytes are accepted; one byte more is refused, naming
// the limit.
func TestParseLengthLimits(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hdr := map[jose.HeaderKey]any{jose.HeaderType: Type}
	// A padding claim grows the proof one or two characters at a time, and
	// a padding header shifts where those steps fall; find a proof of
	// exactly maxProofLen bytes and one just over it.
	var exact, over string
	for h := 0; h < 3 && exact == ""; h++ {
		padded := map[jose.HeaderKey]any{jose.HeaderType: Type, "pad": strings.Repeat("h", h)}
		for n := 5500; n < 6500; n++ {
			c := goodClaims()
			c["pad"] = strings.Repeat("p", n)
			p := forge(t, key, jose.ES256, padded, true, c)
			if len(p) == maxProofLen {
				exact = p
			}
			if len(p) > maxProofLen {
				over = p
				break
			}
		}
	}
	if exact == "" || over == "" {
		t.Fatalf("no proof of exactly %d bytes found", maxProofLen)
	}
	if _, err := Parse(exact, DefaultAlgs); err != nil {
		t.Errorf("a proof of %d bytes: %v", maxProofLen, err)
	}
	if _, err := Parse(over, DefaultAlgs); !errors.Is(err, ErrInvalidProof) || !strings.Contains(err.Error(), "too long") {
		t.Errorf("a proof of %d bytes: %v; want too long", len(over), err)
	}

	c := goodClaims()
	c["jti"] = strings.Repeat("j", maxJTILen)
	if _, err := Parse(forge(t, key, jose.ES256, hdr, true, c), DefaultAlgs); err != nil {
		t.Errorf("a jti of %d bytes: %v", maxJTILen, err)
	}
	c["jti"] = strings.Repeat("j", maxJTILen+1)
	if _, err := Parse(forge(t, key, jose.ES256, hdr, true, c), DefaultAlgs); !errors.Is(err, ErrInvalidProof) || !strings.Contains(err.Error(), "jti is too long") {
		t.Errorf("a jti of %d bytes: %v; want jti is too long", maxJTILen+1, err)
	}
}

// TestParseDropsHMACAndNoneFromTheAlgorithms: listing none or an HS*
// algorithm allows neither, and the algorithms listed after them still
// count. Fails if the JWS parser is given HS256 (then the refusal comes
// from the jwk check instead of the algorithm list).
func TestParseDropsHMACAndNoneFromTheAlgorithms(t *testing.T) {
	algs := []string{"none", "HS256", "ES256"}
	hdr := map[jose.HeaderKey]any{jose.HeaderType: Type}
	hmacProof := forge(t, []byte("0123456789abcdef0123456789abcdef"), jose.HS256, hdr, false, goodClaims())
	_, err := Parse(hmacProof, algs)
	if !errors.Is(err, ErrInvalidProof) || !strings.Contains(err.Error(), "permitted algorithm") {
		t.Errorf("HS256 proof: %v; want refused by the algorithm list", err)
	}
	s := newSigner(t)
	good, err := s.Proof("POST", tokenURL, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(good, algs); err != nil {
		t.Errorf("ES256 proof with ES256 listed after none and HS256: %v", err)
	}
}

// TestParseAcceptsIatZero: iat 0 (1970) is a valid time for Parse; only
// the window of Check refuses it.
func TestParseAcceptsIatZero(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	c := goodClaims()
	c["iat"] = 0
	p, err := Parse(forge(t, key, jose.ES256, map[jose.HeaderKey]any{jose.HeaderType: Type}, true, c), DefaultAlgs)
	if err != nil || p.IssuedAt.Unix() != 0 {
		t.Fatalf("iat 0: %+v, %v", p, err)
	}
}

// TestCheckWindowEdges: iat exactly Window before or after now passes, one
// second further does not (RFC 9449 §4.3 item 11).
func TestCheckWindowEdges(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	c := Checker{Window: time.Minute, Now: func() time.Time { return now }}
	req := Request{Method: "POST", URI: tokenURL}
	for _, tc := range []struct {
		offset time.Duration
		ok     bool
	}{
		{-time.Minute, true},
		{time.Minute, true},
		{-time.Minute - time.Second, false},
		{time.Minute + time.Second, false},
	} {
		s := newSigner(t)
		s.SetClock(func() time.Time { return now.Add(tc.offset) })
		p, err := s.Proof("POST", tokenURL, "", "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Check(context.Background(), p, req)
		if tc.ok && err != nil {
			t.Errorf("iat now%+v: %v", tc.offset, err)
		}
		if !tc.ok && (!errors.Is(err, ErrInvalidProof) || !strings.Contains(err.Error(), "acceptance window")) {
			t.Errorf("iat now%+v: %v; want outside the acceptance window", tc.offset, err)
		}
	}
}
