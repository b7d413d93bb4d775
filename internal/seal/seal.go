// Package seal encrypts small values at rest (private signing keys, token
// payloads that may hold personal data) with AES-256-GCM under a key from
// configuration. A sealed value is version byte || nonce || ciphertext.
//
// Associated data binds a sealed value to its place (for example the token
// signature or the key id), so a value copied into another row does not open.
//
// Standards: AES-GCM (NIST SP 800-38D, as used by RFC 5116 AEAD_AES_256_GCM);
// the key is derived from the configured secret with HKDF-SHA256 (RFC 5869)
// and a purpose string.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
)

const version = 1

// ErrOpen is returned for a value that was not sealed by this key and
// associated data, or was altered.
var ErrOpen = errors.New("seal: cannot open value")

// Sealer seals and opens values. It is safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD
}

// New derives the AES key from secret (at least 32 bytes of high-entropy key
// material) and purpose with HKDF-SHA256, so one configured secret can serve
// several independent uses.
func New(secret []byte, purpose string) (*Sealer, error) {
	if len(secret) < 32 {
		return nil, errors.New("seal: secret must be at least 32 bytes")
	}
	key, err := hkdf.Key(sha256.New, secret, nil, "mcpauth seal "+purpose, 32)
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
	return &Sealer{aead: aead}, nil
}

// Seal encrypts plaintext bound to ad.
func (s *Sealer) Seal(plaintext, ad []byte) []byte {
	ns := s.aead.NonceSize()
	out := make([]byte, 1+ns, 1+ns+len(plaintext)+s.aead.Overhead())
	out[0] = version
	if _, err := rand.Read(out[1 : 1+ns]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return s.aead.Seal(out, out[1:1+ns], plaintext, ad)
}

// Open decrypts a value made by Seal with the same ad.
func (s *Sealer) Open(sealed, ad []byte) ([]byte, error) {
	ns := s.aead.NonceSize()
	if len(sealed) < 1+ns+s.aead.Overhead() || sealed[0] != version {
		return nil, ErrOpen
	}
	pt, err := s.aead.Open(nil, sealed[1:1+ns], sealed[1+ns:], ad)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}
