// Package memory is an in-process storage.Store for tests and throwaway runs.
//
// Every method is safe for concurrent use. Records are copied on the way in and
// on the way out, so callers never share memory with the store.
//
// Transactions (storage.Transactional) are serialised: BeginTX waits until no
// other transaction of this store is open, then every write made with the
// returned context is applied at once and journalled; Rollback undoes the
// journal, so the work of a rolled-back transaction is invisible afterwards.
// Writes of an open transaction are visible to readers outside it (read
// uncommitted), which the AS never relies on. A transaction must end with
// Commit or Rollback; an abandoned one blocks later BeginTX calls until their
// context ends.
//
// It passes storage/storagetest, so it keeps the same single-use rules as the
// durable backends: a code is redeemed once (RFC 6749 §4.1.2), a refresh
// token rotates once (RFC 9700 §4.14.2), a jti is used once (RFC 7523 §3).
package memory

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

type tokenKey struct {
	kind storage.TokenKind
	sig  string
}

type consentKey struct {
	subject, clientID, resource string
}

// Store is the in-memory backend. The zero value is not usable; call New.
type Store struct {
	mu        sync.Mutex
	clients   map[string]*storage.Client
	tokens    map[tokenKey]*storage.Token
	consents  map[consentKey]*storage.Consent
	keys      map[string]*storage.SigningKey
	jtis      map[string]time.Time
	counters  map[string]*storage.Counter
	sessions  map[string]*storage.Session
	users     map[string]*storage.User
	approvals map[string]*storage.Approval
	// statusLast is the last status index handed out; statuses holds the
	// expiry of each index recorded StatusInvalid.
	statusLast int64
	statuses   map[int64]time.Time
	// audit holds the audit events in ID order; auditLast is the last ID
	// handed out. stats holds the hourly counts.
	audit     []storage.AuditEvent
	auditLast int64
	stats     map[statKey]int64
	closed    bool

	txSem chan struct{} // holds one token while a transaction is open
}

var (
	_ storage.Store             = (*Store)(nil)
	_ storage.TokenPersonReader = (*Store)(nil)
)

// New returns an empty store.
func New() *Store {
	return &Store{
		clients:   map[string]*storage.Client{},
		tokens:    map[tokenKey]*storage.Token{},
		consents:  map[consentKey]*storage.Consent{},
		keys:      map[string]*storage.SigningKey{},
		jtis:      map[string]time.Time{},
		counters:  map[string]*storage.Counter{},
		sessions:  map[string]*storage.Session{},
		users:     map[string]*storage.User{},
		approvals: map[string]*storage.Approval{},
		statuses:  map[int64]time.Time{},
		stats:     map[statKey]int64{},
		txSem:     make(chan struct{}, 1),
	}
}

// tx is an open transaction: the undo journal of its writes.
type tx struct {
	s    *Store
	undo []func()
	done bool
}

type txKey struct{}

// txFrom returns the open transaction of s carried by ctx, or nil.
func (s *Store) txFrom(ctx context.Context) *tx {
	t, _ := ctx.Value(txKey{}).(*tx)
	if t == nil || t.s != s || t.done {
		return nil
	}
	return t
}

// remember journals the current entry of m[k] so that Rollback restores it.
// Stored values are never modified in place, only replaced, so keeping the
// old pointer is enough. Every write goes through put or del, which call it.
func remember[K comparable, V any](t *tx, m map[K]V, k K) {
	if t == nil {
		return
	}
	old, ok := m[k]
	t.undo = append(t.undo, func() {
		if ok {
			m[k] = old
		} else {
			delete(m, k)
		}
	})
}

// put sets m[k] = v, journalled. Callers hold s.mu.
func put[K comparable, V any](t *tx, m map[K]V, k K, v V) {
	remember(t, m, k)
	m[k] = v
}

// del removes m[k], journalled. Callers hold s.mu.
func del[K comparable, V any](t *tx, m map[K]V, k K) {
	remember(t, m, k)
	delete(m, k)
}

// deleteEntry removes m[k], journalled, or answers storage.ErrNotFound when
// there is none. Callers hold s.mu.
func deleteEntry[K comparable, V any](t *tx, m map[K]V, k K) error {
	if _, ok := m[k]; !ok {
		return storage.ErrNotFound
	}
	del(t, m, k)
	return nil
}

// deleteExpired removes, journalled, at most limit entries of m that expired
// reports true for, and returns how many it removed. A limit <= 0 removes
// nothing. Callers hold s.mu.
func deleteExpired[K comparable, V any](t *tx, m map[K]V, limit int, expired func(V) bool) int {
	n := 0
	for k, v := range m {
		if n >= limit {
			break
		}
		if expired(v) {
			del(t, m, k)
			n++
		}
	}
	return n
}

