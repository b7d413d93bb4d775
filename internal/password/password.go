// Package password hashes and checks the passwords of people (local users of
// the login page).
//
// New hashes are argon2id (RFC 9106) in the PHC string format
//
//	$argon2id$v=19$m=65536,t=1,p=2$<salt>$<hash>
//
// with salt and hash in unpadded standard base64. Check also accepts bcrypt
// hashes ($2a$, $2b$, $2y$) so existing user databases can be imported.
//
// Generated client secrets are not passwords: they are long random values and
// are hashed with a fast keyed hash (internal/secret), not with this package.
package password

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"
)

// Parameters of new hashes. RFC 9106 §4 recommends argon2id; 64 MiB with one
// pass and two lanes stays well under 100 ms on a small server while costing
// an attacker 64 MiB per guess.
const (
	memoryKiB   = 64 * 1024
	iterations  = 1
	parallelism = 2
	saltLen     = 16
	keyLen      = 32
)

// Limits on parameters read from a stored hash, so that a hostile or mistyped
// hash cannot make Check allocate gigabytes or spin for minutes.
const (
	maxMemoryKiB = 1 << 20 // 1 GiB
	maxTime      = 16
	minSaltLen   = 8
	maxSaltLen   = 64
	minKeyLen    = 16
	maxKeyLen    = 128
	maxHashLen   = 512
)

// ErrMalformed is returned (wrapped) by Check for a hash string it cannot parse
// or whose parameters are out of range.
var ErrMalformed = errors.New("password: malformed hash")

