package as

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ory/fosite"
	foauth2 "github.com/ory/fosite/handler/oauth2"
	"github.com/ory/fosite/handler/pkce"
	fstorage "github.com/ory/fosite/storage"

	"github.com/mcpauth/mcpauth/internal/seal"
	"github.com/mcpauth/mcpauth/storage"
)

// tokenStore adapts storage.TokenStore to fosite's storage interfaces. Each
// requester is serialised to JSON and sealed with the record's signature as
// associated data, so a payload copied to another row does not open.
type tokenStore struct {
	store   storage.Store
	sealer  *seal.Sealer
	clients *clientManager
	now     func() time.Time
	grace   time.Duration
	log     logger
	// revoked is called after tokens were revoked (the status list changed).
	revoked func()

	// decoded caches opened and decoded payloads for introspection and
	// token exchange (the subject token), which only read them. A record's payload never changes after creation, so
	// entries never go stale; Active and RotatedAt always come fresh from
	// storage.
	decodedMu sync.RWMutex
	decoded   map[string]*storedRequest
}

// decodedCacheLimit bounds the introspection cache; it is cleared when full.
const decodedCacheLimit = 50000

// loadShared is load for read-only callers: the returned storedRequest may
// be shared and must not be modified.
func (s *tokenStore) loadShared(ctx context.Context, kind storage.TokenKind, sig string) (*storage.Token, *storedRequest, error) {
	key := string(kind) + ":" + sig
	s.decodedMu.RLock()
	sr := s.decoded[key]
	s.decodedMu.RUnlock()
	if sr != nil {
		t, err := s.getToken(ctx, kind, sig)
		if err != nil {
			return nil, nil, mapStoreErr(err)
		}
		return t, sr, nil
	}
	t, sr, err := s.load(ctx, kind, sig)
	if err != nil {
		return nil, nil, err
	}
	s.decodedMu.Lock()
	if s.decoded == nil || len(s.decoded) >= decodedCacheLimit {
		s.decoded = map[string]*storedRequest{}
	}
	s.decoded[key] = sr
	s.decodedMu.Unlock()
	return t, sr, nil
}

var (
	_ foauth2.CoreStorage            = (*tokenStore)(nil)
	_ foauth2.TokenRevocationStorage = (*tokenStore)(nil)
	_ pkce.PKCERequestStorage        = (*tokenStore)(nil)
	_ fstorage.Transactional         = (*tokenStore)(nil)
)

// errSealed is returned when a stored payload does not open: the record was
// altered or copied. It is treated as not found.
var errSealed = errors.New("as: stored token payload does not open")

func (s *tokenStore) create(ctx context.Context, kind storage.TokenKind, sig string, r fosite.Requester, exp time.Time, accessSig string) error {
	sr := toStored(r)
	sr.AccessSignature = accessSig
	if kind == storage.KindAuthorizeCode {
		sr.PKCE = pkceFrom(ctx)
	}
	if m := redemptionFrom(ctx); kind == storage.KindRefreshToken && m != nil {
		// Issued by rotating m.rotated: that token is this one's parent.
		sr.Parent = m.rotated
	}
	raw, err := sr.marshal()
	if err != nil {
		return err
	}
	subject := ""
	var statusIdx int64
	if sr.Session != nil {
		subject = sr.Session.Subject
		statusIdx = sr.Session.StatusIdx
	}
	now := s.now()
	if exp.IsZero() {
		exp = now.Add(24 * time.Hour)
	}
	return mapStoreErr(s.store.CreateToken(ctx, &storage.Token{
		Kind:        kind,
		Signature:   sig,
		RequestID:   r.GetID(),
		ClientID:    sr.ClientID,
		Subject:     subject,
		Active:      true,
		CreatedAt:   now,
		ExpiresAt:   exp,
		Data:        s.sealer.Seal(raw, []byte(sig)),
		StatusIndex: statusIdx,
	}))
}

