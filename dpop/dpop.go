// Package dpop creates and checks DPoP proofs (RFC 9449), for clients,
// authorization servers and resource servers alike.
//
// A proof is a JWT with header typ "dpop+jwt", an asymmetric alg and the
// public key as jwk, and the claims jti, htm, htu, iat, plus ath (the hash
// of the access token) when it goes with an access token and nonce when the
// server supplied one (RFC 9449 §4.2). Checker applies the checks of
// RFC 9449 §4.3; Thumbprint is the RFC 7638 SHA-256 thumbprint a bound token
// carries as cnf.jkt (RFC 9449 §6.1).
//
// The package depends on go-jose only: it knows nothing about storage. A
// replay cache is anything with UseJTI (JTIStore).
package dpop

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// HeaderName is the request header that carries a proof, and the
// authentication scheme of a bound token (RFC 9449 §4.1, §7.1).
const HeaderName = "DPoP"

// NonceHeader carries a server-provided nonce (RFC 9449 §8, §9).
const NonceHeader = "DPoP-Nonce"

// Type is the JWT typ of a proof (RFC 9449 §4.2).
const Type = "dpop+jwt"

// DefaultAlgs are the proof algorithms accepted by default: asymmetric only,
// never none or an HMAC (RFC 9449 §4.2, §5.1).
var DefaultAlgs = []string{"ES256", "ES384", "ES512", "RS256", "PS256", "EdDSA"}

// DefaultWindow is how far iat may be from now in either direction
// (RFC 9449 §4.3 item 11, §11.1; five minutes as the MCP profile says).
const DefaultWindow = 5 * time.Minute

// maxProofLen bounds the proof before it is parsed; real proofs are well
// under 2 KiB even with an RSA-4096 jwk.
const maxProofLen = 8192

// maxJTILen bounds jti values kept in a replay cache (RFC 9449 §11.1).
const maxJTILen = 256

// Errors returned by Checker.Check. ErrInvalidProof wraps every failure
// except a missing or stale nonce, which is ErrUseNonce (RFC 9449 §8:
// error use_dpop_nonce).
var (
	ErrInvalidProof = errors.New("invalid_dpop_proof")
	ErrUseNonce     = errors.New("use_dpop_nonce")
	// ErrReplay is a proof whose jti was seen before; it wraps ErrInvalidProof.
	ErrReplay = fmt.Errorf("%w: the proof was used before", ErrInvalidProof)
)

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidProof}, a...)...)
}

// Proof is a checked proof.
type Proof struct {
	// JWK is the public key of the proof; Thumbprint its RFC 7638 SHA-256
	// thumbprint, base64url (the cnf.jkt value, RFC 9449 §6.1).
	JWK        jose.JSONWebKey
	Thumbprint string
	Alg        string
	JTI        string
	Method     string
	URI        string
	IssuedAt   time.Time
	AccessHash string
	Nonce      string
}

type claims struct {
	JTI   string          `json:"jti"`
	HTM   string          `json:"htm"`
	HTU   string          `json:"htu"`
	IAT   json.RawMessage `json:"iat"`
	ATH   string          `json:"ath,omitempty"`
	Nonce string          `json:"nonce,omitempty"`
}