// Hash returns the argon2id PHC string of pw with a fresh random salt.
func Hash(pw string) (string, error) {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("password: reading random salt: %w", err)
	}
	key := argon2.IDKey([]byte(pw), salt, iterations, memoryKiB, parallelism, keyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, memoryKiB, iterations, parallelism,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// Check reports whether pw matches hash, an argon2id PHC string or a bcrypt
// hash. A wrong password is (false, nil); a hash that cannot be parsed is
// (false, error wrapping ErrMalformed). The final comparison is constant-time.
func Check(hash, pw string) (bool, error) {
	if len(hash) > maxHashLen {
		return false, fmt.Errorf("%w: too long", ErrMalformed)
	}
	switch {
	case strings.HasPrefix(hash, "$argon2id$"):
		return checkArgon2id(hash, pw)
	case strings.HasPrefix(hash, "$2a$"), strings.HasPrefix(hash, "$2b$"), strings.HasPrefix(hash, "$2y$"):
		return checkBcrypt(hash, pw)
	default:
		return false, fmt.Errorf("%w: unknown scheme (want $argon2id$ or bcrypt $2a$/$2b$/$2y$)", ErrMalformed)
	}
}

// Validate reports whether hash is a hash Check can use (an argon2id PHC
// string with parameters in range, or a bcrypt hash) without computing it, so
// configuration can be checked at start-up cheaply. The error wraps
// ErrMalformed.
func Validate(hash string) error {
	if len(hash) > maxHashLen {
		return fmt.Errorf("%w: too long", ErrMalformed)
	}
	switch {
	case strings.HasPrefix(hash, "$argon2id$"):
		_, err := parseArgon2id(hash)
		return err
	case strings.HasPrefix(hash, "$2a$"), strings.HasPrefix(hash, "$2b$"), strings.HasPrefix(hash, "$2y$"):
		return validBcrypt(hash)
	default:
		return fmt.Errorf("%w: unknown scheme (want $argon2id$ or bcrypt $2a$/$2b$/$2y$)", ErrMalformed)
	}
}

// NeedsRehash reports whether hash was made with other parameters or another
// scheme than Hash uses today, so a caller may store a fresh hash after a
// successful login.
func NeedsRehash(hash string) bool {
	p, err := parseArgon2id(hash)
	if err != nil {
		return true
	}
	return p.memory != memoryKiB || p.time != iterations || p.threads != parallelism || len(p.key) != keyLen
}

// MinBcryptCost is the lowest bcrypt cost the security checklist accepts
// (OWASP Password Storage Cheat Sheet: bcrypt with a work factor of 10 or
// more).
const MinBcryptCost = 10

// Weak reports whether a well-formed hash is cheaper to attack than the
// checklist allows: bcrypt below MinBcryptCost, or argon2id below the
// OWASP minimum (19 MiB of memory, or one pass with less than 46 MiB).
// Check still accepts such hashes; callers warn.
func Weak(hash string) bool {
	if p, err := parseArgon2id(hash); err == nil {
		return p.memory < 19*1024 || p.time < 2 && p.memory < 46*1024
	}
	if validBcrypt(hash) == nil {
		cost, _ := strconv.Atoi(hash[4:6])
		return cost < MinBcryptCost
	}
	return false
}

type argon2Params struct {
	memory  uint32
	time    uint32
	threads uint8
	salt    []byte
	key     []byte
}

// parseArgon2id parses $argon2id$v=19$m=M,t=T,p=P$salt$hash.
func parseArgon2id(hash string) (*argon2Params, error) {
	parts := strings.Split(hash, "$")
	// "", "argon2id", "v=19", "m=..,t=..,p=..", salt, hash
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return nil, fmt.Errorf("%w: want $argon2id$v=19$m=,t=,p=$salt$hash", ErrMalformed)
	}
	if parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return nil, fmt.Errorf("%w: unsupported argon2 version %q", ErrMalformed, parts[2])
	}
	var p argon2Params
	fields := strings.Split(parts[3], ",")
	if len(fields) != 3 {
		return nil, fmt.Errorf("%w: want m=,t=,p= parameters", ErrMalformed)
	}
	for i, name := range []string{"m", "t", "p"} {
		v, ok := strings.CutPrefix(fields[i], name+"=")
		if !ok {
			return nil, fmt.Errorf("%w: parameter %d is not %s=", ErrMalformed, i+1, name)
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%w: bad %s", ErrMalformed, name)
		}
		switch name {
		case "m":
			p.memory = uint32(n)
		case "t":
			p.time = uint32(n)
		case "p":
			if n > 255 {
				return nil, fmt.Errorf("%w: p out of range", ErrMalformed)
			}
			p.threads = uint8(n)
		}
	}
	if p.memory > maxMemoryKiB || p.memory < 8*uint32(p.threads) || p.time > maxTime {
		return nil, fmt.Errorf("%w: parameters out of range", ErrMalformed)
	}
	var err error
	if p.salt, err = base64.RawStdEncoding.Strict().DecodeString(parts[4]); err != nil || len(p.salt) < minSaltLen || len(p.salt) > maxSaltLen {
		return nil, fmt.Errorf("%w: bad salt", ErrMalformed)
	}
	if p.key, err = base64.RawStdEncoding.Strict().DecodeString(parts[5]); err != nil || len(p.key) < minKeyLen || len(p.key) > maxKeyLen {
		return nil, fmt.Errorf("%w: bad hash", ErrMalformed)
	}
	return &p, nil
}

func checkArgon2id(hash, pw string) (bool, error) {
	p, err := parseArgon2id(hash)
	if err != nil {
		return false, err
	}
	got := argon2.IDKey([]byte(pw), p.salt, p.time, p.memory, p.threads, uint32(len(p.key)))
	return subtle.ConstantTimeCompare(got, p.key) == 1, nil
}

// validBcrypt checks the modular crypt layout $2b$NN$<53 characters>, which
// the bcrypt package itself checks only loosely.
func validBcrypt(hash string) error {
	if len(hash) != 60 || hash[6] != '$' {
		return fmt.Errorf("%w: want $2b$NN$ and 53 characters", ErrMalformed)
	}
	cost, err := strconv.Atoi(hash[4:6])
	if err != nil || cost < bcrypt.MinCost || cost > bcrypt.MaxCost {
		return fmt.Errorf("%w: bad bcrypt cost", ErrMalformed)
	}
	const alphabet = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	for i := 7; i < len(hash); i++ {
		if !strings.ContainsRune(alphabet, rune(hash[i])) {
			return fmt.Errorf("%w: bad bcrypt character", ErrMalformed)
		}
	}
	return nil
}

func checkBcrypt(hash, pw string) (bool, error) {
	if err := validBcrypt(hash); err != nil {
		return false, err
	}
	// CompareHashAndPassword compares in constant time.
	err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(pw))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, bcrypt.ErrMismatchedHashAndPassword):
		return false, nil
	default:
		return false, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
}