// getToken reads a token record. Within a request that carries a memo
// (withRedemption) and on a backend that can (storage.TokenPersonReader),
// it reads the status of the token's person in the same statement and
// remembers it for personActive.
func (s *tokenStore) getToken(ctx context.Context, kind storage.TokenKind, sig string) (*storage.Token, error) {
	if r, ok := s.store.(storage.TokenPersonReader); ok && redemptionFrom(ctx) != nil {
		t, ps, err := r.GetTokenWithPerson(ctx, kind, sig)
		if err == nil {
			rememberPerson(ctx, t.Subject, ps)
		}
		return t, err
	}
	return s.store.GetToken(ctx, kind, sig)
}

// load reads a record and rebuilds its requester. The returned token is the
// raw record (for Active and RotatedAt).
func (s *tokenStore) load(ctx context.Context, kind storage.TokenKind, sig string) (*storage.Token, *storedRequest, error) {
	t, err := s.getToken(ctx, kind, sig)
	if err != nil {
		return nil, nil, mapStoreErr(err)
	}
	raw, err := s.sealer.Open(t.Data, []byte(sig))
	if err != nil {
		s.log.error(ctx, "token payload does not open", "kind", string(kind), "err", err)
		return nil, nil, fosite.ErrNotFound.WithWrap(errSealed)
	}
	var sr storedRequest
	if err := json.Unmarshal(raw, &sr); err != nil {
		return nil, nil, fosite.ErrNotFound.WithWrap(err)
	}
	return t, &sr, nil
}

func (s *tokenStore) requester(ctx context.Context, sr *storedRequest) (fosite.Requester, error) {
	c, err := s.clients.GetClient(ctx, sr.ClientID)
	if err != nil {
		return nil, err
	}
	return sr.toRequest(c), nil
}

func (s *tokenStore) get(ctx context.Context, kind storage.TokenKind, sig string, inactiveErr error) (fosite.Requester, error) {
	t, sr, err := s.load(ctx, kind, sig)
	if err != nil {
		return nil, err
	}
	req, err := s.requester(ctx, sr)
	if err != nil {
		return nil, err
	}
	if !t.Active {
		return req, inactiveErr
	}
	return req, nil
}

// mapStoreErr turns storage sentinels into fosite's.
func mapStoreErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, storage.ErrNotFound):
		return fosite.ErrNotFound.WithWrap(err)
	case errors.Is(err, storage.ErrInactive):
		return fosite.ErrInactiveToken.WithWrap(err)
	case errors.Is(err, storage.ErrUnavailable):
		return fosite.ErrTemporarilyUnavailable.WithWrap(err)
	}
	return err
}

// Authorization codes.

func (s *tokenStore) CreateAuthorizeCodeSession(ctx context.Context, sig string, r fosite.Requester) error {
	return s.create(ctx, storage.KindAuthorizeCode, sig, r, r.GetSession().GetExpiresAt(fosite.AuthorizeCode), "")
}

// GetAuthorizeCodeSession returns fosite.ErrInvalidatedAuthorizeCode together
// with the requester for a redeemed code, so the code grant revokes what the
// first redemption issued (RFC 6749 §4.1.2).
//
// The stored session is copied into into (fosite's "hydration"): fosite
// checks the code's expiry on the token request's session right after this
// call, and an empty session there would let an expired code through to a
// later check that answers invalid_request instead of invalid_grant.
//
// Within one token request (withRedemption) the record read first is
// remembered: fosite reads the code again in PopulateTokenEndpointResponse,
// and that read is answered from memory, without a SELECT. It changes
// nothing about exclusivity, which InvalidateAuthorizeCodeSession decides.
func (s *tokenStore) GetAuthorizeCodeSession(ctx context.Context, sig string, into fosite.Session) (fosite.Requester, error) {
	var req fosite.Requester
	var err error
	if m := remembered(ctx, sig); m != nil {
		req = m.req
	} else {
		req, err = s.readCode(ctx, sig)
	}
	if req != nil {
		if dst, ok := into.(*session); ok && dst != nil {
			if src, ok := req.GetSession().(*session); ok && src != nil {
				*dst = *src.Clone().(*session)
			}
		}
	}
	if errors.Is(err, fosite.ErrInvalidatedAuthorizeCode) && req != nil {
		s.log.audit(ctx, "code.replayed", "client_id", req.GetClient().GetID(), "sub", req.GetSession().GetSubject(), "grant", req.GetID())
		s.revokeGrant(ctx, req.GetID())
	}
	return req, err
}

