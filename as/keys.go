package as

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"

	"github.com/mcpauth/mcpauth/internal/seal"
	"github.com/mcpauth/mcpauth/storage"
)

// sealPurposeKeys is the seal purpose of private signing keys.
const sealPurposeKeys = "signing keys"

// RotateKey adds a new signing key of alg (ES256, RS256 or EdDSA; "" means
// ES256) to store, sealed under a key derived from secret (the server's
// Config.Secret), and retires every other key. Retired public keys stay in
// the JWKS until the tokens they signed have expired; running servers pick
// the new key up at their next reload and delete retired keys after that.
// It backs `authserver keys rotate`.
func RotateKey(ctx context.Context, store storage.KeyStore, secret []byte, alg string) (kid string, err error) {
	if alg == "" {
		alg = "ES256"
	}
	sealer, err := seal.New(secret, sealPurposeKeys)
	if err != nil {
		return "", err
	}
	if err := checkSecretOpensKeys(ctx, store, sealer); err != nil {
		return "", err
	}
	return addKey(ctx, store, sealer, alg, time.Now())
}

// addKey creates a signing key of alg, stores it sealed, and retires every
// other key as of now.
func addKey(ctx context.Context, store storage.KeyStore, sealer *seal.Sealer, alg string, now time.Time) (kid string, err error) {
	k, err := newSigningKey(alg)
	if err != nil {
		return "", err
	}
	rec, err := k.record(sealer, now)
	if err != nil {
		return "", err
	}
	if err := store.CreateKey(ctx, rec); err != nil {
		return "", fmt.Errorf("as: storing signing key: %w", err)
	}
	if err := store.RetireKeys(ctx, k.kid, now); err != nil {
		return "", fmt.Errorf("as: retiring other signing keys: %w", err)
	}
	return k.kid, nil
}

// signingKey is one loaded key.
type signingKey struct {
	kid       string
	alg       string
	priv      crypto.Signer
	pub       jose.JSONWebKey
	createdAt time.Time
	retiredAt time.Time
	signer    jose.Signer
	// header is base64url of the protected header every access token
	// signed with this key carries ({"alg":…,"kid":…,"typ":"at+jwt"}),
	// encoded once instead of for every token.
	header string
}

func newSigningKey(alg string) (*signingKey, error) {
	var priv crypto.Signer
	var err error
	switch alg {
	case "ES256":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "RS256":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case "EdDSA":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, fmt.Errorf("as: unsupported signing algorithm %q", alg)
	}
	if err != nil {
		return nil, err
	}
	pub := jose.JSONWebKey{Key: priv.Public(), Algorithm: alg, Use: "sig"}
	tp, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, err
	}
	pub.KeyID = base64.RawURLEncoding.EncodeToString(tp)
	return finishKey(pub.KeyID, alg, priv, pub)
}

func finishKey(kid, alg string, priv crypto.Signer, pub jose.JSONWebKey) (*signingKey, error) {
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: jose.JSONWebKey{Key: priv, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("at+jwt"),
	)
	if err != nil {
		return nil, err
	}
	h := map[string]string{"alg": alg, "kid": kid, "typ": "at+jwt"}
	if kid == "" {
		delete(h, "kid") // go-jose leaves out an empty kid too
	}
	hdr, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	return &signingKey{kid: kid, alg: alg, priv: priv, pub: pub, signer: signer, header: base64.RawURLEncoding.EncodeToString(hdr)}, nil
}

