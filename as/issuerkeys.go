package as

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpauth/mcpauth/internal/safehttp"
)

// federatedAlgs are the JWS algorithms accepted on assertions of trusted
// issuers (enterprise IdPs, workload issuers): asymmetric only, never none
// or HMAC ([EXT-EMA] §7.4.1, RFC 8725 §3.1).
var federatedAlgs = []jose.SignatureAlgorithm{
	jose.ES256, jose.ES384, jose.ES512, jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512, jose.EdDSA,
}

const (
	// issuerKeysTTL is how long a fetched JWK Set is used before it is
	// fetched again.
	issuerKeysTTL = 10 * time.Minute
	// issuerKeysMinRefresh limits fetches triggered by an unknown kid: at
	// most one per issuer in this interval, so assertions naming random
	// kids cannot make the server hammer the issuer.
	issuerKeysMinRefresh = 30 * time.Second
	issuerKeysMaxBody    = 64 << 10
	discoveryMaxBody     = 64 << 10
)

// issuerKeys is the key source of one trusted issuer: a JWK Set given in
// configuration, a jwks_uri, or OpenID Connect Discovery of the issuer
// (OIDC Discovery §4: <issuer>/.well-known/openid-configuration, whose
// issuer must equal the configured one, §4.3). Fetched sets are cached and
// fetched again, at most once per issuerKeysMinRefresh, when they are
// older than issuerKeysTTL or an assertion names a kid the cached set
// lacks. A failed fetch keeps the previous set: keys are never rolled back
// to an older or unverified source.
type issuerKeys struct {
	issuer  string
	static  *jose.JSONWebKeySet
	jwksURI string // configured; empty with static or discovery
	client  *http.Client
	now     func() time.Time

	mu        sync.Mutex
	set       *jose.JSONWebKeySet
	fetchedAt time.Time
	triedAt   time.Time
}

// parseJWKS reads a JWK Set with public keys only.
func parseJWKS(raw []byte) (*jose.JSONWebKeySet, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, fmt.Errorf("not a JWK Set: %v", err)
	}
	if len(set.Keys) == 0 {
		return nil, errors.New("the JWK Set has no keys")
	}
	for _, k := range set.Keys {
		if !k.IsPublic() {
			return nil, errors.New("the JWK Set holds a private or symmetric key")
		}
	}
	return &set, nil
}

// keys returns the keys that may have signed a JWS with kid: the cached
// set, refreshed first when it is stale or lacks kid, at a limited rate.
func (k *issuerKeys) keys(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	if k.static != nil {
		return match(k.static, kid), nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	stale := k.set == nil || now.Sub(k.fetchedAt) >= issuerKeysTTL
	if !stale && len(match(k.set, kid)) > 0 {
		return match(k.set, kid), nil
	}
	// A fetch is due (the set is stale or lacks kid), but at most one per
	// issuerKeysMinRefresh: neither assertions naming random kids nor an
	// issuer that stopped answering (its last set is kept meanwhile) make
	// every request wait for a fetch.
	if k.triedAt.IsZero() || now.Sub(k.triedAt) >= issuerKeysMinRefresh {
		k.triedAt = now
		set, err := k.fetch(ctx)
		switch {
		case err == nil:
			k.set, k.fetchedAt = set, now
		case k.set == nil:
			return nil, err
		}
	}
	if k.set == nil {
		return nil, errors.New("no keys")
	}
	return match(k.set, kid), nil
}

func match(set *jose.JSONWebKeySet, kid string) []jose.JSONWebKey {
	if kid != "" {
		return set.Key(kid)
	}
	return set.Keys
}

// fetch reads the JWK Set from jwks_uri, first finding it by discovery
// when none is configured. Every fetch goes through the SSRF-safe client,
// with its timeouts and a size cap.
func (k *issuerKeys) fetch(ctx context.Context) (*jose.JSONWebKeySet, error) {
	if k.client == nil {
		return nil, errors.New("this server fetches no keys (no HTTP client)")
	}
	uri := k.jwksURI
	if uri == "" {
		body, _, err := safehttp.Fetch(ctx, k.client, strings.TrimSuffix(k.issuer, "/")+"/.well-known/openid-configuration", "application/json", discoveryMaxBody)
		if err != nil {
			return nil, fmt.Errorf("discovery: %w", err)
		}
		var doc struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			return nil, fmt.Errorf("discovery: %v", err)
		}
		if doc.Issuer != k.issuer || doc.JWKSURI == "" {
			return nil, errors.New("discovery: the document names another issuer or no jwks_uri")
		}
		uri = doc.JWKSURI
	}
	body, _, err := safehttp.Fetch(ctx, k.client, uri, "application/json, application/jwk-set+json", issuerKeysMaxBody)
	if err != nil {
		return nil, fmt.Errorf("jwks_uri: %w", err)
	}
	return parseJWKS(body)
}

// verifyJWS checks a compact JWS against the issuer's keys with an
// allowed algorithm and returns its payload and protected header.
func (k *issuerKeys) verifyJWS(ctx context.Context, raw string) ([]byte, jose.Header, error) {
	jws, err := jose.ParseSigned(raw, federatedAlgs)
	if err != nil || len(jws.Signatures) != 1 {
		return nil, jose.Header{}, errors.New("not a JWS with one signature and an allowed algorithm")
	}
	h := jws.Signatures[0].Protected
	if h.JSONWebKey != nil || h.ExtraHeaders["jku"] != nil || h.ExtraHeaders["x5u"] != nil {
		return nil, jose.Header{}, errors.New("key references in the header are not honoured")
	}
	keys, err := k.keys(ctx, h.KeyID)
	if err != nil {
		return nil, jose.Header{}, err
	}
	for _, key := range keys {
		if key.Algorithm != "" && key.Algorithm != h.Algorithm {
			continue
		}
		if key.Use != "" && key.Use != "sig" {
			continue
		}
		if payload, err := jws.Verify(key); err == nil {
			return payload, h, nil
		}
	}
	return nil, jose.Header{}, errors.New("no key of the issuer verifies the signature")
}