// readCode reads a code record and rebuilds its requester; an inactive code
// comes with fosite.ErrInvalidatedAuthorizeCode. An active one is
// remembered when ctx carries a redemption memo.
func (s *tokenStore) readCode(ctx context.Context, sig string) (fosite.Requester, error) {
	t, sr, err := s.load(ctx, storage.KindAuthorizeCode, sig)
	if err != nil {
		return nil, err
	}
	req, err := s.requester(ctx, sr)
	if err != nil {
		return nil, err
	}
	if !t.Active {
		return req, fosite.ErrInvalidatedAuthorizeCode
	}
	if m := redemptionFrom(ctx); m != nil {
		// The person's record read with this code stays remembered.
		*m = redemption{sig: sig, tok: t, sr: sr, req: req, personSubject: m.personSubject, person: m.person, personRead: m.personRead}
	}
	return req, nil
}

// revokeGrant revokes every refresh and access token of a grant (the
// family sharing requestID; the presented refresh token is one of them).
// It is the answer to a code presented again (RFC 6749 §4.1.2) or a refresh
// token reused (RFC 9700 §4.14.2), and runs in a transaction of its own for
// two reasons. A backend
// whose open transactions are visible to others (storage/memory) lets a
// concurrent redemption see the code already redeemed while the winner has
// not yet written its tokens; beginning a transaction waits for the
// winner's to end, so its tokens exist when they are revoked here. And the
// statements lock the same rows in the same order as fosite's reuse
// handling (refresh tokens by request ID, then access tokens), so two
// revocations of one family wait for each other instead of deadlocking.
//
// Errors are logged, not returned: the request that found the replay is
// refused with invalid_grant either way, and fosite revokes again after
// this for codes.
func (s *tokenStore) revokeGrant(ctx context.Context, requestID string) {
	if requestID == "" {
		return
	}
	tctx, err := s.BeginTX(ctx)
	if err != nil {
		s.log.error(ctx, "revoking a grant: begin", "err", err)
		return
	}
	err = func() error {
		if err := s.RevokeRefreshToken(tctx, requestID); err != nil {
			return err
		}
		return s.store.RevokeTokens(tctx, storage.KindAccessToken, requestID)
	}()
	if err != nil {
		if rerr := s.store.Rollback(tctx); rerr != nil {
			s.log.error(ctx, "revoking a grant: rollback", "err", rerr)
		}
		s.log.error(ctx, "revoking a grant", "err", err)
		return
	}
	if err := s.Commit(tctx); err != nil {
		s.log.error(ctx, "revoking a grant: commit", "err", err)
	}
}

// InvalidateAuthorizeCodeSession redeems the code exactly once: of concurrent
// redemptions only one succeeds, the others fail with errCodeRace.
func (s *tokenStore) InvalidateAuthorizeCodeSession(ctx context.Context, sig string) error {
	err := s.store.DeactivateToken(ctx, storage.KindAuthorizeCode, sig)
	if errors.Is(err, storage.ErrInactive) {
		return errCodeRace
	}
	return mapStoreErr(err)
}

// errCodeRace marks a code redeemed concurrently by another request; the
// token endpoint answers invalid_grant.
var errCodeRace = errors.New("as: authorization code already redeemed")

// PKCE.
//
// The challenge of a code issued through serveAuthorize lives in the code's
// own record (storedRequest.PKCE), which saves a record written at the
// authorization endpoint and a read and a delete (with a commit of its own)
// at redemption. Code records written before that have a KindPKCE record of
// their own, still served here until they expire.

// CreatePKCERequestSession writes nothing when the code record already
// carries the challenge (ctx from issueCode, reqState.pkce).
func (s *tokenStore) CreatePKCERequestSession(ctx context.Context, sig string, r fosite.Requester) error {
	if pkceFrom(ctx) != nil {
		return nil
	}
	return s.create(ctx, storage.KindPKCE, sig, r, r.GetSession().GetExpiresAt(fosite.AuthorizeCode), "")
}