// signCompact returns the JWS compact serialization (RFC 7515 §7.1) of
// payload under the key's precomputed protected header, and
// base64url(SHA-256(signing input)) (see signingInputHash). It is what
// signer.Sign followed by CompactSerialize produces, without building and
// encoding the header for every token, and, for ES256 and RS256, without
// hashing the signing input twice.
func (k *signingKey) signCompact(payload []byte) (token, inputHash string, err error) {
	enc := base64.RawURLEncoding
	n := len(k.header) + 1 + enc.EncodedLen(len(payload))
	// The signing input is built in a buffer on the stack when it fits:
	// only the token itself is allocated.
	var stack [1024]byte
	buf := stack[:0]
	if n > len(stack) {
		buf = make([]byte, 0, n)
	}
	buf = append(buf, k.header...)
	buf = append(buf, '.')
	buf = buf[:n]
	enc.Encode(buf[len(k.header)+1:], payload)
	digest := sha256.Sum256(buf)
	var sigStack [132]byte // an ES256, ES384 or ES512 signature
	var sig []byte
	switch key := k.priv.(type) {
	case *ecdsa.PrivateKey:
		// RFC 7518 §3.4: R and S as fixed-size big-endian octets.
		der, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
		if err != nil {
			return "", "", err
		}
		size := (key.Curve.Params().BitSize + 7) / 8
		if sig, err = rawECDSA(sigStack[:2*size], der); err != nil {
			return "", "", err
		}
	case *rsa.PrivateKey:
		// RFC 7518 §3.3: RSASSA-PKCS1-v1_5 with SHA-256.
		if sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:]); err != nil {
			return "", "", err
		}
	case ed25519.PrivateKey:
		// RFC 8037 §3.1: Ed25519 over the signing input itself.
		sig = ed25519.Sign(key, buf)
	default:
		return "", "", fmt.Errorf("as: cannot sign with a %T", k.priv)
	}
	var tok strings.Builder
	tok.Grow(n + 1 + enc.EncodedLen(len(sig)))
	tok.Write(buf)
	tok.WriteByte('.')
	var encStack [176]byte
	esig := encStack[:0]
	if m := enc.EncodedLen(len(sig)); m > len(encStack) {
		esig = make([]byte, 0, m)
	}
	tok.Write(enc.AppendEncode(esig, sig))
	return tok.String(), enc.EncodeToString(digest[:]), nil
}

// rawECDSA writes the ASN.1 signature der (SEQUENCE of the INTEGERs R and
// S, as ecdsa.SignASN1 returns it) into sig as R and S, each right-aligned
// in half of sig (RFC 7518 §3.4).
func rawECDSA(sig, der []byte) ([]byte, error) {
	var inner cryptobyte.String
	var r, s []byte
	in := cryptobyte.String(der)
	size := len(sig) / 2
	if !in.ReadASN1(&inner, asn1.SEQUENCE) || !in.Empty() || !inner.ReadASN1Integer(&r) || !inner.ReadASN1Integer(&s) ||
		!inner.Empty() || len(r) > size || len(s) > size {
		return nil, errors.New("as: invalid ASN.1 from ecdsa.SignASN1")
	}
	clear(sig)
	copy(sig[size-len(r):size], r)
	copy(sig[2*size-len(s):], s)
	return sig, nil
}

func (k *signingKey) record(sealer *seal.Sealer, now time.Time) (*storage.SigningKey, error) {
	pubJSON, err := k.pub.MarshalJSON()
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k.priv)
	if err != nil {
		return nil, err
	}
	return &storage.SigningKey{
		ID:            k.kid,
		Algorithm:     k.alg,
		PublicJWK:     pubJSON,
		PrivateSealed: sealer.Seal(der, []byte(k.kid)),
		CreatedAt:     now,
	}, nil
}

func loadKey(sealer *seal.Sealer, rec storage.SigningKey) (*signingKey, error) {
	der, err := sealer.Open(rec.PrivateSealed, []byte(rec.ID))
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", rec.ID, err)
	}
	p, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", rec.ID, err)
	}
	priv, ok := p.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key %s: not a signing key", rec.ID)
	}
	var pub jose.JSONWebKey
	if err := pub.UnmarshalJSON(rec.PublicJWK); err != nil {
		return nil, fmt.Errorf("key %s: public JWK: %w", rec.ID, err)
	}
	pub.KeyID, pub.Algorithm, pub.Use = rec.ID, rec.Algorithm, "sig"
	k, err := finishKey(rec.ID, rec.Algorithm, priv, pub)
	if err != nil {
		return nil, err
	}
	k.createdAt, k.retiredAt = rec.CreatedAt, rec.RetiredAt
	return k, nil
}

// keyring holds the signing keys, reloaded from storage so that a key
// rotated by another process or instance is used and served by all.
type keyring struct {
	store     storage.KeyStore
	sealer    *seal.Sealer
	alg       string
	retention time.Duration // how long a retired key stays published
	now       func() time.Time
	log       logger

	mu         sync.RWMutex
	unloadable []string        // kids of stored keys the secret does not unseal, from the last reload
	reported   map[string]bool // unloadable kids already logged (guarded by reloadMu)
	keys       map[string]*signingKey
	current    *signingKey
	jwks       []byte
	lastReload time.Time
	reloadMu   sync.Mutex
}

// ensure loads the keys and creates one of the configured algorithm when
// none signs yet (first start, or a changed SigningAlg).
func (k *keyring) ensure(ctx context.Context) error {
	if err := k.reload(ctx); err != nil {
		return err
	}
	k.mu.RLock()
	cur, loaded, bad := k.current, len(k.keys), slices.Clone(k.unloadable)
	k.mu.RUnlock()
	if loaded == 0 && len(bad) > 0 {
		// Every stored key was sealed under another secret: this instance
		// has the wrong one. Writing a key now would publish it next to the
		// others and make the healthy instances fail to load it.
		return unsealableError(bad)
	}
	if cur != nil && cur.alg == k.alg {
		return nil
	}
	if _, err := addKey(ctx, k.store, k.sealer, k.alg, k.now()); err != nil {
		return err
	}
	return k.reload(ctx)
}

