package dcr

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpauth/mcpauth/internal/safehttp"
	"github.com/mcpauth/mcpauth/storage"
)

// Errors of CIMDResolver.ResolveClient. Each also matches storage.ErrNotFound
// under errors.Is, so an authorization server that treats "not found" as
// unknown client answers invalid_client for all of them: at the token
// endpoint 401 invalid_client, at the authorization endpoint an error page
// (never a redirect: the redirect_uri cannot be trusted without the
// document). ErrNotMetadataURL means the id is simply not a CIMD client id.
var (
	// ErrNotMetadataURL: the client_id is not an https URL with a path, or
	// has a fragment, userinfo or dot segments.
	ErrNotMetadataURL error = &resolveError{"dcr: client_id is not a client metadata document URL"}
	// ErrUntrustedDomain: the trust policy refuses the document's host.
	ErrUntrustedDomain error = &resolveError{"dcr: client metadata document host is not trusted"}
	// ErrDocumentFetch: the document could not be fetched; the error also
	// wraps the safehttp sentinel saying why (address, redirect, status,
	// size, timeout).
	ErrDocumentFetch error = &resolveError{"dcr: client metadata document could not be fetched"}
	// ErrInvalidDocument: the document is not acceptable client metadata;
	// the error also wraps a *MetadataError naming the field.
	ErrInvalidDocument error = &resolveError{"dcr: client metadata document is invalid"}
)

// resolveError is a CIMD refusal: itself, and storage.ErrNotFound.
type resolveError struct{ msg string }

func (e *resolveError) Error() string { return e.msg }

// Is makes every CIMD refusal match storage.ErrNotFound.
func (e *resolveError) Is(target error) bool { return target == storage.ErrNotFound }

// CIMDConfig configures NewCIMDResolver. Every zero value is usable: the
// production fetch client, default bounds, no scopes or resources.
type CIMDConfig struct {
	// HTTPClient fetches documents. Nil: safehttp.NewClient(Fetch). Anything
	// else must be an internal/safehttp client too.
	HTTPClient *http.Client `yaml:"-"`
	// Fetch configures the safehttp client built when HTTPClient is nil
	// (its allowlist admits loopback test servers).
	Fetch safehttp.Config `yaml:"fetch"`
	// MaxBytes caps a document; 0 means 5120.
	MaxBytes int64 `yaml:"max_bytes"`
	// MinCacheTTL and MaxCacheTTL bound how long a document is cached,
	// whatever its Cache-Control max-age says (no-store / no-cache / no
	// header give MinCacheTTL). 0 means 1m and 24h.
	MinCacheTTL time.Duration `yaml:"min_cache_ttl"`
	MaxCacheTTL time.Duration `yaml:"max_cache_ttl"`
	// CacheSize bounds the number of cached documents (least recently used
	// go first); 0 means 1024.
	CacheSize int `yaml:"cache_size"`
	// DomainAllow, when not empty, lists the only hosts documents may be
	// fetched from ("example.com" or "*.example.com"). DomainDeny lists hosts
	// that are refused; deny wins.
	DomainAllow []string `yaml:"domain_allow"`
	DomainDeny  []string `yaml:"domain_deny"`
	// RedirectHostAllow and RedirectHostDeny apply to the document's
	// redirect_uris as in Policy.
	RedirectHostAllow []string `yaml:"redirect_host_allow"`
	RedirectHostDeny  []string `yaml:"redirect_host_deny"`
	// Scopes and Resources a CIMD client may be granted, as in Policy.
	Scopes    []string `yaml:"scopes"`
	Resources []string `yaml:"resources"`
	// Store, when set, receives each freshly fetched client (Source "cimd",
	// created or updated) so that tokens, consents, TouchClient and Reap work
	// for it. Nil: clients live only in the cache.
	Store storage.ClientStore `yaml:"-"`
	// Metrics, when set, is told of every document fetch and of every
	// answer from the cache.
	Metrics CIMDMetrics `yaml:"-"`
	// Logger: nil means slog.Default(). Now: nil means time.Now.
	Logger *slog.Logger     `yaml:"-"`
	Now    func() time.Time `yaml:"-"`
}

// CIMDMetrics counts what a CIMDResolver does (internal/metrics implements it).
type CIMDMetrics interface {
	// CIMDFetched is called after each fetch of a document, with the
	// reason it was refused or nil.
	CIMDFetched(err error)
	// CIMDCacheHit is called when a document is answered from the cache.
	CIMDCacheHit()
}