// lock takes the data lock and returns the transaction in ctx, if any.
func (s *Store) lock(ctx context.Context) (*tx, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errClosed
	}
	return s.txFrom(ctx), nil
}

var errClosed = errors.Join(storage.ErrUnavailable, errors.New("memory: store closed"))

// BeginTX starts a transaction carried by the returned context. If ctx
// already carries one of this store, it is reused (no nesting).
func (s *Store) BeginTX(ctx context.Context) (context.Context, error) {
	if s.txFrom(ctx) != nil {
		return ctx, nil
	}
	select {
	case s.txSem <- struct{}{}:
	case <-ctx.Done():
		return ctx, ctx.Err()
	}
	return context.WithValue(ctx, txKey{}, &tx{s: s}), nil
}

// afterTransactions makes a revocation of grants wait for the transaction
// open in another goroutine (a refresh rotating a token of the grant and
// writing its successors), as row locks make the SQL backends wait: run
// in a transaction of its own, it sees the successors and revokes them too.
// With a transaction in ctx it runs in that one.
func (s *Store) afterTransactions(ctx context.Context) (context.Context, func(), error) {
	if s.txFrom(ctx) != nil {
		return ctx, func() {}, nil
	}
	tctx, err := s.BeginTX(ctx)
	if err != nil {
		return ctx, nil, err
	}
	return tctx, func() { _ = s.Commit(tctx) }, nil
}

// ErrNoTransaction is returned by Commit and Rollback when ctx carries no open
// transaction of this store.
var ErrNoTransaction = errors.New("memory: no open transaction in context")

// Commit makes the transaction's writes final.
func (s *Store) Commit(ctx context.Context) error {
	s.mu.Lock()
	t := s.txFrom(ctx)
	if t == nil {
		s.mu.Unlock()
		return ErrNoTransaction
	}
	t.done, t.undo = true, nil
	s.mu.Unlock()
	<-s.txSem
	return nil
}

// Rollback undoes every write made in the transaction.
func (s *Store) Rollback(ctx context.Context) error {
	s.mu.Lock()
	t := s.txFrom(ctx)
	if t == nil {
		s.mu.Unlock()
		return ErrNoTransaction
	}
	for i := len(t.undo) - 1; i >= 0; i-- {
		t.undo[i]()
	}
	t.done, t.undo = true, nil
	s.mu.Unlock()
	<-s.txSem
	return nil
}

// Ping reports a closed store as unavailable.
func (s *Store) Ping(ctx context.Context) error {
	_, err := s.lock(ctx)
	if err != nil {
		return err
	}
	s.mu.Unlock()
	return nil
}

// Close makes every later call fail with storage.ErrUnavailable.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

func cloneClient(c *storage.Client) *storage.Client {
	n := *c
	n.SecretHash = slices.Clone(c.SecretHash)
	n.RedirectURIs = slices.Clone(c.RedirectURIs)
	n.GrantTypes = slices.Clone(c.GrantTypes)
	n.ResponseTypes = slices.Clone(c.ResponseTypes)
	n.Scopes = slices.Clone(c.Scopes)
	n.Resources = slices.Clone(c.Resources)
	n.JWKS = slices.Clone(c.JWKS)
	n.Metadata = slices.Clone(c.Metadata)
	n.RegistrationTokenHash = slices.Clone(c.RegistrationTokenHash)
	return &n
}

// GetClient implements storage.ClientStore.
func (s *Store) GetClient(ctx context.Context, id string) (*storage.Client, error) {
	if _, err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	if !ok {
		return nil, storage.ErrNotFound
	}
	return cloneClient(c), nil
}

// CreateClient implements storage.ClientStore. A zero CreatedAt or UpdatedAt
// is stored as the current time.
func (s *Store) CreateClient(ctx context.Context, c *storage.Client) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.clients[c.ID]; ok {
		return storage.ErrAlreadyExists
	}
	n := cloneClient(c)
	now := time.Now()
	if n.CreatedAt.IsZero() {
		n.CreatedAt = now
	}
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = n.CreatedAt
	}
	put(t, s.clients, c.ID, n)
	return nil
}

// UpdateClient implements storage.ClientStore. update runs under the store's
// lock, so it must not call the store. The ID cannot be changed.
func (s *Store) UpdateClient(ctx context.Context, id string, update func(storage.Client) (storage.Client, error)) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	old, ok := s.clients[id]
	if !ok {
		return storage.ErrNotFound
	}
	n, err := update(*cloneClient(old))
	if err != nil {
		return err
	}
	nc := cloneClient(&n)
	nc.ID = id
	put(t, s.clients, id, nc)
	return nil
}

