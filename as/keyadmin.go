package as

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/internal/seal"
	"github.com/mcpauth/mcpauth/storage"
)

// ErrUnsealableKeys means signing keys are stored but the secret given opens
// none of them: the process was started with another secret than the one
// that sealed them. New (and so serve) refuses to start, and RotateKey to
// rotate, rather than write a key the other instances cannot load.
var ErrUnsealableKeys = errors.New("as: no stored signing key can be unsealed with this secret (wrong secret?)")

func unsealableError(kids []string) error {
	return fmt.Errorf("%w: %d stored key(s) (%s) were sealed under another secret; no key was written. "+
		"Start with the secret the other instances use, or, run with that secret, `authserver keys prune --unloadable` removes keys no instance can load",
		ErrUnsealableKeys, len(kids), strings.Join(kids, ", "))
}

// checkSecretOpensKeys returns an ErrUnsealableKeys error when keys are
// stored and sealer opens none of them.
func checkSecretOpensKeys(ctx context.Context, store storage.KeyStore, sealer *seal.Sealer) error {
	recs, err := store.ListKeys(ctx)
	if err != nil {
		return err
	}
	var bad []string
	for _, rec := range recs {
		if _, err := loadKey(sealer, rec); err != nil {
			bad = append(bad, rec.ID)
			continue
		}
		return nil
	}
	if len(bad) > 0 {
		return unsealableError(bad)
	}
	return nil
}

// KeyInfo describes one stored signing key (RFC 7517 kid and alg) for the
// operator; it never holds key material.
type KeyInfo struct {
	ID        string    `json:"kid"`
	Algorithm string    `json:"alg"`
	CreatedAt time.Time `json:"created_at"`
	// RetiredAt is when a newer key took over; nil while the key may sign.
	RetiredAt *time.Time `json:"retired_at,omitempty"`
	// Signing marks the key new tokens are signed with.
	Signing bool `json:"signing"`
	// Loadable reports whether the secret given to ListKeys unseals the
	// private key. A key no instance can load only fills the JWKS.
	Loadable bool `json:"loadable"`
}

// ListKeys describes every stored signing key, newest first, and which of
// them secret unseals. The signing key is the one every server picks: the
// newest loadable key that is not retired.
func ListKeys(ctx context.Context, store storage.KeyStore, secret []byte) ([]KeyInfo, error) {
	sealer, err := seal.New(secret, sealPurposeKeys)
	if err != nil {
		return nil, err
	}
	recs, err := store.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]KeyInfo, 0, len(recs))
	signing := -1
	for _, rec := range recs {
		ki := KeyInfo{ID: rec.ID, Algorithm: rec.Algorithm, CreatedAt: rec.CreatedAt}
		if !rec.RetiredAt.IsZero() {
			t := rec.RetiredAt
			ki.RetiredAt = &t
		}
		_, lerr := loadKey(sealer, rec)
		ki.Loadable = lerr == nil
		if ki.Loadable && ki.RetiredAt == nil && (signing < 0 || newerKey(rec.CreatedAt, rec.ID, out[signing].CreatedAt, out[signing].ID)) {
			signing = len(out)
		}
		out = append(out, ki)
	}
	if signing >= 0 {
		out[signing].Signing = true
	}
	return out, nil
}

