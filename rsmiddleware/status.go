package rsmiddleware

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Token Status List checking (draft-ietf-oauth-status-list).
//
// An access token whose claims carry {"status": {"status_list": {"idx": N,
// "uri": U}}} (§6.1) is valid only while entry N of the status list at U is
// 0 (VALID, §7.1). The Verifier fetches the list token from U, checks it
// (§8.3: typ statuslist+jwt, a signature by a key of the AS's JWKS, sub
// equal to U, iss equal to the issuer when present, exp), inflates the
// list and keeps it. Every request then costs one bit lookup on the cached
// list: the revocation check adds no allocation and no request to the AS.
//
// Staleness is bounded: a list older than Config.StatusMaxAge (or the
// list's own ttl, whichever is shorter) is fetched again before it is used
// (in the background from three quarters of that age on). While the AS
// cannot be reached the cached list keeps being used until it is
// Config.StatusFailAfter old or its exp has passed; from then on tokens
// with a status claim are refused with ErrUnavailable (fail closed).

// Status list defaults.
const (
	// DefaultStatusMaxAge is the longest a cached status list is used
	// before it is fetched again: a revocation reaches this resource server
	// within it (plus the AS's own second of caching).
	DefaultStatusMaxAge = 30 * time.Second
	// DefaultStatusFailAfter is how long a cached list is still used while
	// the AS cannot be reached.
	DefaultStatusFailAfter = 10 * time.Minute
	// maxStatusLists bounds how many distinct lists one verifier tracks.
	maxStatusLists = 64
	// maxStatusListBytes caps an inflated list (a zlib bomb stops here):
	// 16 MiB is 128 Mi one-bit entries.
	maxStatusListBytes = 16 << 20
	// statusRetry is the least time between two failed fetches of a list.
	statusRetry = time.Second
)

// tokenStatus is the status claim of a referenced token (§6.1).
type tokenStatus struct {
	StatusList *struct {
		Idx *int64 `json:"idx"`
		URI string `json:"uri"`
	} `json:"status_list"`
}

// statusRef is a verified token's entry in a status list.
type statusRef struct {
	list *statusList
	idx  int64
}

// statusList is one list URI's cached, verified list.
type statusList struct {
	uri     string
	cur     atomic.Pointer[statusSnapshot]
	mu      sync.Mutex // serialises fetches
	lastTry time.Time  // guarded by mu
	bg      atomic.Bool
}

// statusSnapshot is one fetched list, immutable.
type statusSnapshot struct {
	raw       []byte // the inflated list
	bits      uint   // 1, 2, 4 or 8
	n         int64  // entries
	fetchedAt time.Time
	maxAge    time.Duration // min(StatusMaxAge, ttl)
	exp       time.Time     // zero: no exp claim
}

// status returns the status of entry idx; ok is false when idx is beyond
// the list.
func (s *statusSnapshot) status(idx int64) (v byte, ok bool) {
	if idx < 0 || idx >= s.n {
		return 0, false
	}
	bit := uint64(idx) * uint64(s.bits)
	return (s.raw[bit/8] >> (bit % 8)) & byte(1<<s.bits-1), true
}

// statusRefFor resolves a token's status claim: the list it names (which
// must live below the issuer: no token makes the verifier fetch another
// host) and its index.
func (v *Verifier) statusRefFor(st *tokenStatus) (*statusRef, error) {
	if st.StatusList == nil {
		return nil, nil // another status mechanism: not ours to check
	}
	sl := st.StatusList
	if sl.Idx == nil || *sl.Idx < 0 || sl.URI == "" {
		return nil, invalid("malformed status claim")
	}
	if !strings.HasPrefix(sl.URI, v.issuer+"/") {
		return nil, invalid("status list %q is not served by the issuer", sl.URI)
	}
	v.listsMu.Lock()
	defer v.listsMu.Unlock()
	l := v.lists[sl.URI]
	if l == nil {
		if len(v.lists) >= maxStatusLists {
			return nil, invalid("too many status lists")
		}
		l = &statusList{uri: sl.URI}
		v.lists[sl.URI] = l
	}
	return &statusRef{list: l, idx: *sl.Idx}, nil
}