// DeleteClient implements storage.ClientStore.
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	ctx, done, err := s.afterTransactions(ctx)
	if err != nil {
		return err
	}
	defer done()
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if err := deleteEntry(t, s.clients, id); err != nil {
		return err
	}
	s.revokeLocked(t, storage.GrantFilter{ClientID: id})
	return nil
}

// TouchClient implements storage.ClientStore; ErrNotFound for an unknown id.
// A stored LastUsedAt within storage.TouchGranularity of at is kept.
func (s *Store) TouchClient(ctx context.Context, id string, at time.Time) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	old, ok := s.clients[id]
	if !ok {
		return storage.ErrNotFound
	}
	if !old.LastUsedAt.IsZero() && !old.LastUsedAt.Before(at.Add(-storage.TouchGranularity)) {
		return nil // recent enough (storage.TouchGranularity)
	}
	n := cloneClient(old)
	n.LastUsedAt = at
	put(t, s.clients, id, n)
	return nil
}

// CountClients implements storage.ClientStore.
func (s *Store) CountClients(ctx context.Context, source string) (int, error) {
	if _, err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.clients {
		if source == "" || c.Source == source {
			n++
		}
	}
	return n, nil
}

// ListClients implements storage.ClientStore.
func (s *Store) ListClients(ctx context.Context, afterID string, limit int) ([]storage.Client, error) {
	if _, err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := []storage.Client{}
	if limit <= 0 {
		return out, nil
	}
	for _, c := range s.clients {
		if c.ID > afterID {
			out = append(out, *cloneClient(c))
		}
	}
	slices.SortFunc(out, func(a, b storage.Client) int { return strings.Compare(a.ID, b.ID) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ReapClients implements storage.ClientStore. A limit <= 0 deletes nothing.
func (s *Store) ReapClients(ctx context.Context, neverUsedBefore, idleBefore time.Time, limit int) (int, error) {
	ctx, done, err := s.afterTransactions(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	t, err := s.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	var ids []string
	for id, c := range s.clients {
		if c.Source != "dcr" && c.Source != "cimd" {
			continue
		}
		if (c.LastUsedAt.IsZero() && c.CreatedAt.Before(neverUsedBefore)) ||
			(!c.LastUsedAt.IsZero() && c.LastUsedAt.Before(idleBefore)) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	if len(ids) > max(limit, 0) {
		ids = ids[:max(limit, 0)]
	}
	for _, id := range ids {
		del(t, s.clients, id)
		s.revokeLocked(t, storage.GrantFilter{ClientID: id})
	}
	return len(ids), nil
}

func cloneToken(t *storage.Token) *storage.Token {
	n := *t
	n.Data = slices.Clone(t.Data)
	return &n
}

// CreateToken implements storage.TokenStore.
func (s *Store) CreateToken(ctx context.Context, tok *storage.Token) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.tokens[tokenKey{tok.Kind, tok.Signature}]; ok {
		return storage.ErrAlreadyExists
	}
	n := cloneToken(tok)
	// A signature is often a slice of the whole token (the third segment
	// of a JWS): a copy of its own keeps the token's bytes from staying
	// alive with the record.
	n.Signature = strings.Clone(tok.Signature)
	put(t, s.tokens, tokenKey{n.Kind, n.Signature}, n)
	return nil
}

// GetToken implements storage.TokenStore.
func (s *Store) GetToken(ctx context.Context, kind storage.TokenKind, signature string) (*storage.Token, error) {
	if _, err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	tok, ok := s.tokens[tokenKey{kind, signature}]
	if !ok {
		return nil, storage.ErrNotFound
	}
	return cloneToken(tok), nil
}

// GetTokenWithPerson implements storage.TokenPersonReader.
func (s *Store) GetTokenWithPerson(ctx context.Context, kind storage.TokenKind, signature string) (*storage.Token, storage.PersonStatus, error) {
	if _, err := s.lock(ctx); err != nil {
		return nil, storage.PersonStatus{}, err
	}
	defer s.mu.Unlock()
	tok, ok := s.tokens[tokenKey{kind, signature}]
	if !ok {
		return nil, storage.PersonStatus{}, storage.ErrNotFound
	}
	var ps storage.PersonStatus
	if rec, ok := s.users[tok.Subject]; ok && tok.Subject != "" {
		ps = storage.PersonStatus{Recorded: true, Upstream: rec.Upstream, Disabled: rec.Disabled}
	}
	return cloneToken(tok), ps, nil
}

// DeactivateToken implements storage.TokenStore.
func (s *Store) DeactivateToken(ctx context.Context, kind storage.TokenKind, signature string) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	k := tokenKey{kind, signature}
	tok, ok := s.tokens[k]
	if !ok {
		return storage.ErrNotFound
	}
	if !tok.Active {
		return storage.ErrInactive
	}
	n := cloneToken(tok)
	n.Active = false
	put(t, s.tokens, k, n)
	return nil
}

// RotateToken implements storage.TokenStore.
func (s *Store) RotateToken(ctx context.Context, kind storage.TokenKind, signature string, now time.Time, grace time.Duration) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	k := tokenKey{kind, signature}
	tok, ok := s.tokens[k]
	if !ok {
		return storage.ErrNotFound
	}
	if !tok.Active {
		return storage.ErrInactive
	}
	if !tok.RotatedAt.IsZero() {
		if grace > 0 && !now.After(tok.RotatedAt.Add(grace)) {
			return nil
		}
		return storage.ErrInactive
	}
	n := cloneToken(tok)
	n.RotatedAt = now
	put(t, s.tokens, k, n)
	return nil
}

// RevokeTokens implements storage.TokenStore.
func (s *Store) RevokeTokens(ctx context.Context, kind storage.TokenKind, requestID string) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	for k, tok := range s.tokens {
		if k.kind == kind && tok.RequestID == requestID && tok.Active {
			s.deactivateLocked(t, k, tok)
		}
	}
	return nil
}

// deactivateLocked deactivates one token, journalled, and records its
// status index StatusInvalid until the token expires. Callers hold s.mu.
func (s *Store) deactivateLocked(t *tx, k tokenKey, tok *storage.Token) {
	n := cloneToken(tok)
	n.Active = false
	put(t, s.tokens, k, n)
	if tok.StatusIndex > 0 {
		if old, ok := s.statuses[tok.StatusIndex]; !ok || old.Before(tok.ExpiresAt) {
			put(t, s.statuses, tok.StatusIndex, tok.ExpiresAt)
		}
	}
}

func (f grantMatch) match(tok *storage.Token) bool {
	return (f.Subject == "" || tok.Subject == f.Subject) &&
		(f.ClientID == "" || tok.ClientID == f.ClientID) &&
		(f.RequestID == "" || tok.RequestID == f.RequestID)
}

type grantMatch storage.GrantFilter

// revokeLocked deactivates every token of the grants matching f (a grant
// matches when any of its codes and tokens does: an exchanged token of
// another client is in its grant) and returns how many grants had an
// active one. Callers hold s.mu.
func (s *Store) revokeLocked(t *tx, f storage.GrantFilter) int {
	grants := map[string]bool{}
	for _, tok := range s.tokens {
		if grantMatch(f).match(tok) {
			grants[tok.RequestID] = true
		}
	}
	revoked := map[string]bool{}
	for k, tok := range s.tokens {
		if tok.Active && grants[tok.RequestID] {
			s.deactivateLocked(t, k, tok)
			revoked[tok.RequestID] = true
		}
	}
	return len(revoked)
}

// ListGrants implements storage.GrantStore.
func (s *Store) ListGrants(ctx context.Context, f storage.GrantFilter, now time.Time, limit int) ([]storage.Grant, error) {
	if _, err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	byID := map[string]*storage.Grant{}
	live := map[string]bool{}
	for k, tok := range s.tokens {
		if !grantMatch(f).match(tok) {
			continue
		}
		g := byID[tok.RequestID]
		if g == nil {
			g = &storage.Grant{RequestID: tok.RequestID, Subject: tok.Subject, ClientID: tok.ClientID, CreatedAt: tok.CreatedAt}
			byID[tok.RequestID] = g
		}
		if tok.CreatedAt.Before(g.CreatedAt) {
			g.CreatedAt = tok.CreatedAt
		}
		if tok.CreatedAt.After(g.LastUsedAt) {
			g.LastUsedAt = tok.CreatedAt
		}
		if tok.ExpiresAt.After(g.ExpiresAt) {
			g.ExpiresAt = tok.ExpiresAt
		}
		g.StatusIndex = max(g.StatusIndex, tok.StatusIndex)
		if tok.Active && (k.kind == storage.KindAccessToken || k.kind == storage.KindRefreshToken) && now.Before(tok.ExpiresAt) {
			live[tok.RequestID] = true
		}
	}
	var out []storage.Grant
	for id, g := range byID {
		if live[id] {
			out = append(out, *g)
		}
	}
	sortGrants(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// sortGrants orders newest LastUsedAt first, then by request id.
func sortGrants(gs []storage.Grant) {
	slices.SortFunc(gs, func(a, b storage.Grant) int {
		if c := b.LastUsedAt.Compare(a.LastUsedAt); c != 0 {
			return c
		}
		return strings.Compare(a.RequestID, b.RequestID)
	})
}

// RevokeGrants implements storage.GrantStore.
func (s *Store) RevokeGrants(ctx context.Context, f storage.GrantFilter) (int, error) {
	if f.IsZero() {
		return 0, storage.ErrInvalidFilter
	}
	ctx, done, err := s.afterTransactions(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	t, err := s.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	n := s.revokeLocked(t, f)
	if f.RequestID == "" {
		for k := range s.consents {
			if (f.Subject == "" || k.subject == f.Subject) && (f.ClientID == "" || k.clientID == f.ClientID) {
				del(t, s.consents, k)
			}
		}
	}
	return n, nil
}

// AllocateStatusIndices implements storage.StatusStore.
func (s *Store) AllocateStatusIndices(ctx context.Context, n int) (int64, error) {
	if n < 1 {
		return 0, errors.New("memory: AllocateStatusIndices needs n >= 1")
	}
	// Not journalled: a reservation is final even when a transaction in
	// ctx rolls back, so an index is never handed out twice.
	if _, err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	first := s.statusLast + 1
	s.statusLast += int64(n)
	return first, nil
}

// StatusList implements storage.StatusStore.
func (s *Store) StatusList(ctx context.Context, now time.Time) (int64, []int64, error) {
	if _, err := s.lock(ctx); err != nil {
		return 0, nil, err
	}
	defer s.mu.Unlock()
	var out []int64
	for idx, exp := range s.statuses {
		if exp.IsZero() || !exp.Before(now) {
			out = append(out, idx)
		}
	}
	slices.Sort(out)
	return s.statusLast, out, nil
}

// DeleteExpiredStatuses implements storage.StatusStore. A limit <= 0
// deletes nothing.
func (s *Store) DeleteExpiredStatuses(ctx context.Context, before time.Time, limit int) (int, error) {
	t, err := s.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	return deleteExpired(t, s.statuses, limit, func(exp time.Time) bool {
		return !exp.IsZero() && exp.Before(before)
	}), nil
}

// DeleteToken implements storage.TokenStore.
func (s *Store) DeleteToken(ctx context.Context, kind storage.TokenKind, signature string) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	return deleteEntry(t, s.tokens, tokenKey{kind, signature})
}

// DeleteExpiredTokens implements storage.TokenStore. Records with a zero
// ExpiresAt never expire. A limit <= 0 deletes nothing.
func (s *Store) DeleteExpiredTokens(ctx context.Context, before time.Time, limit int) (int, error) {
	t, err := s.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	return deleteExpired(t, s.tokens, limit, func(tok *storage.Token) bool {
		return !tok.ExpiresAt.IsZero() && tok.ExpiresAt.Before(before)
	}), nil
}

func cloneConsent(c *storage.Consent) *storage.Consent {
	n := *c
	n.Scopes = slices.Clone(c.Scopes)
	n.RedirectURIs = slices.Clone(c.RedirectURIs)
	return &n
}

// GetConsent implements storage.ConsentStore.
func (s *Store) GetConsent(ctx context.Context, subject, clientID, resource string) (*storage.Consent, error) {
	if _, err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	c, ok := s.consents[consentKey{subject, clientID, resource}]
	if !ok {
		return nil, storage.ErrNotFound
	}
	return cloneConsent(c), nil
}

// PutConsent implements storage.ConsentStore.
func (s *Store) PutConsent(ctx context.Context, c *storage.Consent) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	k := consentKey{c.Subject, c.ClientID, c.Resource}
	put(t, s.consents, k, cloneConsent(c))
	return nil
}

// DeleteConsents implements storage.ConsentStore.
func (s *Store) DeleteConsents(ctx context.Context, subject, clientID string) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	for k := range s.consents {
		if k.subject == subject && (clientID == "" || k.clientID == clientID) {
			del(t, s.consents, k)
		}
	}
	return nil
}

// ListConsents implements storage.ConsentStore, ordered by client id then
// resource.
func (s *Store) ListConsents(ctx context.Context, subject string) ([]storage.Consent, error) {
	if _, err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []storage.Consent
	for k, c := range s.consents {
		if k.subject == subject {
			out = append(out, *cloneConsent(c))
		}
	}
	slices.SortFunc(out, func(a, b storage.Consent) int {
		if c := strings.Compare(a.ClientID, b.ClientID); c != 0 {
			return c
		}
		return strings.Compare(a.Resource, b.Resource)
	})
	return out, nil
}

// DeleteExpiredConsents implements storage.ConsentStore. A limit <= 0
// deletes nothing.
func (s *Store) DeleteExpiredConsents(ctx context.Context, before time.Time, limit int) (int, error) {
	t, err := s.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	return deleteExpired(t, s.consents, limit, func(c *storage.Consent) bool {
		return !c.ExpiresAt.IsZero() && c.ExpiresAt.Before(before)
	}), nil
}

func cloneKey(k *storage.SigningKey) *storage.SigningKey {
	n := *k
	n.PublicJWK = slices.Clone(k.PublicJWK)
	n.PrivateSealed = slices.Clone(k.PrivateSealed)
	return &n
}

// ListKeys implements storage.KeyStore: newest CreatedAt first, ties by ID
// descending.
func (s *Store) ListKeys(ctx context.Context) ([]storage.SigningKey, error) {
	if _, err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make([]storage.SigningKey, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, *cloneKey(k))
	}
	slices.SortFunc(out, func(a, b storage.SigningKey) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out, nil
}

// CreateKey implements storage.KeyStore.
func (s *Store) CreateKey(ctx context.Context, k *storage.SigningKey) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.keys[k.ID]; ok {
		return storage.ErrAlreadyExists
	}
	put(t, s.keys, k.ID, cloneKey(k))
	return nil
}