// RetireKey retires the signing key kid: it stops signing, and stays in the
// JWKS until the tokens it signed have expired (servers delete it after
// that, as does PruneKeys). When kid is the key that signs, a new key of alg
// takes over first, as RotateKey does; otherwise every key but the signing
// one is retired. Retiring a retired key changes nothing. It returns the kid
// of the key that signs afterwards. storage.ErrNotFound for an unknown kid.
func RetireKey(ctx context.Context, store storage.KeyStore, secret []byte, kid, alg string) (signing string, err error) {
	keys, err := ListKeys(ctx, store, secret)
	if err != nil {
		return "", err
	}
	var target, cur *KeyInfo
	loadable := false
	for i := range keys {
		if keys[i].ID == kid {
			target = &keys[i]
		}
		if keys[i].Signing {
			cur = &keys[i]
		}
		loadable = loadable || keys[i].Loadable
	}
	if target == nil {
		return "", fmt.Errorf("signing key %q: %w", kid, storage.ErrNotFound)
	}
	if len(keys) > 0 && !loadable {
		ids := make([]string, 0, len(keys))
		for _, k := range keys {
			ids = append(ids, k.ID)
		}
		return "", unsealableError(ids)
	}
	if target.RetiredAt != nil && cur != nil {
		return cur.ID, nil
	}
	if cur == nil || cur.ID == kid {
		return RotateKey(ctx, store, secret, alg)
	}
	if err := store.RetireKeys(ctx, cur.ID, time.Now()); err != nil {
		return "", err
	}
	return cur.ID, nil
}

// PruneKeys deletes keys retired longer than retention ago (their tokens
// have expired; running servers do the same at each key reload), never the
// newest key. With unloadable it also deletes every key secret does not
// unseal: keys written by an instance started with a wrong secret, which no
// correctly configured instance can sign with. It refuses (ErrUnsealableKeys)
// when secret unseals no key at all, since then it is the secret that is
// wrong. It returns the kids it deleted.
func PruneKeys(ctx context.Context, store storage.KeyStore, secret []byte, retention time.Duration, unloadable bool) ([]string, error) {
	keys, err := ListKeys(ctx, store, secret)
	if err != nil {
		return nil, err
	}
	if unloadable && len(keys) > 0 {
		ok := false
		ids := make([]string, 0, len(keys))
		for _, k := range keys {
			ok = ok || k.Loadable
			ids = append(ids, k.ID)
		}
		if !ok {
			return nil, unsealableError(ids)
		}
	}
	newest := ""
	var newestAt time.Time
	for _, k := range keys {
		if k.Loadable && (newest == "" || newerKey(k.CreatedAt, k.ID, newestAt, newest)) {
			newest, newestAt = k.ID, k.CreatedAt
		}
	}
	now := time.Now()
	deleted := []string{}
	for _, k := range keys {
		drop := unloadable && !k.Loadable
		if k.ID != newest && k.RetiredAt != nil && now.Sub(*k.RetiredAt) > retention {
			drop = true
		}
		if !drop {
			continue
		}
		if err := store.DeleteKey(ctx, k.ID); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return deleted, err
		}
		deleted = append(deleted, k.ID)
	}
	return deleted, nil
}

// KeyRetention is how long a retired key stays published for a server with
// these settings (zero values as in Config): the access-token lifetime plus
// two key reloads and a minute, so every token it signed has expired.
func KeyRetention(accessTokenTTL, keyReloadInterval time.Duration) time.Duration {
	if accessTokenTTL == 0 {
		accessTokenTTL = DefaultAccessTokenTTL
	}
	if keyReloadInterval <= 0 {
		keyReloadInterval = 15 * time.Second
	}
	return accessTokenTTL + 2*keyReloadInterval + time.Minute
}

// ErrStorageNotReady is the error Ready returns (wrapped with the storage's
// own cause) when the storage does not answer.
var ErrStorageNotReady = errors.New("storage")

// ErrNoSigningKey is the error Ready returns when no signing key is loaded.
var ErrNoSigningKey = errors.New("no signing key loaded")

// Ready reports why the server cannot serve tokens: storage unreachable
// (errors.Is ErrStorageNotReady, wrapping the storage's error), or no
// signing key loaded (ErrNoSigningKey: every stored key sealed under another
// secret). Nil means ready.
func (s *Server) Ready(ctx context.Context) error {
	if err := s.cfg.Store.Ping(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrStorageNotReady, err)
	}
	if _, err := s.keys.signingKey(); err != nil {
		return ErrNoSigningKey
	}
	return nil
}

func newKeySealer(secret []byte) (*seal.Sealer, error) { return seal.New(secret, sealPurposeKeys) }