type noMetrics struct{}

func (noMetrics) CIMDFetched(error) {}
func (noMetrics) CIMDCacheHit()     {}

// CIMDResolver resolves client ids that are Client ID Metadata Document URLs
// (draft-ietf-oauth-client-id-metadata-document §3-§4). It implements the
// authorization server's ClientResolver. Safe for concurrent use.
type CIMDResolver struct {
	client  *http.Client
	policy  *compiled
	max     int64
	minTTL  time.Duration
	maxTTL  time.Duration
	allow   []string
	deny    []string
	store   storage.ClientStore
	metrics CIMDMetrics
	log     *slog.Logger
	now     func() time.Time
	mu      sync.Mutex
	size    int
	lru     *list.List // of *cacheEntry, front = most recently used
	entries map[string]*list.Element
	flights map[string]*flight
}

type cacheEntry struct {
	id      string
	client  *storage.Client
	expires time.Time
}

type flight struct {
	done   chan struct{}
	client *storage.Client
	err    error
}

// NewCIMDResolver checks cfg and returns a resolver.
func NewCIMDResolver(cfg CIMDConfig) (*CIMDResolver, error) {
	comp, err := compileGrants(cfg.Scopes, cfg.Resources, cfg.RedirectHostAllow, cfg.RedirectHostDeny, false, 0, 0, 0)
	if err != nil {
		return nil, err
	}
	// Domain lists share the host pattern syntax; compile them the same way.
	dom, err := compileGrants(nil, nil, cfg.DomainAllow, cfg.DomainDeny, false, 0, 0, 0)
	if err != nil {
		return nil, err
	}
	r := &CIMDResolver{client: cfg.HTTPClient, policy: comp, max: cfg.MaxBytes,
		minTTL: cfg.MinCacheTTL, maxTTL: cfg.MaxCacheTTL, size: cfg.CacheSize,
		allow: dom.hostAllow, deny: dom.hostDeny, store: cfg.Store, metrics: cfg.Metrics, log: cfg.Logger, now: cfg.Now,
		lru: list.New(), entries: map[string]*list.Element{}, flights: map[string]*flight{}}
	if r.client == nil {
		if r.client, err = safehttp.NewClient(cfg.Fetch); err != nil {
			return nil, err
		}
	}
	if r.metrics == nil {
		r.metrics = noMetrics{}
	}
	if r.max <= 0 {
		r.max = 5 << 10
	}
	if r.minTTL <= 0 {
		r.minTTL = time.Minute
	}
	if r.maxTTL <= 0 {
		r.maxTTL = 24 * time.Hour
	}
	if r.maxTTL < r.minTTL {
		return nil, errors.New("dcr: CIMDConfig.MaxCacheTTL is below MinCacheTTL")
	}
	if r.size <= 0 {
		r.size = 1024
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r, nil
}

// IsMetadataURL reports whether id has the form of a CIMD client id: an https
// URL with a non-root path, no fragment, no userinfo and no dot segments
// (draft-ietf-oauth-client-id-metadata-document §3).
func IsMetadataURL(id string) bool { return checkMetadataURL(id) == nil }

func checkMetadataURL(id string) error {
	if len(id) > 2048 || !strings.HasPrefix(id, "https://") || strings.Contains(id, "#") {
		return ErrNotMetadataURL
	}
	for _, r := range id {
		if r <= ' ' || r == 0x7f || r == '\\' {
			return ErrNotMetadataURL
		}
	}
	u, err := url.Parse(id)
	if err != nil || u.Scheme != "https" || u.User != nil || u.Hostname() == "" || u.Opaque != "" {
		return ErrNotMetadataURL
	}
	p := u.EscapedPath()
	if p == "" || p == "/" {
		return ErrNotMetadataURL
	}
	for _, seg := range strings.Split(p, "/") {
		if s := strings.ToLower(seg); s == "." || s == ".." || s == "%2e" || s == "%2e%2e" || s == ".%2e" || s == "%2e." {
			return ErrNotMetadataURL
		}
	}
	return nil
}

// MetadataURLHost returns the host of a CIMD client id, for the consent page
// ("document at claude.ai"); "" when id is not a metadata URL.
func MetadataURLHost(id string) string {
	if !IsMetadataURL(id) {
		return ""
	}
	u, _ := url.Parse(id)
	return u.Host
}

// ResolveClient returns the client described by the metadata document at id,
// from the cache or freshly fetched. The returned client is the caller's to
// modify. Errors wrap one of ErrNotMetadataURL, ErrUntrustedDomain,
// ErrDocumentFetch (and a safehttp sentinel), ErrInvalidDocument, or
// storage.ErrUnavailable when the document could not be saved; failures are
// never cached.
func (r *CIMDResolver) ResolveClient(ctx context.Context, id string) (*storage.Client, error) {
	now := r.now()
	// Fast path: only ids that passed every check below are ever cached, and
	// the checks depend on nothing but the id and the fixed configuration.
	r.mu.Lock()
	if el, ok := r.entries[id]; ok {
		e := el.Value.(*cacheEntry)
		if now.Before(e.expires) {
			r.lru.MoveToFront(el)
			c := cloneClient(e.client)
			r.mu.Unlock()
			r.metrics.CIMDCacheHit()
			return c, nil
		}
		r.lru.Remove(el)
		delete(r.entries, id)
	}
	r.mu.Unlock()

	if err := checkMetadataURL(id); err != nil {
		return nil, err
	}
	u, _ := url.Parse(id)
	host := u.Hostname()
	if hostMatches(host, r.deny) || (len(r.allow) > 0 && !hostMatches(host, r.allow)) {
		return nil, fmt.Errorf("%w: %s", ErrUntrustedDomain, host)
	}
	r.mu.Lock()
	if el, ok := r.entries[id]; ok { // filled meanwhile
		c := cloneClient(el.Value.(*cacheEntry).client)
		r.mu.Unlock()
		r.metrics.CIMDCacheHit()
		return c, nil
	}
	if f, ok := r.flights[id]; ok {
		r.mu.Unlock()
		select {
		case <-f.done:
			if f.err != nil {
				return nil, f.err
			}
			return cloneClient(f.client), nil
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w: %w", ErrDocumentFetch, safehttp.ErrTimeout, ctx.Err())
		}
	}
	f := &flight{done: make(chan struct{})}
	r.flights[id] = f
	r.mu.Unlock()

	c, ttl, err := r.fetch(ctx, id, now)
	r.metrics.CIMDFetched(err)
	r.mu.Lock()
	delete(r.flights, id)
	if err == nil {
		r.put(id, c, now.Add(ttl))
	}
	r.mu.Unlock()
	f.client, f.err = c, err
	close(f.done)
	if err != nil {
		r.log.Info("dcr: client metadata document refused", "client_id", id, "err", err)
		return nil, err
	}
	return cloneClient(c), nil
}

// put caches c; r.mu is held.
func (r *CIMDResolver) put(id string, c *storage.Client, expires time.Time) {
	r.entries[id] = r.lru.PushFront(&cacheEntry{id: id, client: c, expires: expires})
	for r.lru.Len() > r.size {
		old := r.lru.Back()
		r.lru.Remove(old)
		delete(r.entries, old.Value.(*cacheEntry).id)
	}
}

// CacheLen reports how many documents are cached.
func (r *CIMDResolver) CacheLen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lru.Len()
}

