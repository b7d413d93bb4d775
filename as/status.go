package as

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpauth/mcpauth/storage"
)

// The Token Status List (draft-ietf-oauth-status-list).
//
// Every access token carries a status claim (§6.1) pointing at one index of
// the server's one status list: {"status": {"status_list": {"idx": N, "uri":
// "{issuer}/statuslists/1"}}}. The index belongs to the grant, not to the
// token: every access token of one authorization (its first one, those
// issued by refreshing it, and those exchanged from it under RFC 8693)
// carries the same index. Revocation is per grant here (a replayed code, a
// reused refresh token, RFC 7009 revocation of any of its tokens, a revoked
// consent, a deleted client), so per-grant indices give the same answers as
// per-token ones with one bit per grant instead of one per token.
//
// The list is one bit per index (status 0 valid, 1 invalid, §7.1), built
// from storage (storage.StatusStore: the last index handed out and the
// revoked ones), so every instance sharing the store serves the same list.
// Each instance caches the signed list for statusListCache and drops the
// cache when it revokes something itself.
//
// Rebuild cost: the list has one bit per grant ever made (indices are never
// reused), so it grows without bound; 1e6 grants are 125 KB before
// compression. Each rebuild reads the store, then encodes the list only when
// the store's answer differs from the one last encoded (its length is
// rounded up to a multiple of statusHeadroom, so blocks reserved elsewhere
// do not change it each time), and signs the claims again (fresh iat). The
// encoding uses zlib.BestSpeed: at 1e6 indices with 0.1-10% revoked it
// takes 1.4-3.7 ms of CPU, where zlib.BestCompression took 16-86 ms and
// DefaultCompression 1.6-11 ms, for lists of 4.2-94 KB, 5-55% larger than
// BestCompression's (docs/BENCHMARKS.md, "Token Status List rebuild"). An
// unchanged list costs 0.2-1.2 ms: the comparison and the signature.

// Status list constants.
const (
	// statusListPath is the one list's path below the issuer; its URL is
	// the sub of the list token and the uri of every status claim.
	statusListPath = "/statuslists/1"
	// statusAggregationPath serves the Status List Aggregation (§9.3),
	// advertised as status_list_aggregation_endpoint (§9.1).
	statusAggregationPath = "/statuslists"
	// statusListCache is how long an instance serves the list it built.
	statusListCache = time.Second
	// StatusListTTL is the list token's ttl claim (§5.1): how long a
	// resource server may cache it.
	StatusListTTL = 30 * time.Second
	// statusListLifetime is the list token's exp, after iat: a resource
	// server never uses a list older than this.
	statusListLifetime = time.Hour
	// statusBlock is how many indices an instance reserves at once.
	statusBlock = 256
	// statusHeadroom is how many indices beyond the last one handed out
	// the list covers (all valid), so a token from a block another
	// instance reserved a moment ago finds its index in the list.
	statusHeadroom = 4096
)

// statusClaim is the status claim of an access token (§6.1).
type statusClaim struct {
	StatusList statusRef `json:"status_list"`
}

type statusRef struct {
	Idx int64  `json:"idx"`
	URI string `json:"uri"`
}

// statusIndexer hands out status indices from blocks reserved in storage.
// Reservations happen in GenerateAccessToken, which fosite calls before it
// begins a transaction, so a reservation is never rolled back.
type statusIndexer struct {
	store     storage.StatusStore
	mu        sync.Mutex
	next, end int64 // the current block: [next, end)
}

func (a *statusIndexer) index(ctx context.Context) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next >= a.end {
		first, err := a.store.AllocateStatusIndices(ctx, statusBlock)
		if err != nil {
			return 0, err
		}
		a.next, a.end = first, first+statusBlock
	}
	idx := a.next
	a.next++
	return idx, nil
}

// statusList builds, signs and caches the list token.
type statusList struct {
	store  storage.StatusStore
	keys   *keyring
	issuer string
	uri    string
	now    func() time.Time

	// revocations counts the revocations of the server's GrantRevoker:
	// a list built before the latest one is built again.
	revocations *atomic.Uint64

	mu      sync.Mutex
	token   []byte
	builtAt time.Time
	builtAs uint64 // revocations when the cached list was built
	// lst is the encoded list of the last build, of lstLen indices with
	// lstInvalid set; reused while the store reports the same.
	lst        string
	lstLen     int64
	lstInvalid []int64
}

// statusListLen is how many indices the list covers when last is the
// highest one handed out: at least statusHeadroom more, rounded up to a
// multiple of statusHeadroom.
func statusListLen(last int64) int64 {
	return (last + 1 + 2*statusHeadroom - 1) / statusHeadroom * statusHeadroom
}

