package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	_ "crypto/sha256" // crypto.SHA256 of the key thumbprint
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// IdentityConfig makes the gateway tell the upstream who called: each
// forwarded request carries a JWT signed by the gateway (ES256, typ
// mcp-identity+jwt) in Header, and the client's own header of that name
// is removed. The public key is served at /.well-known/jwks.json.
type IdentityConfig struct {
	// Header carries the JWT (required: no header, no identity).
	Header string `yaml:"header"`
	// KeyFile is a PEM P-256 private key (SEC 1 "EC PRIVATE KEY" or PKCS
	// #8). Empty: a key generated at start, so upstreams must fetch the
	// JWKS again after a restart, and instances behind one resource have
	// different keys (all of them are then fetched by kid as they come).
	KeyFile string `yaml:"key_file"`
	// Claims are the claims of the access token copied into the JWT when
	// present. Zero value: DefaultIdentityClaims.
	Claims []string `yaml:"claims"`
}

// DefaultIdentityClaims are the person attributes passed by default.
var DefaultIdentityClaims = []string{"email", "groups", "tenant"}

// identityTTL is the lifetime of an identity JWT: one request's.
const identityTTL = 60 * time.Second

// reservedIdentityClaims are set by the gateway itself.
var reservedIdentityClaims = []string{"iss", "sub", "aud", "exp", "iat", "nbf", "jti", "client_id", "scope", "cnf", "act"}

// reservedHeaders are fields the identity header must not replace.
var reservedHeaders = []string{"Authorization", "Dpop", "Host", "Cookie", "Content-Type", "Content-Length", "Content-Encoding",
	"Mcp-Session-Id", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name", "Accept", "Accept-Encoding", "Connection", "Te", "Transfer-Encoding", "Upgrade"}

func (c *IdentityConfig) check() error {
	if c.Header == "" {
		return errors.New("identity.header: required (the field the identity JWT travels in)")
	}
	for _, b := range []byte(c.Header) {
		if !strings.ContainsRune("!#$%&'*+-.^`|~", rune(b)) && !(b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z') {
			return fmt.Errorf("identity.header: %q is not a field name (RFC 9110 §5.1); underscores are dropped by the gateway", c.Header)
		}
	}
	if slices.Contains(reservedHeaders, http.CanonicalHeaderKey(c.Header)) {
		return fmt.Errorf("identity.header: %q is a field of HTTP or MCP", c.Header)
	}
	if c.Claims == nil {
		c.Claims = DefaultIdentityClaims
	}
	for _, cl := range c.Claims {
		if cl == "" || slices.Contains(reservedIdentityClaims, cl) {
			return fmt.Errorf("identity.claims: %q is set by the gateway itself", cl)
		}
	}
	return nil
}

// identitySigner makes the identity JWTs of one gateway.
type identitySigner struct {
	header   string
	iss, aud string
	claims   []string
	signer   jose.Signer
	jwks     []byte
	now      func() time.Time
}

func newIdentitySigner(cfg *Config, log *slog.Logger) (*identitySigner, error) {
	ic := cfg.Identity
	var key *ecdsa.PrivateKey
	if ic.KeyFile != "" {
		pemBytes, err := os.ReadFile(ic.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("identity.key_file: %w", err)
		}
		if key, err = parseECKey(pemBytes); err != nil {
			return nil, fmt.Errorf("identity.key_file: %w", err)
		}
	} else {
		var err error
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return nil, err
		}
		log.Info("mcpgateway: no identity.key_file, so a key generated at start signs the identity JWTs: upstreams fetch it again from /.well-known/jwks.json after a restart; set identity.key_file, the same at every instance, to keep one key")
	}
	pub := jose.JSONWebKey{Key: &key.PublicKey, Algorithm: string(jose.ES256), Use: "sig"}
	tp, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, err
	}
	pub.KeyID = base64.RawURLEncoding.EncodeToString(tp)
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{pub}})
	if err != nil {
		return nil, err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: pub.KeyID}},
		(&jose.SignerOptions{}).WithType(rsmiddleware.IdentityType))
	if err != nil {
		return nil, err
	}
	return &identitySigner{header: http.CanonicalHeaderKey(ic.Header), iss: cfg.Resource, aud: cfg.Upstream, claims: ic.Claims,
		signer: signer, jwks: jwks, now: time.Now}, nil
}

func parseECKey(b []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("PEM block %q, want EC PRIVATE KEY or PRIVATE KEY", block.Type)
	}
	if err != nil {
		return nil, err
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, errors.New("not a P-256 key (ES256, RFC 7518 §3.4)")
	}
	return ec, nil
}

// token is the identity JWT of the caller of r.
func (s *identitySigner) token(r *http.Request) (string, error) {
	p, ok := rsmiddleware.PrincipalFromContext(r.Context())
	if !ok {
		return "", errors.New("no principal")
	}
	now := s.now()
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return "", err
	}
	c := map[string]any{
		"iss": s.iss, "aud": s.aud, "sub": p.Subject, "iat": now.Unix(), "exp": now.Add(identityTTL).Unix(),
		"jti": base64.RawURLEncoding.EncodeToString(jti),
	}
	if p.ClientID != "" {
		c["client_id"] = p.ClientID
	}
	if len(p.Scopes) > 0 {
		c["scope"] = strings.Join(p.Scopes, " ")
	}
	if len(s.claims) > 0 {
		var tc map[string]json.RawMessage
		if json.Unmarshal(rsmiddleware.VerifiedClaims(r.Context()), &tc) == nil {
			for _, name := range s.claims {
				if v, ok := tc[name]; ok && string(v) != "null" {
					c[name] = v
				}
			}
		}
	}
	return jwt.Signed(s.signer).Claims(c).Serialize()
}

// wrap sets the identity header on every request next forwards, replacing
// any the client sent.
func (s *identitySigner) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		delete(r.Header, s.header)
		if _, ok := rsmiddleware.PrincipalFromContext(r.Context()); ok {
			tok, err := s.token(r)
			if err != nil {
				http.Error(w, "the gateway could not sign the caller's identity", http.StatusInternalServerError)
				return
			}
			r.Header[s.header] = []string{tok}
		}
		next.ServeHTTP(w, r)
	})
}

// serveJWKS serves the public key (RFC 7517 §5).
func (s *identitySigner) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(s.jwks)
}