// RetireKeys implements storage.KeyStore.
func (s *Store) RetireKeys(ctx context.Context, keepID string, at time.Time) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	for id, k := range s.keys {
		if id != keepID && k.RetiredAt.IsZero() {
			n := cloneKey(k)
			n.RetiredAt = at
			put(t, s.keys, id, n)
		}
	}
	return nil
}

// DeleteKey implements storage.KeyStore.
func (s *Store) DeleteKey(ctx context.Context, id string) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	return deleteEntry(t, s.keys, id)
}

// UseJTI implements storage.JTIStore. An id whose earlier record has expired
// (by the wall clock) may be used again.
func (s *Store) UseJTI(ctx context.Context, id string, expiresAt time.Time) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if exp, ok := s.jtis[id]; ok && exp.After(time.Now()) {
		return storage.ErrAlreadyUsed
	}
	put(t, s.jtis, id, expiresAt)
	return nil
}

// DeleteExpiredJTIs implements storage.JTIStore. A limit <= 0 deletes nothing.
func (s *Store) DeleteExpiredJTIs(ctx context.Context, before time.Time, limit int) (int, error) {
	t, err := s.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	return deleteExpired(t, s.jtis, limit, func(exp time.Time) bool { return exp.Before(before) }), nil
}

// maxCounters bounds the counters map under a spray of distinct keys; when
// it is reached, expired counters are dropped before a new one is added.
const maxCounters = 200_000