// Forget drops id from the cache (e.g. after the AS saw a key it does not
// know in a private_key_jwt assertion and wants the document again).
func (r *CIMDResolver) Forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if el, ok := r.entries[id]; ok {
		r.lru.Remove(el)
		delete(r.entries, id)
	}
}

func (r *CIMDResolver) fetch(ctx context.Context, id string, now time.Time) (*storage.Client, time.Duration, error) {
	body, hdr, err := safehttp.Fetch(ctx, r.client, id, "application/json", r.max)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrDocumentFetch, err)
	}
	c, merr := r.parse(id, body)
	if merr != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrInvalidDocument, merr)
	}
	c.CreatedAt, c.UpdatedAt = now, now
	if r.store != nil {
		if err := r.save(ctx, c); err != nil {
			return nil, 0, err
		}
	}
	return c, r.ttl(hdr), nil
}

// ParseDocument validates a client metadata document fetched from id with
// the resolver's policy and returns the client it describes, without fetching
// or caching. Errors wrap ErrNotMetadataURL or ErrInvalidDocument.
func (r *CIMDResolver) ParseDocument(id string, body []byte) (*storage.Client, error) {
	if err := checkMetadataURL(id); err != nil {
		return nil, err
	}
	if int64(len(body)) > r.max {
		return nil, fmt.Errorf("%w: %w", ErrInvalidDocument, badMeta("document larger than %d bytes", r.max))
	}
	c, merr := r.parse(id, body)
	if merr != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidDocument, merr)
	}
	return c, nil
}

