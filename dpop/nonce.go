package dpop

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"time"
)

// Nonces issues and checks stateless server nonces (RFC 9449 §8, §9): each
// is the issue time sealed with AES-256-GCM under a key derived from a
// secret, so any instance holding the secret accepts the nonces of the
// others and nothing is stored. Nonces are unpredictable (a random GCM
// nonce each) and base64url, within the 1*NQCHAR syntax.
type Nonces struct {
	aead cipher.AEAD
	ttl  time.Duration
}

// NewNonces derives the sealing key from secret (at least 32 bytes) with
// HKDF-SHA256; a nonce is accepted for ttl after it was issued (five
// minutes when ttl <= 0).
func NewNonces(secret []byte, ttl time.Duration) (*Nonces, error) {
	if len(secret) < 32 {
		return nil, errors.New("dpop: the nonce secret must be at least 32 bytes")
	}
	key, err := hkdf.Key(sha256.New, secret, nil, "mcpauth dpop nonce", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	if ttl <= 0 {
		ttl = DefaultWindow
	}
	return &Nonces{aead: aead, ttl: ttl}, nil
}

// Issue returns a fresh nonce issued at now.
func (n *Nonces) Issue(now time.Time) string {
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(now.Unix()))
	iv := make([]byte, n.aead.NonceSize(), n.aead.NonceSize()+8+n.aead.Overhead())
	if _, err := rand.Read(iv); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(n.aead.Seal(iv, iv, ts[:], []byte("dpop-nonce")))
}

// Valid reports whether nonce was issued with this secret within the ttl
// before now (and at most a minute after it, for clock differences
// between instances).
func (n *Nonces) Valid(nonce string, now time.Time) bool {
	raw, err := base64.RawURLEncoding.DecodeString(nonce)
	ns := n.aead.NonceSize()
	if err != nil || len(raw) < ns+n.aead.Overhead() {
		return false
	}
	pt, err := n.aead.Open(nil, raw[:ns], raw[ns:], []byte("dpop-nonce"))
	if err != nil || len(pt) != 8 {
		return false
	}
	age := now.Sub(time.Unix(int64(binary.BigEndian.Uint64(pt)), 0))
	return age >= -time.Minute && age <= n.ttl
}