// GetPKCERequestSession returns the challenge of the code with signature
// sig, from the code record read earlier in the request when there is one
// (redemption), and fosite.ErrNotFound for a code that is missing or no
// longer active: a redeemed code has no challenge left to verify. A code
// found inactive here was redeemed (or burned) after a check of the same
// request saw it active, so it was presented again: as for any replay, what
// it issued is revoked (RFC 6749 §4.1.2) before fosite answers
// invalid_grant.
func (s *tokenStore) GetPKCERequestSession(ctx context.Context, sig string, _ fosite.Session) (fosite.Requester, error) {
	var t *storage.Token
	var sr *storedRequest
	var c fosite.Client
	if m := remembered(ctx, sig); m != nil {
		t, sr, c = m.tok, m.sr, m.req.GetClient()
	} else {
		var err error
		if t, sr, err = s.load(ctx, storage.KindAuthorizeCode, sig); err != nil {
			return nil, err
		}
	}
	if sr.PKCE == nil {
		return s.getSeparatePKCE(ctx, sig)
	}
	if !t.Active {
		s.log.audit(ctx, "code.replayed", "client_id", t.ClientID, "sub", t.Subject, "grant", t.RequestID)
		s.revokeGrant(ctx, t.RequestID)
		return nil, fosite.ErrNotFound
	}
	if c == nil {
		var err error
		if c, err = s.clients.GetClient(ctx, sr.ClientID); err != nil {
			return nil, err
		}
	}
	return &fosite.Request{
		ID:          sr.ID,
		RequestedAt: sr.RequestedAt,
		Client:      c,
		Form:        url.Values{"code_challenge": {sr.PKCE.Challenge}, "code_challenge_method": {sr.PKCE.Method}},
		Session:     sr.Session,
	}, nil
}

// getSeparatePKCE reads the KindPKCE record of a code written before the
// challenge moved into the code record. That record goes when its code is
// redeemed (or burned by a failed verification), so a missing record of a
// code that is no longer active means the code was presented again: what
// it issued is revoked, as in GetPKCERequestSession.
func (s *tokenStore) getSeparatePKCE(ctx context.Context, sig string) (fosite.Requester, error) {
	req, err := s.get(ctx, storage.KindPKCE, sig, fosite.ErrNotFound)
	if errors.Is(err, fosite.ErrNotFound) {
		if t, gerr := s.store.GetToken(ctx, storage.KindAuthorizeCode, sig); gerr == nil && !t.Active {
			s.log.audit(ctx, "code.replayed", "client_id", t.ClientID, "sub", t.Subject, "grant", t.RequestID)
			s.revokeGrant(ctx, t.RequestID)
		}
		return nil, err
	}
	return req, err
}

// DeletePKCERequestSession is called by fosite's PKCE handler before the
// code is redeemed. Deleting there would make the PKCE record, not the code,
// the point where concurrent redemptions part, and the losers would fail
// without revoking what the winner issued. So it does nothing: a separate
// PKCE record is deleted after a successful redemption (codeRace) or
// expires with the code, and a failed verification burns the code
// (pkceGate).
func (s *tokenStore) DeletePKCERequestSession(context.Context, string) error { return nil }

// deletePKCE deletes the separate PKCE record of a code, unless the code
// record read in this request carries the challenge itself (then there is
// none).
func (s *tokenStore) deletePKCE(ctx context.Context, sig string) {
	if m := remembered(ctx, sig); m != nil && m.sr.PKCE != nil {
		return
	}
	if err := s.store.DeleteToken(ctx, storage.KindPKCE, sig); err != nil && !errors.Is(err, storage.ErrNotFound) {
		s.log.error(ctx, "deleting PKCE record", "err", err)
	}
}

// Access tokens.

func (s *tokenStore) CreateAccessTokenSession(ctx context.Context, sig string, r fosite.Requester) error {
	return s.create(ctx, storage.KindAccessToken, sig, r, r.GetSession().GetExpiresAt(fosite.AccessToken), "")
}