// checkStatus refuses a token whose entry is not VALID. The common case
// (a fresh cached list) is a load and a bit test.
func (v *Verifier) checkStatus(ctx context.Context, ref *statusRef, now time.Time) error {
	snap := ref.list.cur.Load()
	if snap != nil {
		age := now.Sub(snap.fetchedAt)
		if age < snap.maxAge && (snap.exp.IsZero() || now.Before(snap.exp)) {
			if age >= snap.maxAge/4*3 {
				v.refreshStatusBackground(ref.list, snap)
			}
			return entryStatus(snap, ref.idx)
		}
	}
	snap = v.refreshStatus(ctx, ref.list, now)
	if snap == nil {
		return fmt.Errorf("%w: status list %s not available", ErrUnavailable, ref.list.uri)
	}
	if now.Sub(snap.fetchedAt) > v.statusFailAfter || (!snap.exp.IsZero() && !now.Before(snap.exp)) {
		return fmt.Errorf("%w: status list %s could not be refreshed since %s", ErrUnavailable, ref.list.uri,
			snap.fetchedAt.UTC().Format(time.RFC3339))
	}
	return entryStatus(snap, ref.idx)
}

var errRevoked = fmt.Errorf("%w: revoked (token status list)", ErrInvalidToken)

func entryStatus(snap *statusSnapshot, idx int64) error {
	st, ok := snap.status(idx)
	if !ok {
		return invalid("status index %d beyond the status list", idx)
	}
	if st != 0 {
		return errRevoked
	}
	return nil
}

// refreshStatus fetches l unless another goroutine is fetching it or a
// fetch failed less than statusRetry ago, and returns the newest snapshot
// (nil when there never was one). When no snapshot exists yet it waits
// for a fetch under way instead.
func (v *Verifier) refreshStatus(ctx context.Context, l *statusList, now time.Time) *statusSnapshot {
	if !l.mu.TryLock() {
		if snap := l.cur.Load(); snap != nil {
			return snap
		}
		l.mu.Lock()
	}
	defer l.mu.Unlock()
	if snap := l.cur.Load(); snap != nil && now.Sub(snap.fetchedAt) < snap.maxAge {
		return snap // fetched while we waited
	}
	return v.fetchStatusLocked(ctx, l, now)
}

// fetchStatusLocked fetches l unless its last try was within statusRetry
// and returns the list then current (nil if none). l.mu is held.
func (v *Verifier) fetchStatusLocked(ctx context.Context, l *statusList, now time.Time) *statusSnapshot {
	if !l.lastTry.IsZero() && now.Sub(l.lastTry) >= 0 && now.Sub(l.lastTry) < statusRetry {
		return l.cur.Load()
	}
	l.lastTry = now
	snap, err := v.fetchStatusList(ctx, l.uri)
	if err != nil {
		v.log.Warn("rsmiddleware: status list fetch failed; keeping the cached list", "uri", l.uri, "err", err)
		return l.cur.Load()
	}
	l.cur.Store(snap)
	return snap
}

// refreshStatusBackground fetches l again while snap, its current list, is
// still fresh, so that tokens are not held up by a fetch when it runs out.
// It does nothing when a fetch is under way or snap was replaced meanwhile.
func (v *Verifier) refreshStatusBackground(l *statusList, snap *statusSnapshot) {
	if !l.bg.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer l.bg.Store(false)
		if !l.mu.TryLock() {
			return
		}
		defer l.mu.Unlock()
		if l.cur.Load() != snap {
			return
		}
		v.fetchStatusLocked(context.Background(), l, v.now())
	}()
}