// UpdateCounters implements storage.CounterStore. update runs with the data
// lock held, so it must not call the store.
func (s *Store) UpdateCounters(ctx context.Context, keys []string, now time.Time, update func([]storage.Counter) ([]storage.Counter, error)) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	in := make([]storage.Counter, len(keys))
	for i, k := range keys {
		in[i] = storage.Counter{Key: k}
		if c, ok := s.counters[k]; ok && c.ExpiresAt.After(now) {
			in[i] = *c
		}
	}
	out, err := update(slices.Clone(in))
	if err != nil {
		return err
	}
	if len(out) != len(keys) {
		return errors.New("memory: UpdateCounters: update returned the wrong number of counters")
	}
	if len(s.counters) >= maxCounters {
		deleteExpired(t, s.counters, len(s.counters), func(c *storage.Counter) bool { return !c.ExpiresAt.After(now) })
	}
	for i, k := range keys {
		c := out[i]
		c.Key = k
		if c.ExpiresAt.IsZero() {
			del(t, s.counters, k)
			continue
		}
		put(t, s.counters, k, &c)
	}
	return nil
}

// DeleteExpiredCounters implements storage.CounterStore.
func (s *Store) DeleteExpiredCounters(ctx context.Context, before time.Time, limit int) (int, error) {
	t, err := s.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	return deleteExpired(t, s.counters, limit, func(c *storage.Counter) bool { return c.ExpiresAt.Before(before) }), nil
}