func (s *tokenStore) GetAccessTokenSession(ctx context.Context, sig string, _ fosite.Session) (fosite.Requester, error) {
	return s.get(ctx, storage.KindAccessToken, sig, fosite.ErrInactiveToken)
}

func (s *tokenStore) DeleteAccessTokenSession(ctx context.Context, sig string) error {
	err := mapStoreErr(s.store.DeactivateToken(ctx, storage.KindAccessToken, sig))
	if errors.Is(err, fosite.ErrInactiveToken) {
		return nil
	}
	return err
}

func (s *tokenStore) RevokeAccessToken(ctx context.Context, requestID string) error {
	err := mapStoreErr(s.store.RevokeTokens(ctx, storage.KindAccessToken, requestID))
	s.notifyRevoked(ctx)
	return err
}

// notifyRevoked tells the status list that tokens were revoked. Inside a
// transaction begun by BeginTX it is told again after the commit: a list
// rebuilt between the revocation and the commit could not see it.
func (s *tokenStore) notifyRevoked(ctx context.Context) {
	if st := reqStateFrom(ctx); st != nil && st.revoked != nil {
		st.revoked.Store(true)
	}
	if s.revoked != nil {
		s.revoked()
	}
}

// Refresh tokens.

func (s *tokenStore) CreateRefreshTokenSession(ctx context.Context, sig, accessSig string, r fosite.Requester) error {
	return s.create(ctx, storage.KindRefreshToken, sig, r, r.GetSession().GetExpiresAt(fosite.RefreshToken), accessSig)
}

// GetRefreshTokenSession returns the requester together with
// fosite.ErrInactiveToken for a revoked token or one rotated longer than the
// grace window ago, which makes fosite revoke the family (RFC 9700 §4.14.2).
// A token rotated within the grace window is still answered as active, so
// two racing refreshes both succeed.
func (s *tokenStore) GetRefreshTokenSession(ctx context.Context, sig string, _ fosite.Session) (fosite.Requester, error) {
	t, sr, err := s.load(ctx, storage.KindRefreshToken, sig)
	if err != nil {
		return nil, err
	}
	req, err := s.requester(ctx, sr)
	if err != nil {
		return nil, err
	}
	if !t.Active || s.rotatedOut(t, s.now()) {
		// fosite revokes the family on this answer.
		s.log.audit(ctx, "refresh.reused", "client_id", t.ClientID, "sub", t.Subject, "grant", t.RequestID)
		return req, fosite.ErrInactiveToken
	}
	if m := redemptionFrom(ctx); m != nil {
		m.refreshSig, m.refreshParent = sig, sr.Parent
	}
	return req, nil
}

// rotatedOut reports whether the refresh token record t was rotated longer
// than the grace window before now: from then on presenting it is reuse.
func (s *tokenStore) rotatedOut(t *storage.Token, now time.Time) bool {
	return !t.RotatedAt.IsZero() && (s.grace <= 0 || now.After(t.RotatedAt.Add(s.grace)))
}

// DeleteRefreshTokenSession is called by fosite on detected reuse, in a
// transaction, right before it revokes the token's family. It deactivates
// the whole family (the presented token among it) rather than deleting the
// record, so that later replays still count as reuse.
//
// Deactivating the presented token alone first, as fosite intends, would
// make concurrent reuses of different members of one family lock their own
// row first and then each other's: PostgreSQL then breaks the deadlock by
// failing one of them (a 500). Revoking the family by request ID locks the
// rows in one order in every transaction.
func (s *tokenStore) DeleteRefreshTokenSession(ctx context.Context, sig string) error {
	t, err := s.store.GetToken(ctx, storage.KindRefreshToken, sig)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return mapStoreErr(err)
	}
	return s.RevokeRefreshToken(ctx, t.RequestID)
}