// reload reads every key, deletes keys retired longer than retention ago,
// and picks the newest unretired key to sign.
func (k *keyring) reload(ctx context.Context) error {
	k.reloadMu.Lock()
	defer k.reloadMu.Unlock()
	recs, err := k.store.ListKeys(ctx)
	if err != nil {
		return err
	}
	now := k.now()
	// The newest key is never deleted, even when retired: two instances
	// starting together may retire each other's first key, and deleting both
	// would leave nothing to sign with.
	newest := ""
	var newestAt time.Time
	for _, rec := range recs {
		if newest == "" || newerKey(rec.CreatedAt, rec.ID, newestAt, newest) {
			newest, newestAt = rec.ID, rec.CreatedAt
		}
	}
	keys := map[string]*signingKey{}
	var current *signingKey
	var unloadable []string
	for _, rec := range recs {
		if rec.ID != newest && !rec.RetiredAt.IsZero() && now.Sub(rec.RetiredAt) > k.retention {
			if err := k.store.DeleteKey(ctx, rec.ID); err != nil && !errors.Is(err, storage.ErrNotFound) {
				k.log.error(ctx, "deleting retired signing key", "kid", rec.ID, "err", err)
			}
			continue
		}
		sk, err := loadKey(k.sealer, rec)
		if err != nil {
			// Logged once per key, not at every reload: a key written by
			// an instance with another secret stays until it is pruned.
			if !k.reported[rec.ID] {
				if k.reported == nil {
					k.reported = map[string]bool{}
				}
				k.reported[rec.ID] = true
				k.log.error(ctx, "signing key does not load (sealed under another secret); it is not used. Remove keys no instance can load with `authserver keys prune --unloadable`",
					"kid", rec.ID, "err", err)
			}
			unloadable = append(unloadable, rec.ID)
			continue
		}
		keys[sk.kid] = sk
		if rec.RetiredAt.IsZero() && (current == nil || newerKey(sk.createdAt, sk.kid, current.createdAt, current.kid)) {
			current = sk
		}
	}
	if current == nil {
		// Every key is retired: two instances created and retired each
		// other's first key at the same moment. Sign with the newest rather
		// than not at all; the next rotation settles it.
		for _, sk := range keys {
			if current == nil || newerKey(sk.createdAt, sk.kid, current.createdAt, current.kid) {
				current = sk
			}
		}
	}
	set := jose.JSONWebKeySet{}
	ids := make([]string, 0, len(keys))
	for id := range keys {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return keys[b].createdAt.Compare(keys[a].createdAt) })
	for _, id := range ids {
		set.Keys = append(set.Keys, keys[id].pub)
	}
	doc, err := json.Marshal(set)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.keys, k.current, k.jwks, k.lastReload, k.unloadable = keys, current, doc, now, unloadable
	k.mu.Unlock()
	return nil
}

// newerKey orders keys by creation time, then by kid, so every instance
// picks the same signing key from the same set.
func newerKey(at time.Time, id string, thanAt time.Time, thanID string) bool {
	if !at.Equal(thanAt) {
		return at.After(thanAt)
	}
	return id > thanID
}

// run reloads every interval until ctx ends.
func (k *keyring) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := k.reload(ctx); err != nil && ctx.Err() == nil {
				k.log.error(ctx, "reloading signing keys", "err", err)
			}
		}
	}
}

func (k *keyring) signingKey() (*signingKey, error) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.current == nil {
		return nil, errors.New("as: no signing key")
	}
	return k.current, nil
}

// lookup finds a key by kid, reloading once (at most every second) when it is
// unknown: another instance may have rotated.
func (k *keyring) lookup(ctx context.Context, kid string) *signingKey {
	k.mu.RLock()
	sk, last := k.keys[kid], k.lastReload
	k.mu.RUnlock()
	if sk != nil || k.now().Sub(last) < time.Second {
		return sk
	}
	if err := k.reload(ctx); err != nil {
		return nil
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.keys[kid]
}

func (k *keyring) jwksDoc() []byte {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.jwks
}

func (k *keyring) algs() []jose.SignatureAlgorithm {
	return []jose.SignatureAlgorithm{jose.ES256, jose.RS256, jose.EdDSA}
}