// CreateSession implements storage.SessionStore.
func (s *Store) CreateSession(ctx context.Context, sess *storage.Session) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.sessions[sess.ID]; ok {
		return storage.ErrAlreadyExists
	}
	n := *sess
	put(t, s.sessions, sess.ID, &n)
	return nil
}

// GetSession implements storage.SessionStore.
func (s *Store) GetSession(ctx context.Context, id string) (*storage.Session, error) {
	if _, err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	if !ok {
		return nil, storage.ErrNotFound
	}
	n := *sess
	return &n, nil
}

// TouchSession implements storage.SessionStore.
func (s *Store) TouchSession(ctx context.Context, id string, lastSeen, idleExpiresAt time.Time) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	if !ok {
		return storage.ErrNotFound
	}
	n := *sess
	n.LastSeenAt, n.IdleExpiresAt = lastSeen, idleExpiresAt
	put(t, s.sessions, id, &n)
	return nil
}

// ListSessions implements storage.SessionStore, newest first.
func (s *Store) ListSessions(ctx context.Context, subject string) ([]storage.Session, error) {
	if _, err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []storage.Session
	for _, sess := range s.sessions {
		if sess.Subject == subject {
			out = append(out, *sess)
		}
	}
	slices.SortFunc(out, func(a, b storage.Session) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// DeleteSession implements storage.SessionStore.
func (s *Store) DeleteSession(ctx context.Context, subject, id string) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if sess, ok := s.sessions[id]; ok && (subject == "" || sess.Subject == subject) {
		del(t, s.sessions, id)
	}
	return nil
}

// DeleteExpiredSessions implements storage.SessionStore.
func (s *Store) DeleteExpiredSessions(ctx context.Context, before time.Time, limit int) (int, error) {
	t, err := s.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	return deleteExpired(t, s.sessions, limit, func(sess *storage.Session) bool {
		return sess.ExpiresAt.Before(before) || sess.IdleExpiresAt.Before(before)
	}), nil
}

func cloneUser(u *storage.User) *storage.User {
	n := *u
	n.Groups = slices.Clone(u.Groups)
	n.Claims = cloneClaims(u.Claims)
	n.UpstreamRefresh = slices.Clone(u.UpstreamRefresh)
	return &n
}

// cloneClaims copies m, returning nil for an empty map.
func cloneClaims(m map[string][]string) map[string][]string {
	if len(m) == 0 {
		return nil
	}
	n := make(map[string][]string, len(m))
	for k, v := range m {
		n[k] = slices.Clone(v)
	}
	return n
}

// RecordLogin implements storage.UserStore.
func (s *Store) RecordLogin(ctx context.Context, u *storage.User) (*storage.User, error) {
	t, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	n := cloneUser(u)
	if n.LastSeen.IsZero() {
		n.LastSeen = time.Now()
	}
	n.FirstSeen, n.Disabled = n.LastSeen, false
	if old, ok := s.users[u.Subject]; ok {
		if !old.FirstSeen.IsZero() {
			n.FirstSeen = old.FirstSeen
		}
		n.Disabled = old.Disabled
		if len(n.UpstreamRefresh) == 0 {
			n.UpstreamRefresh = slices.Clone(old.UpstreamRefresh)
		}
		if n.CheckedAt.IsZero() {
			n.CheckedAt = old.CheckedAt
		}
	}
	if len(n.UpstreamRefresh) == 0 {
		n.UpstreamRefresh = nil
	}
	if len(n.Groups) == 0 {
		n.Groups = nil
	}
	put(t, s.users, u.Subject, n)
	return cloneUser(n), nil
}

// GetUser implements storage.UserStore.
func (s *Store) GetUser(ctx context.Context, subject string) (*storage.User, error) {
	if _, err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	u, ok := s.users[subject]
	if !ok {
		return nil, storage.ErrNotFound
	}
	return cloneUser(u), nil
}

// ListUsers implements storage.UserStore.
func (s *Store) ListUsers(ctx context.Context, afterSubject string, limit int) ([]storage.User, error) {
	if _, err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := []storage.User{}
	if limit <= 0 {
		return out, nil
	}
	for _, u := range s.users {
		if u.Subject > afterSubject {
			out = append(out, *cloneUser(u))
		}
	}
	slices.SortFunc(out, func(a, b storage.User) int { return strings.Compare(a.Subject, b.Subject) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// SetUserDisabled implements storage.UserStore.
func (s *Store) SetUserDisabled(ctx context.Context, subject string, disabled bool) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	n := &storage.User{Subject: subject}
	if old, ok := s.users[subject]; ok {
		n = cloneUser(old)
	}
	n.Disabled = disabled
	put(t, s.users, subject, n)
	return nil
}

// UpdateUpstreamSession implements storage.UserStore.
func (s *Store) UpdateUpstreamSession(ctx context.Context, subject string, sealedRefresh []byte, checkedAt time.Time, groups []string, claims map[string][]string) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	old, ok := s.users[subject]
	if !ok {
		return storage.ErrNotFound
	}
	n := cloneUser(old)
	if len(sealedRefresh) > 0 {
		n.UpstreamRefresh = slices.Clone(sealedRefresh)
	}
	n.CheckedAt = checkedAt
	n.Groups = nil
	if len(groups) > 0 {
		n.Groups = slices.Clone(groups)
	}
	n.Claims = cloneClaims(claims)
	put(t, s.users, subject, n)
	return nil
}

func cloneApproval(a *storage.Approval) *storage.Approval {
	n := *a
	n.Arguments = slices.Clone(a.Arguments)
	return &n
}

// CreateApproval implements storage.ApprovalStore.
func (s *Store) CreateApproval(ctx context.Context, a *storage.Approval) (*storage.Approval, error) {
	t, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if _, ok := s.approvals[a.ID]; ok {
		return nil, storage.ErrAlreadyExists
	}
	for _, x := range s.approvals {
		if x.ApprovalBinding == a.ApprovalBinding && x.Status == storage.ApprovalPending && x.Live(a.CreatedAt) {
			return cloneApproval(x), nil
		}
	}
	n := cloneApproval(a)
	n.Status = storage.ApprovalPending
	n.DecidedAt, n.UsedAt = time.Time{}, time.Time{}
	put(t, s.approvals, n.ID, n)
	return cloneApproval(n), nil
}

// GetApproval implements storage.ApprovalStore.
func (s *Store) GetApproval(ctx context.Context, id string) (*storage.Approval, error) {
	if _, err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	a, ok := s.approvals[id]
	if !ok {
		return nil, storage.ErrNotFound
	}
	return cloneApproval(a), nil
}

// DecideApproval implements storage.ApprovalStore.
func (s *Store) DecideApproval(ctx context.Context, id, subject string, approve bool, now time.Time) (*storage.Approval, error) {
	t, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	a, ok := s.approvals[id]
	if !ok || a.Subject != subject {
		return nil, storage.ErrNotFound
	}
	if a.Status != storage.ApprovalPending || !a.Live(now) {
		return nil, storage.ErrInactive
	}
	n := cloneApproval(a)
	n.Status, n.DecidedAt = storage.ApprovalDenied, now
	if approve {
		n.Status = storage.ApprovalApproved
	}
	put(t, s.approvals, id, n)
	return cloneApproval(n), nil
}

// UseApproval implements storage.ApprovalStore.
func (s *Store) UseApproval(ctx context.Context, b storage.ApprovalBinding, now time.Time) (*storage.Approval, error) {
	t, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var found *storage.Approval
	for _, a := range s.approvals {
		if a.ApprovalBinding != b || !a.UsedAt.IsZero() || !a.Live(now) ||
			(a.Status != storage.ApprovalApproved && a.Status != storage.ApprovalDenied) {
			continue
		}
		if found == nil || a.CreatedAt.Before(found.CreatedAt) || a.CreatedAt.Equal(found.CreatedAt) && a.ID < found.ID {
			found = a
		}
	}
	if found == nil {
		return nil, storage.ErrNotFound
	}
	n := cloneApproval(found)
	n.UsedAt = now
	if n.Status == storage.ApprovalApproved {
		n.Status = storage.ApprovalUsed
	}
	put(t, s.approvals, n.ID, n)
	return cloneApproval(n), nil
}

// ListApprovals implements storage.ApprovalStore.
func (s *Store) ListApprovals(ctx context.Context, subject, afterID string, limit int) ([]storage.Approval, error) {
	if _, err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := []storage.Approval{}
	if limit <= 0 {
		return out, nil
	}
	for _, a := range s.approvals {
		if (subject == "" || a.Subject == subject) && a.ID > afterID {
			out = append(out, *cloneApproval(a))
		}
	}
	slices.SortFunc(out, func(a, b storage.Approval) int { return strings.Compare(a.ID, b.ID) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// DeleteApproval implements storage.ApprovalStore.
func (s *Store) DeleteApproval(ctx context.Context, subject, id string) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if a, ok := s.approvals[id]; !ok || (subject != "" && a.Subject != subject) {
		return storage.ErrNotFound
	}
	del(t, s.approvals, id)
	return nil
}

// DeleteExpiredApprovals implements storage.ApprovalStore.
func (s *Store) DeleteExpiredApprovals(ctx context.Context, before time.Time, limit int) (int, error) {
	t, err := s.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	return deleteExpired(t, s.approvals, limit, func(a *storage.Approval) bool { return a.ExpiresAt.Before(before) }), nil
}
