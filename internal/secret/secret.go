// Package secret generates high-entropy secrets (client secrets, registration
// access tokens) and hashes them for storage with a keyed SHA-256 (HMAC).
//
// A slow password hash buys nothing for a 256-bit random value and costs about
// 190 ms a check at bcrypt cost 12; HMAC-SHA256 under a server key makes a
// stolen database useless for guessing while costing microseconds. People's
// passwords get a slow hash elsewhere (as/loginui).
//
// Standards: HMAC-SHA256 (RFC 2104, RFC 4868) under a key derived with
// HKDF-SHA256 (RFC 5869); the values are RFC 7591 §3.2.1 client secrets and
// RFC 7592 §3 registration access tokens.
package secret

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"hash"
	"sync"
)

// Hasher hashes and checks generated secrets. Safe for concurrent use.
type Hasher struct {
	key []byte
	// macs holds HMAC states keyed with key; Reset returns one to the
	// keyed state without hashing the padded key again.
	macs sync.Pool
}

// NewHasher derives the HMAC key from secret (at least 32 bytes) and purpose.
func NewHasher(secret []byte, purpose string) (*Hasher, error) {
	if len(secret) < 32 {
		return nil, errors.New("secret: key must be at least 32 bytes")
	}
	key, err := hkdf.Key(sha256.New, secret, nil, "mcpauth secret "+purpose, 32)
	if err != nil {
		return nil, err
	}
	return &Hasher{key: key}, nil
}

// Hash returns HMAC-SHA256(key, value).
func (h *Hasher) Hash(value string) []byte {
	return h.sum(nil, value)
}

// Equal reports in constant time whether value hashes to hash.
func (h *Hasher) Equal(hash []byte, value string) bool {
	var buf [sha256.Size]byte
	return len(hash) > 0 && hmac.Equal(hash, h.sum(buf[:0], value))
}

// sum appends HMAC-SHA256(key, value) to b.
func (h *Hasher) sum(b []byte, value string) []byte {
	m, ok := h.macs.Get().(hash.Hash)
	if ok {
		m.Reset()
	} else {
		m = hmac.New(sha256.New, h.key)
	}
	m.Write([]byte(value))
	b = m.Sum(b)
	h.macs.Put(m)
	return b
}

// Generate returns a new random secret of 32 bytes (256 bits), base64url
// encoded without padding.
func Generate() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