// Parse checks the structure and signature of a proof (RFC 9449 §4.3 items
// 2-7): one compact JWS, typ dpop+jwt, alg in algs, a public jwk in the
// header that verifies the signature, and jti, htm, htu and iat present. It
// does not compare the claims with a request; Checker.Check does.
func Parse(proof string, algs []string) (*Proof, error) {
	if proof == "" {
		return nil, invalid("no proof")
	}
	if len(proof) > maxProofLen {
		return nil, invalid("the proof is too long")
	}
	if strings.Count(proof, ".") != 2 {
		return nil, invalid("the proof is not a compact JWS")
	}
	sa := make([]jose.SignatureAlgorithm, 0, len(algs))
	for _, a := range algs {
		if a == "none" || strings.HasPrefix(a, "HS") {
			continue
		}
		sa = append(sa, jose.SignatureAlgorithm(a))
	}
	jws, err := jose.ParseSignedCompact(proof, sa)
	if err != nil {
		return nil, invalid("the proof is not a well-formed JWS with a permitted algorithm")
	}
	if len(jws.Signatures) != 1 {
		return nil, invalid("the proof must have one signature")
	}
	h := jws.Signatures[0].Header
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); !strings.EqualFold(typ, Type) {
		return nil, invalid("the proof's typ is not dpop+jwt")
	}
	jwk := h.JSONWebKey
	if jwk == nil || !jwk.Valid() || !jwk.IsPublic() || !asymmetric(jwk.Key) {
		return nil, invalid("the proof's jwk header is missing or not a public key")
	}
	payload, err := jws.Verify(jwk.Key)
	if err != nil {
		return nil, invalid("the proof's signature does not verify with its jwk")
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, invalid("the proof's claims are not a JSON object")
	}
	if c.JTI == "" || c.HTM == "" || c.HTU == "" || len(c.IAT) == 0 {
		return nil, invalid("the proof lacks one of jti, htm, htu, iat")
	}
	if len(c.JTI) > maxJTILen {
		return nil, invalid("the proof's jti is too long")
	}
	var iat json.Number
	if err := json.Unmarshal(c.IAT, &iat); err != nil {
		return nil, invalid("the proof's iat is not a number")
	}
	secs, err := iat.Float64()
	if err != nil || secs < 0 || secs > 1<<40 {
		return nil, invalid("the proof's iat is not a valid time")
	}
	tp, err := Thumbprint(jwk)
	if err != nil {
		return nil, invalid("the proof's jwk has no thumbprint")
	}
	return &Proof{
		JWK:        *jwk,
		Thumbprint: tp,
		Alg:        string(h.Algorithm),
		JTI:        c.JTI,
		Method:     c.HTM,
		URI:        c.HTU,
		IssuedAt:   time.Unix(int64(secs), 0),
		AccessHash: c.ATH,
		Nonce:      c.Nonce,
	}, nil
}

func asymmetric(k any) bool {
	switch k.(type) {
	case *ecdsa.PublicKey, *rsa.PublicKey, ed25519.PublicKey:
		return true
	}
	return false
}