// invalidate makes the next request rebuild the list: called after this
// instance revoked something.
func (l *statusList) invalidate() {
	l.mu.Lock()
	l.token = nil
	l.mu.Unlock()
}

// statusListClaims is the list token's claim set (§5.1).
type statusListClaims struct {
	Subject    string         `json:"sub"`
	Issuer     string         `json:"iss"`
	IssuedAt   int64          `json:"iat"`
	ExpiresAt  int64          `json:"exp"`
	TTL        int64          `json:"ttl"`
	StatusList statusListBits `json:"status_list"`
}

type statusListBits struct {
	Bits           int    `json:"bits"`
	List           string `json:"lst"`
	AggregationURI string `json:"aggregation_uri,omitempty"`
}

// current returns the signed list token, rebuilding it when the cached
// one is older than statusListCache.
func (l *statusList) current(ctx context.Context) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	var gen uint64
	if l.revocations != nil {
		gen = l.revocations.Load()
	}
	if l.token != nil && gen == l.builtAs && now.Sub(l.builtAt) < statusListCache && !now.Before(l.builtAt) {
		return l.token, nil
	}
	last, invalid, err := l.store.StatusList(ctx, now)
	if err != nil {
		return nil, err
	}
	if n := statusListLen(last); l.lst == "" || n != l.lstLen || !slices.Equal(invalid, l.lstInvalid) {
		lst, err := encodeStatusBits(n, invalid)
		if err != nil {
			return nil, err
		}
		l.lst, l.lstLen, l.lstInvalid = lst, n, slices.Clone(invalid)
	}
	payload, err := json.Marshal(statusListClaims{
		Subject:   l.uri,
		Issuer:    l.issuer,
		IssuedAt:  now.Unix(),
		ExpiresAt: now.Add(statusListLifetime).Unix(),
		TTL:       int64(StatusListTTL / time.Second),
		StatusList: statusListBits{
			Bits: 1, List: l.lst, AggregationURI: l.issuer + statusAggregationPath,
		},
	})
	if err != nil {
		return nil, err
	}
	k, err := l.keys.signingKey()
	if err != nil {
		return nil, err
	}
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.SignatureAlgorithm(k.alg), Key: jose.JSONWebKey{Key: k.priv, KeyID: k.kid}},
		(&jose.SignerOptions{}).WithType("statuslist+jwt"),
	)
	if err != nil {
		return nil, err
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return nil, err
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		return nil, err
	}
	l.token, l.builtAt, l.builtAs = []byte(tok), now, gen
	return l.token, nil
}

// encodeStatusBits is the lst value (§4.1) of a one-bit list of n indices
// with the invalid ones set: bit idx%8 (least significant first) of byte
// idx/8, DEFLATE-compressed in the ZLIB format (RFC 1950) at
// zlib.BestSpeed, base64url without padding.
func encodeStatusBits(n int64, invalid []int64) (string, error) {
	return encodeStatusBitsLevel(n, invalid, zlib.BestSpeed)
}

// encodeStatusBitsLevel is encodeStatusBits at a zlib level.
func encodeStatusBitsLevel(n int64, invalid []int64, level int) (string, error) {
	raw := make([]byte, (n+7)/8)
	for _, idx := range invalid {
		if idx >= 0 && idx < n {
			raw[idx/8] |= 1 << (idx % 8)
		}
	}
	var buf bytes.Buffer
	zw, err := zlib.NewWriterLevel(&buf, level)
	if err != nil {
		return "", err
	}
	if _, err := zw.Write(raw); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(buf.Bytes()), nil
}

// serveStatusList serves the list token (§8.1) as
// application/statuslist+jwt.
func (s *Server) serveStatusList(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSONError(w, http.StatusMethodNotAllowed, "invalid_request", "GET only.")
		return
	}
	tok, err := s.statusList.current(r.Context())
	if err != nil {
		s.log.error(r.Context(), "building the status list", "err", err)
		writeJSONError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "The status list is unavailable; try again shortly.")
		return
	}
	w.Header().Set("Content-Type", "application/statuslist+jwt")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(tok)
}

// serveStatusAggregation serves the Status List Aggregation (§9.3): the
// URIs of every list this server publishes (one).
func (s *Server) serveStatusAggregation(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSONError(w, http.StatusMethodNotAllowed, "invalid_request", "GET only.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_ = json.NewEncoder(w).Encode(map[string][]string{"status_lists": {s.statusList.uri}})
}

// StatusListURI is the URL of the Token Status List this server publishes:
// the uri of every access token's status claim.
func (s *Server) StatusListURI() string { return s.statusList.uri }