// fetchStatusList GETs and verifies the list token at uri (§8.1, §8.3).
func (v *Verifier) fetchStatusList(ctx context.Context, uri string) (*statusSnapshot, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/statuslist+jwt")
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("%s: status %d", uri, resp.StatusCode)
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "application/statuslist+jwt" {
		return nil, fmt.Errorf("%s: content type %q", uri, resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxFetchBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxFetchBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", uri, maxFetchBytes)
	}
	now := v.now()
	tok, err := jose.ParseSignedCompact(string(body), v.algs)
	if err != nil || len(tok.Signatures) != 1 {
		return nil, fmt.Errorf("%s: not a signed JWT", uri)
	}
	h := tok.Signatures[0].Protected
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); !strings.EqualFold(typ, "statuslist+jwt") {
		return nil, fmt.Errorf("%s: typ %q is not statuslist+jwt", uri, typ)
	}
	key, err := v.key(ctx, h.KeyID, h.Algorithm, now)
	if err != nil {
		return nil, err
	}
	payload, err := tok.Verify(key.Key)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", uri, err)
	}
	return parseStatusList(payload, uri, v.issuer, now, v.statusMaxAge, v.skew)
}

// statusListClaims is the list token's claim set (§5.1).
type statusListClaims struct {
	Subject    string           `json:"sub"`
	Issuer     string           `json:"iss"`
	IssuedAt   *jwt.NumericDate `json:"iat"`
	Expiry     *jwt.NumericDate `json:"exp"`
	TTL        *float64         `json:"ttl"`
	StatusList *struct {
		Bits int    `json:"bits"`
		List string `json:"lst"`
	} `json:"status_list"`
}

var errStatusList = errors.New("rsmiddleware: invalid status list token")

// parseStatusList checks the verified claims of a list token fetched from
// uri and inflates its list.
func parseStatusList(payload []byte, uri, issuer string, now time.Time, maxAge, skew time.Duration) (*statusSnapshot, error) {
	var c statusListClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, fmt.Errorf("%w: %v", errStatusList, err)
	}
	switch {
	case c.Subject != uri:
		return nil, fmt.Errorf("%w: sub %q is not %q", errStatusList, c.Subject, uri)
	case c.Issuer != "" && c.Issuer != issuer:
		return nil, fmt.Errorf("%w: iss %q", errStatusList, c.Issuer)
	case c.IssuedAt == nil:
		return nil, fmt.Errorf("%w: no iat", errStatusList)
	case c.Expiry != nil && !now.Before(c.Expiry.Time().Add(skew)):
		return nil, fmt.Errorf("%w: expired", errStatusList)
	case c.StatusList == nil:
		return nil, fmt.Errorf("%w: no status_list", errStatusList)
	}
	bits := c.StatusList.Bits
	if bits != 1 && bits != 2 && bits != 4 && bits != 8 {
		return nil, fmt.Errorf("%w: bits %d", errStatusList, bits)
	}
	z, err := base64.RawURLEncoding.DecodeString(c.StatusList.List)
	if err != nil {
		return nil, fmt.Errorf("%w: lst is not base64url", errStatusList)
	}
	zr, err := zlib.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, fmt.Errorf("%w: lst is not ZLIB: %v", errStatusList, err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxStatusListBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: lst: %v", errStatusList, err)
	}
	if len(raw) > maxStatusListBytes {
		return nil, fmt.Errorf("%w: list larger than %d bytes", errStatusList, maxStatusListBytes)
	}
	snap := &statusSnapshot{raw: raw, bits: uint(bits), n: int64(len(raw)) * 8 / int64(bits), fetchedAt: now, maxAge: maxAge}
	if c.TTL != nil {
		if *c.TTL <= 0 {
			return nil, fmt.Errorf("%w: ttl %v", errStatusList, *c.TTL)
		}
		if ttl := time.Duration(*c.TTL * float64(time.Second)); ttl < snap.maxAge {
			snap.maxAge = max(ttl, time.Second)
		}
	}
	if c.Expiry != nil {
		snap.exp = c.Expiry.Time().Add(skew)
	}
	return snap, nil
}