// Thumbprint is the RFC 7638 SHA-256 thumbprint of k, base64url without
// padding: the cnf.jkt of a bound token and the dpop_jkt parameter
// (RFC 9449 §6.1, §10).
func Thumbprint(k *jose.JSONWebKey) (string, error) {
	pub := k.Public()
	b, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// canonicalHeaderName is HeaderName as http.Header stores it ("Dpop").
var canonicalHeaderName = textproto.CanonicalMIMEHeaderKey(HeaderName)

// AccessTokenHash is the ath claim: base64url(SHA-256(ASCII token))
// (RFC 9449 §4.2).
func AccessTokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// FromHeader returns the one proof of a request. Several DPoP header fields,
// or a value with a comma (several proofs joined), are refused
// (RFC 9449 §4.3 item 1). ok is false when there is no DPoP header.
func FromHeader(h http.Header) (proof string, ok bool, err error) {
	// Indexed by the canonical key: h.Values would canonicalise "DPoP"
	// (not in canonical form) into a new string on every request.
	vs := h[canonicalHeaderName]
	if len(vs) == 0 {
		return "", false, nil
	}
	if len(vs) > 1 || strings.Contains(vs[0], ",") {
		return "", true, invalid("more than one DPoP proof")
	}
	return strings.TrimSpace(vs[0]), true, nil
}

// JTIStore records one-time proof identifiers. UseJTI returns an error
// wrapping ErrReplay when id was recorded before and has not yet expired;
// exactly one of concurrent callers with the same id succeeds. Any other
// error (the store cannot answer) is returned by Check as it is.
type JTIStore interface {
	UseJTI(ctx context.Context, id string, expiresAt time.Time) error
}

// Checker checks proofs against requests (RFC 9449 §4.3). The zero value
// accepts DefaultAlgs within DefaultWindow and keeps no replay cache.
type Checker struct {
	// Algs are the accepted JWS algorithms; none and HS* are always refused.
	Algs []string
	// Window bounds |iat - now|; DefaultWindow when zero.
	Window time.Duration
	// JTIs, when set, makes each proof usable once within the window
	// (RFC 9449 §11.1). Keys are a hash of htu and jti, so any length of
	// jti costs the store the same.
	JTIs JTIStore
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Request is what a proof is checked against.
type Request struct {
	// Method is the HTTP method (htm); URI the request URI as the client
	// addressed it (htu; its query and fragment are ignored, RFC 9449 §4.3
	// item 9). Behind a proxy pass the public URL, not r.URL.
	Method string
	URI    string
	// AccessToken, when set, must be hashed in the proof's ath (RFC 9449
	// §4.3 item 12; resource servers). When empty the proof must not matter
	// for a token: ath is ignored.
	AccessToken string
	// Nonce, when set, is what the proof's nonce must be; CheckNonce, when
	// set, decides instead (for stateless nonces). When both are empty no
	// nonce is required.
	Nonce      string
	CheckNonce func(nonce string) bool
}

// Check parses proof and checks it against req: every check of RFC 9449
// §4.3 on the proof itself first, then the nonce (ErrUseNonce), then replay.
func (c *Checker) Check(ctx context.Context, proof string, req Request) (*Proof, error) {
	algs := c.Algs
	if len(algs) == 0 {
		algs = DefaultAlgs
	}
	p, err := Parse(proof, algs)
	if err != nil {
		return nil, err
	}
	if p.Method != req.Method {
		return nil, invalid("the proof's htm is not the request method")
	}
	want, err := NormalizeURI(req.URI)
	if err != nil {
		return nil, invalid("the request URI cannot be compared")
	}
	got, err := NormalizeURI(p.URI)
	if err != nil || got != want {
		return nil, invalid("the proof's htu is not the request URI")
	}
	now := time.Now()
	if c.Now != nil {
		now = c.Now()
	}
	w := c.Window
	if w <= 0 {
		w = DefaultWindow
	}
	if d := now.Sub(p.IssuedAt); d > w || d < -w {
		return nil, invalid("the proof's iat is outside the acceptance window")
	}
	if req.AccessToken != "" {
		if p.AccessHash == "" || !constantEqual(p.AccessHash, AccessTokenHash(req.AccessToken)) {
			return nil, invalid("the proof's ath does not match the access token")
		}
	}
	switch {
	case req.CheckNonce != nil:
		if p.Nonce == "" || !req.CheckNonce(p.Nonce) {
			return nil, ErrUseNonce
		}
	case req.Nonce != "":
		if !constantEqual(p.Nonce, req.Nonce) {
			return nil, ErrUseNonce
		}
	}
	if c.JTIs != nil {
		h := sha256.Sum256([]byte(want + "\x00" + p.JTI))
		key := "dpop:" + base64.RawURLEncoding.EncodeToString(h[:])
		// Remembered until the proof can no longer pass the iat check.
		if err := c.JTIs.UseJTI(ctx, key, p.IssuedAt.Add(w+time.Second)); err != nil {
			if errors.Is(err, ErrReplay) {
				return nil, ErrReplay
			}
			return nil, err
		}
	}
	return p, nil
}

// constantEqual compares in time independent of where a and b differ.
func constantEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// NormalizeURI is the form in which htu values are compared: scheme and
// host lower-cased, the default port dropped, an empty path made "/", dot
// segments removed, query and fragment dropped (RFC 3986 §6.2.2, §6.2.3;
// RFC 9449 §4.3 item 9).
func NormalizeURI(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	if !u.IsAbs() || u.Host == "" || u.User != nil || u.Opaque != "" {
		return "", errors.New("dpop: not an absolute http(s) URI")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return "", errors.New("dpop: not an http(s) URI")
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	p = removeDotSegments(p)
	return scheme + "://" + host + p, nil
}

// removeDotSegments is RFC 3986 §5.2.4 on an absolute path.
func removeDotSegments(p string) string {
	if !strings.Contains(p, ".") {
		return p
	}
	var out []string
	segs := strings.Split(p, "/")
	for i, s := range segs {
		switch s {
		case ".":
			if i == len(segs)-1 {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if i == len(segs)-1 {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	r := strings.Join(out, "/")
	if !strings.HasPrefix(r, "/") {
		r = "/" + r
	}
	return r
}

// Signer makes proofs with one key (the client side, RFC 9449 §4.2).
type Signer struct {
	signer     jose.Signer
	alg        string
	jwk        jose.JSONWebKey
	thumbprint string
	now        func() time.Time
}

// NewSigner makes proofs with key: ES256/ES384/ES512 for P-256/P-384/P-521,
// PS256 for RSA, EdDSA for Ed25519.
func NewSigner(key crypto.Signer) (*Signer, error) {
	var alg jose.SignatureAlgorithm
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			alg = jose.ES256
		case elliptic.P384():
			alg = jose.ES384
		case elliptic.P521():
			alg = jose.ES512
		default:
			return nil, errors.New("dpop: unsupported curve")
		}
	case *rsa.PrivateKey:
		alg = jose.PS256
	case ed25519.PrivateKey:
		alg = jose.EdDSA
	default:
		return nil, errors.New("dpop: unsupported key type")
	}
	pub := jose.JSONWebKey{Key: key.Public()}
	tp, err := Thumbprint(&pub)
	if err != nil {
		return nil, err
	}
	opts := (&jose.SignerOptions{EmbedJWK: true}).WithType(Type)
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		return nil, err
	}
	return &Signer{signer: s, alg: string(alg), jwk: pub, thumbprint: tp, now: time.Now}, nil
}

// GenerateKey makes a new P-256 key for ES256 proofs.
func GenerateKey() (*Signer, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return NewSigner(k)
}

// Thumbprint is the key's RFC 7638 thumbprint (cnf.jkt, dpop_jkt).
func (s *Signer) Thumbprint() string { return s.thumbprint }

// Alg is the JWS algorithm of the proofs.
func (s *Signer) Alg() string { return s.alg }

// Proof makes a fresh proof for one request: method and uri (query and
// fragment are dropped, RFC 9449 §4.2), with ath when accessToken is set
// and nonce when the server supplied one.
func (s *Signer) Proof(method, uri, accessToken, nonce string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", err
	}
	u.RawQuery, u.Fragment, u.RawFragment, u.ForceQuery = "", "", "", false
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return "", err
	}
	c := map[string]any{
		"jti": base64.RawURLEncoding.EncodeToString(jti),
		"htm": method,
		"htu": u.String(),
		"iat": s.now().Unix(),
	}
	if accessToken != "" {
		c["ath"] = AccessTokenHash(accessToken)
	}
	if nonce != "" {
		c["nonce"] = nonce
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	jws, err := s.signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// MemoryJTIs is an in-process JTIStore for a single resource server
// instance. Expired ids are dropped as new ones arrive; size bounds the
// ids kept (the oldest go first), so a flood cannot exhaust memory.
type MemoryJTIs struct {
	mu    sync.Mutex
	size  int
	ids   map[string]time.Time
	order []string
	now   func() time.Time
}

// NewMemoryJTIs keeps at most size ids (100000 when size <= 0).
func NewMemoryJTIs(size int) *MemoryJTIs {
	if size <= 0 {
		size = 100000
	}
	return &MemoryJTIs{size: size, ids: map[string]time.Time{}, now: time.Now}
}

// UseJTI implements JTIStore.
func (m *MemoryJTIs) UseJTI(_ context.Context, id string, expiresAt time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if exp, ok := m.ids[id]; ok && now.Before(exp) {
		return ErrReplay
	}
	for len(m.order) > 0 {
		oldest := m.order[0]
		if exp, ok := m.ids[oldest]; ok && now.Before(exp) && len(m.ids) < m.size {
			break
		}
		delete(m.ids, oldest)
		m.order = m.order[1:]
	}
	m.ids[id] = expiresAt
	m.order = append(m.order, id)
	return nil
}

// SetClock replaces the clock that sets iat (time.Now by default), for
// clients whose clock is known to be off and for tests.
func (s *Signer) SetClock(now func() time.Time) { s.now = now }