func (r *CIMDResolver) parse(id string, body []byte) (*storage.Client, *MetadataError) {
	md, raw, merr := decodeMetadata(body)
	if merr != nil {
		return nil, merr
	}
	var docID string
	if err := json.Unmarshal(raw["client_id"], &docID); err != nil || docID != id {
		return nil, badMeta("client_id: must equal the document URL exactly")
	}
	for _, f := range []string{"client_secret", "client_secret_expires_at"} {
		if _, ok := raw[f]; ok {
			return nil, badMeta("%s: a client metadata document must not contain a shared secret", f)
		}
	}
	if len(md.RedirectURIs) == 0 {
		return nil, badRedirect("redirect_uris: required in a client metadata document")
	}
	accepted, merr := r.policy.validate(md, modeCIMD)
	if merr != nil {
		return nil, merr
	}
	metaJSON, err := json.Marshal(accepted)
	if err != nil {
		return nil, badMeta("document cannot be re-encoded")
	}
	c := &storage.Client{ID: id, Source: "cimd"}
	r.policy.applyMetadata(c, accepted, metaJSON)
	return c, nil
}

// save creates or refreshes the stored record, keeping CreatedAt and
// LastUsedAt of an existing one.
func (r *CIMDResolver) save(ctx context.Context, c *storage.Client) error {
	for attempt := 0; attempt < 3; attempt++ {
		err := r.store.UpdateClient(ctx, c.ID, func(old storage.Client) (storage.Client, error) {
			if old.Source != "cimd" {
				return old, errNotCIMDRecord
			}
			n := *cloneClient(c)
			n.CreatedAt, n.LastUsedAt = old.CreatedAt, old.LastUsedAt
			return n, nil
		})
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errNotCIMDRecord):
			return fmt.Errorf("%w: %w", ErrInvalidDocument, badMeta("client_id: taken by a client that is not a metadata document"))
		case !errors.Is(err, storage.ErrNotFound):
			return fmt.Errorf("dcr: save client metadata document: %w", err)
		}
		err = r.store.CreateClient(ctx, cloneClient(c))
		if !errors.Is(err, storage.ErrAlreadyExists) {
			if err != nil {
				return fmt.Errorf("dcr: save client metadata document: %w", err)
			}
			return nil
		}
	}
	return fmt.Errorf("dcr: save client metadata document: %w", storage.ErrUnavailable)
}

var errNotCIMDRecord = errors.New("dcr: record is not a cimd client")

// ttl derives the cache lifetime from Cache-Control (RFC 9111 §5.2.2),
// bounded by the configured minimum and maximum.
func (r *CIMDResolver) ttl(h http.Header) time.Duration {
	ttl := r.minTTL
	for _, v := range h.Values("Cache-Control") {
		for _, d := range strings.Split(v, ",") {
			d = strings.ToLower(strings.TrimSpace(d))
			if d == "no-store" || d == "no-cache" {
				return r.minTTL
			}
			if s, ok := strings.CutPrefix(d, "max-age="); ok {
				if n, err := strconv.ParseInt(strings.Trim(s, `"`), 10, 64); err == nil && n >= 0 {
					if n > int64(r.maxTTL/time.Second) {
						ttl = r.maxTTL
					} else {
						ttl = time.Duration(n) * time.Second
					}
				}
			}
		}
	}
	return min(max(ttl, r.minTTL), r.maxTTL)
}

func cloneClient(c *storage.Client) *storage.Client {
	n := *c
	n.SecretHash = append([]byte(nil), c.SecretHash...)
	n.RedirectURIs = append([]string(nil), c.RedirectURIs...)
	n.GrantTypes = append([]string(nil), c.GrantTypes...)
	n.ResponseTypes = append([]string(nil), c.ResponseTypes...)
	n.Scopes = append([]string(nil), c.Scopes...)
	n.Resources = append([]string(nil), c.Resources...)
	n.JWKS = append([]byte(nil), c.JWKS...)
	n.Metadata = append([]byte(nil), c.Metadata...)
	n.RegistrationTokenHash = append([]byte(nil), c.RegistrationTokenHash...)
	return &n
}