// RotateRefreshToken marks the presented refresh token used. Within the
// grace window a second rotation of the same token succeeds; after it the
// storage answers ErrInactive and the request fails.
//
// A rotation that fails because the token is no longer active or no longer
// there (another refresh rotated it a moment earlier, outside any grace
// window; it was revoked; it expired and was collected) returns
// errRefreshRace. fosite would answer those invalid_request ("please
// retry"); serveToken answers invalid_grant, the word of RFC 6749 §5.2 for
// a refresh token that is invalid or used, and revokes the family as for
// any reuse (refreshRaceLost).
//
// Using a token ends its parent's grace window (RFC 9700 §4.14.2): the
// parent, the token this one was rotated from, is deactivated in the same
// transaction, before this token's row is touched (older rows first, the
// order in which a revocation of the family locks them). From then on the
// parent is no racing duplicate but a replay, whatever the window says, and
// presenting it revokes the family. A sibling (another successor of the
// same parent, from a second racing refresh) stays usable: it is active and
// unrotated.
func (s *tokenStore) RotateRefreshToken(ctx context.Context, _ string, sig string) error {
	grace := s.grace
	if grace < 0 {
		grace = 0
	}
	m := redemptionFrom(ctx)
	if m != nil && m.refreshSig == sig && m.refreshParent != "" {
		err := s.store.DeactivateToken(ctx, storage.KindRefreshToken, m.refreshParent)
		if err != nil && !errors.Is(err, storage.ErrInactive) && !errors.Is(err, storage.ErrNotFound) {
			return mapStoreErr(err)
		}
	}
	err := s.store.RotateToken(ctx, storage.KindRefreshToken, sig, s.now(), grace)
	if errors.Is(err, storage.ErrInactive) || errors.Is(err, storage.ErrNotFound) {
		return errRefreshRace
	}
	if err == nil && m != nil {
		m.rotated = sig
	}
	return mapStoreErr(err)
}

// errRefreshRace marks a refresh token that another request rotated (or
// that was revoked) between the checks of a refresh request and its
// rotation.
var errRefreshRace = errors.New("as: refresh token already used")

// refreshRaceLost handles a refresh request whose rotation failed with
// errRefreshRace after fosite rolled its transaction back: the token was
// presented once more than it may be, which is reuse (RFC 9700 §4.14.2), so
// the family is revoked exactly as fosite does when it detects reuse before
// the rotation, and the client gets invalid_grant (RFC 6749 §5.2).
func (s *tokenStore) refreshRaceLost(ctx context.Context, ar fosite.AccessRequester) error {
	s.log.audit(ctx, "refresh.reused", "client_id", ar.GetClient().GetID(), "sub", ar.GetSession().GetSubject(), "grant", ar.GetID())
	s.revokeGrant(ctx, ar.GetID())
	return fosite.ErrInvalidGrant.WithHint("The refresh token was already used.").WithWrap(errRefreshRace)
}

// RevokeRefreshToken deactivates every refresh token of the family. It
// runs the statement twice: a rotation of a member that committed while the
// first pass waited for that member's row issued a new member the first
// pass could not see (PostgreSQL re-checks a waited-for row but does not
// look for new ones); the second pass, a new statement, sees it. A rotation
// that had not committed by then finds its token inactive and fails.
func (s *tokenStore) RevokeRefreshToken(ctx context.Context, requestID string) error {
	defer s.notifyRevoked(ctx)
	for range 2 {
		if err := s.store.RevokeTokens(ctx, storage.KindRefreshToken, requestID); err != nil {
			return mapStoreErr(err)
		}
	}
	return nil
}

// Transactions: fosite's storage.Transactional delegates to the store's.

func (s *tokenStore) BeginTX(ctx context.Context) (context.Context, error) {
	c, err := s.store.BeginTX(ctx)
	if err != nil {
		return c, mapStoreErr(err)
	}
	c, st := withReqState(c)
	if st.revoked == nil {
		st.revoked = new(atomic.Bool)
	}
	return c, nil
}

// Commit commits the transaction in ctx, then tells the status list of
// the revocations made in it.
func (s *tokenStore) Commit(ctx context.Context) error {
	err := mapStoreErr(s.store.Commit(ctx))
	if st := reqStateFrom(ctx); st != nil && st.revoked != nil && st.revoked.Swap(false) && s.revoked != nil {
		s.revoked()
	}
	return err
}

func (s *tokenStore) Rollback(ctx context.Context) error { return mapStoreErr(s.store.Rollback(ctx)) }
