package rsmiddleware

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"math/big"
	"strings"
	"sync"
)

// An authorization server signs every access token of one key under the
// same protected header (RFC 7515 §4: alg, kid, typ), so a resource server
// sees the same encoded header segment on every token until the key
// changes. headerCache remembers header segments go-jose has parsed and
// accepted, in a token whose signature then verified, with what the
// verifier reads from them; a token under a remembered ES256 header skips
// the JOSE parse (a reflective JSON decode of the header into a map, the
// payload copied and re-encoded for the signing input) and goes to the one
// signature check: the RFC 7515 §5.2 signing input is the token's own
// first two segments, hashed in place (RFC 7518 §3.4).
//
// What a token must satisfy is unchanged: the header bytes are exactly
// those of a header accepted before, every other header takes the full
// parse, and the payload and signature segments are decoded strictly (no
// padding, no stray bits), a subset of what the JOSE parser accepts.
type headerCache struct {
	mu sync.RWMutex
	m  map[string]cachedHeader
}

// headerCacheLimit bounds the remembered headers; a full cache is emptied.
const headerCacheLimit = 16

// cachedHeader is what the verifier reads from a remembered header (its
// typ was checked when it was first accepted).
type cachedHeader struct {
	kid, alg string
}

func (c *headerCache) get(seg string) (cachedHeader, bool) {
	c.mu.RLock()
	h, ok := c.m[seg]
	c.mu.RUnlock()
	return h, ok
}

func (c *headerCache) put(seg string, h cachedHeader) {
	if h.alg != "ES256" || len(seg) > 512 {
		return
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= headerCacheLimit {
		c.m = make(map[string]cachedHeader, 4)
	}
	c.m[strings.Clone(seg)] = h
	c.mu.Unlock()
}

var strictB64 = base64.RawURLEncoding.Strict()

// splitCompact returns the three segments of a compact JWS, ok false for
// any other shape.
func splitCompact(token string) (header, payload, sig string, ok bool) {
	header, rest, ok1 := strings.Cut(token, ".")
	payload, sig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.IndexByte(sig, '.') >= 0 {
		return "", "", "", false
	}
	return header, payload, sig, true
}

// verifyES256Compact checks the ES256 signature of a compact JWS against
// pub and returns the decoded payload; ok is false when the token does not
// verify (malformed segments included).
func verifyES256Compact(token, payloadSeg, sigSeg string, pub *ecdsa.PublicKey) ([]byte, bool) {
	if pub == nil || pub.Curve != elliptic.P256() {
		return nil, false
	}
	var sig [64]byte
	if strictB64.DecodedLen(len(sigSeg)) != len(sig) {
		return nil, false
	}
	if n, err := strictB64.Decode(sig[:], []byte(sigSeg)); err != nil || n != len(sig) {
		return nil, false
	}
	digest := sha256.Sum256([]byte(token[:len(token)-len(sigSeg)-1]))
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	if !ecdsa.Verify(pub, digest[:], r, s) {
		return nil, false
	}
	payload, err := strictB64.DecodeString(payloadSeg)
	if err != nil {
		return nil, false
	}
	return payload, true
}
