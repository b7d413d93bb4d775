// Package storage defines the records the authorization server keeps, one small
// interface per entity, and the sentinel errors every backend returns.
//
// It is a leaf: it imports nothing of this module and nothing of fosite or pgx.
// Backends live in sibling packages (storage/memory, storage/sqlite,
// storage/postgres) and prove themselves by passing storage/storagetest.
//
// Nothing secret is kept in plain text. Token and code records are keyed by
// their signature (an HMAC or JWT signature computed by the AS, never the token
// itself); client secrets and registration access tokens are stored as keyed
// hashes; private keys and token payloads arrive here already sealed by the
// caller (see internal/seal), so a backend never sees them in clear.
//
// The records follow the grants they serve: authorization codes that are
// single use (RFC 6749 §4.1.2, §10.5) with their PKCE challenge (RFC 7636),
// access and refresh tokens with refresh families that are rotated and revoked
// together (RFC 9700 §4.14, RFC 7009 §2.1), consents, registered clients
// (RFC 7591, RFC 7592), signing keys (RFC 7517), one-time assertion ids
// (RFC 7523 §3, jti) and the people who log in (their sub, OpenID Connect
// Core 1.0 §5.1), and the approvals people give to single tool calls. For
// the operator console it also keeps the recent audit events and hourly
// counts of what happened, written by every instance.
package storage

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors. Compare with errors.Is; backends may wrap them.
var (
	// ErrNotFound: no record with that key.
	ErrNotFound = errors.New("storage: not found")
	// ErrAlreadyExists: a record with that key exists already.
	ErrAlreadyExists = errors.New("storage: already exists")
	// ErrInactive: the token or code exists but was used, rotated past its
	// grace window, or revoked. Methods that return it also return the record
	// when their signature allows, so callers can act on the family.
	ErrInactive = errors.New("storage: inactive")
	// ErrAlreadyUsed: a one-time value (jti, flow id) was presented twice.
	ErrAlreadyUsed = errors.New("storage: already used")
	// ErrUnavailable: the backend cannot be reached (database down, pool
	// exhausted). The AS answers temporarily_unavailable / 503.
	ErrUnavailable = errors.New("storage: unavailable")
)

// Client is an OAuth client, from configuration, RFC 7591 registration or a
// Client ID Metadata Document. Field names follow RFC 7591 §2.
type Client struct {
	ID string
	// SecretHash is the keyed hash of the client secret (internal/secret);
	// empty for public clients.
	SecretHash      []byte
	SecretExpiresAt time.Time // zero: never expires
	Public          bool      // token_endpoint_auth_method "none"
	Name            string
	RedirectURIs    []string
	GrantTypes      []string
	ResponseTypes   []string
	Scopes          []string // scopes the client may be granted
	Resources       []string // canonical resource URIs the client may get tokens for
	// TokenEndpointAuthMethod: none, client_secret_basic, client_secret_post,
	// private_key_jwt.
	TokenEndpointAuthMethod string
	JWKS                    []byte // RFC 7517 JWK Set JSON, for private_key_jwt
	JWKSURI                 string
	ApplicationType         string // "web" or "native"
	// Metadata is the client metadata JSON as accepted at registration, echoed
	// by RFC 7592 reads.
	Metadata []byte
	// RegistrationTokenHash is the keyed hash of the RFC 7592 registration
	// access token.
	RegistrationTokenHash []byte
	// Source says where the client came from: "config", "dcr" or "cimd".
	Source     string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	LastUsedAt time.Time // zero: never used at the token endpoint
}

// TouchGranularity is how stale LastUsedAt may be left by TouchClient.
const TouchGranularity = time.Minute

// ClientStore keeps registered clients.
type ClientStore interface {
	// GetClient returns ErrNotFound for an unknown id.
	GetClient(ctx context.Context, id string) (*Client, error)
	// CreateClient returns ErrAlreadyExists when the id is taken.
	CreateClient(ctx context.Context, c *Client) error
	// UpdateClient runs update on the stored client inside one transaction and
	// stores what it returns. ErrNotFound for an unknown id; an error from
	// update is returned unchanged and nothing is written.
	UpdateClient(ctx context.Context, id string, update func(Client) (Client, error)) error
	// DeleteClient returns ErrNotFound for an unknown id. The client's
	// grants die with it: every code and token issued to it is deactivated
	// and their status indices recorded StatusInvalid, as RevokeGrants does,
	// in the same transaction.
	DeleteClient(ctx context.Context, id string) error
	// TouchClient sets LastUsedAt. Cheap; called on every token issued.
	// ErrNotFound for an unknown id. A backend may skip the write when the
	// stored LastUsedAt is less than TouchGranularity before at (the value
	// only feeds ReapClients' idle rule, measured in days), so that a busy
	// client's row is not rewritten, and locked, for every token.
	TouchClient(ctx context.Context, id string, at time.Time) error
	// ListClients returns up to limit clients whose ID sorts after afterID
	// (byte order), in ID order: page through all of them by passing the last
	// ID of the previous page. A limit <= 0 returns none.
	ListClients(ctx context.Context, afterID string, limit int) ([]Client, error)
	// CountClients counts clients with the given Source ("" counts all).
	CountClients(ctx context.Context, source string) (int, error)
	// ReapClients deletes up to limit clients of Source "dcr" or "cimd" that were
	// created before neverUsedBefore and never used, or last used before
	// idleBefore. It returns how many it deleted. The grants of every
	// deleted client are revoked as DeleteClient does.
	ReapClients(ctx context.Context, neverUsedBefore, idleBefore time.Time, limit int) (int, error)
}

// TokenKind names the kinds of token records.
type TokenKind string

// Token kinds.
const (
	KindAuthorizeCode TokenKind = "code"
	KindPKCE          TokenKind = "pkce"
	KindAccessToken   TokenKind = "access"
	KindRefreshToken  TokenKind = "refresh"
)

// Token is one issued code or token. The secret value itself is never stored:
// Signature is what the AS derives from it to look it up.
type Token struct {
	Kind      TokenKind
	Signature string
	// RequestID identifies the grant: every code, access token and refresh
	// token of one authorization share it (the refresh-token family).
	RequestID string
	ClientID  string
	Subject   string
	Active    bool
	CreatedAt time.Time
	ExpiresAt time.Time
	// RotatedAt is when a refresh token was first exchanged; zero before.
	RotatedAt time.Time
	// Data is the serialized, sealed request; opaque to storage.
	Data []byte
	// StatusIndex is the grant's index in the Token Status List
	// (draft-ietf-oauth-status-list §4): every token of one grant carries
	// the same one. Zero: none (indices start at 1).
	StatusIndex int64
}

// TokenStore keeps codes and tokens. Exactly-once behaviour comes from single
// atomic operations, not from retries.
type TokenStore interface {
	// CreateToken returns ErrAlreadyExists for a duplicate (Kind, Signature).
	CreateToken(ctx context.Context, t *Token) error
	// GetToken returns the record whether active or not (callers check
	// Active and RotatedAt); ErrNotFound when absent.
	GetToken(ctx context.Context, kind TokenKind, signature string) (*Token, error)
	// DeactivateToken flips Active from true to false. Exactly one of any
	// number of concurrent callers succeeds; the others get ErrInactive.
	// ErrNotFound when absent.
	DeactivateToken(ctx context.Context, kind TokenKind, signature string) error
	// RotateToken marks a refresh token used at now. It succeeds when the
	// token is active and either not yet rotated or rotated no longer than
	// grace before now (two racing refreshes); otherwise it returns
	// ErrInactive. With grace 0 exactly one of concurrent callers succeeds.
	RotateToken(ctx context.Context, kind TokenKind, signature string, now time.Time, grace time.Duration) error
	// RevokeTokens deactivates every token of kind with that RequestID and
	// records StatusInvalid for their status indices (see StatusStore). It
	// is not an error when there is none.
	RevokeTokens(ctx context.Context, kind TokenKind, requestID string) error
	// DeleteToken removes one record; ErrNotFound when absent.
	DeleteToken(ctx context.Context, kind TokenKind, signature string) error
	// DeleteExpiredTokens removes up to limit records that expired before
	// before, and returns how many it removed.
	DeleteExpiredTokens(ctx context.Context, before time.Time, limit int) (int, error)
}

// GrantFilter selects grants (the codes and tokens sharing one RequestID).
// Every field that is set must match; an empty filter matches every grant.
// ListGrants reports the codes and tokens that match; RevokeGrants revokes
// whole grants, every one of which a code or token matches (a token
// exchanged by another client belongs to the grant it was exchanged from
// and shares its status index).
type GrantFilter struct {
	Subject   string
	ClientID  string
	RequestID string
}

// IsZero reports whether f matches every grant.
func (f GrantFilter) IsZero() bool { return f == GrantFilter{} }

// Grant summarises one grant from its stored codes and tokens.
type Grant struct {
	RequestID string
	Subject   string // "" for client credentials
	ClientID  string
	// CreatedAt is when its first stored code or token was issued;
	// LastUsedAt when its latest was (a refresh issues new ones).
	CreatedAt  time.Time
	LastUsedAt time.Time
	// ExpiresAt is the latest expiry among its tokens.
	ExpiresAt   time.Time
	StatusIndex int64
}

// GrantStore lists and revokes grants as a whole.
type GrantStore interface {
	// ListGrants returns the grants matching f that still have an active
	// access or refresh token unexpired at now, newest (LastUsedAt) first,
	// at most limit of them (limit <= 0: all).
	ListGrants(ctx context.Context, f GrantFilter, now time.Time, limit int) ([]Grant, error)
	// RevokeGrants deactivates every code and token of the grants matching
	// f, records StatusInvalid for their status indices until the last of
	// their tokens expires, and deletes the remembered consents f names:
	// with Subject and ClientID, that person's consents for that client;
	// with ClientID alone, every consent for that client; with Subject
	// alone, every consent of that person; with RequestID set, none (one
	// grant is not the consent). It returns how many grants had an active
	// code or token. An empty filter is refused with ErrInvalidFilter.
	RevokeGrants(ctx context.Context, f GrantFilter) (int, error)
}

// ErrInvalidFilter: RevokeGrants was given an empty GrantFilter.
var ErrInvalidFilter = errors.New("storage: a grant filter needs a subject, client or request id")

// Token statuses of the Token Status List (draft-ietf-oauth-status-list
// §7.1). Only StatusInvalid is recorded; an index without a record is valid.
const (
	StatusValid   uint8 = 0
	StatusInvalid uint8 = 1
)

// StatusStore keeps the Token Status List: the indices handed out to grants
// and the statuses recorded for revoked ones. Several AS instances sharing
// the store serve the same list.
type StatusStore interface {
	// AllocateStatusIndices reserves n (at least 1) consecutive indices and
	// returns the first. Indices start at 1 and are never handed out twice,
	// also not to concurrent callers. Call it outside a transaction: a
	// reservation made inside one that rolls back may be handed out again.
	AllocateStatusIndices(ctx context.Context, n int) (int64, error)
	// StatusList returns the highest index handed out so far (0 when none)
	// and, in increasing order, the indices recorded StatusInvalid whose
	// record has not expired at now.
	StatusList(ctx context.Context, now time.Time) (last int64, invalid []int64, err error)
	// DeleteExpiredStatuses removes up to limit status records that expired
	// before before (their tokens have all expired), and returns how many.
	DeleteExpiredStatuses(ctx context.Context, before time.Time, limit int) (int, error)
}

// Consent is a person's remembered approval of a client for one resource.
type Consent struct {
	Subject  string
	ClientID string
	Resource string
	Scopes   []string
	// RedirectURIs are the client's registered redirect URIs (for a CIMD
	// client, its document's) when the person approved, sorted. The consent
	// covers only that set: codes may go where the consent page said they
	// would, and a client whose redirect URIs changed is asked about again.
	RedirectURIs []string
	GrantedAt    time.Time
	ExpiresAt    time.Time // zero: until revoked
}

// ConsentStore keeps remembered consents, keyed by (Subject, ClientID, Resource).
type ConsentStore interface {
	// GetConsent returns ErrNotFound when none is remembered.
	GetConsent(ctx context.Context, subject, clientID, resource string) (*Consent, error)
	// PutConsent inserts or replaces.
	PutConsent(ctx context.Context, c *Consent) error
	// DeleteConsents removes the subject's consents for clientID (all of the
	// subject's consents when clientID is ""). Not an error when none exist.
	DeleteConsents(ctx context.Context, subject, clientID string) error
	// ListConsents returns the subject's consents.
	ListConsents(ctx context.Context, subject string) ([]Consent, error)
	// DeleteExpiredConsents removes up to limit consents that expired before before.
	DeleteExpiredConsents(ctx context.Context, before time.Time, limit int) (int, error)
}

// SigningKey is one JWT signing key. The private part is sealed by the caller.
type SigningKey struct {
	ID            string // kid
	Algorithm     string // ES256, RS256, EdDSA
	PublicJWK     []byte // JSON of the public JWK
	PrivateSealed []byte // encrypted private key
	CreatedAt     time.Time
	// RetiredAt is when a newer key took over signing; zero while this key
	// signs. Retired keys stay in the JWKS until the tokens they signed expire.
	RetiredAt time.Time
}

// KeyStore keeps signing keys.
type KeyStore interface {
	// ListKeys returns every key, newest first.
	ListKeys(ctx context.Context) ([]SigningKey, error)
	// CreateKey returns ErrAlreadyExists for a duplicate ID.
	CreateKey(ctx context.Context, k *SigningKey) error
	// RetireKeys sets RetiredAt = at on every key except keepID that is not
	// retired yet.
	RetireKeys(ctx context.Context, keepID string, at time.Time) error
	// DeleteKey returns ErrNotFound for an unknown ID.
	DeleteKey(ctx context.Context, id string) error
}

// JTIStore remembers one-time identifiers (private_key_jwt assertion jti,
// login flow ids) until they expire.
type JTIStore interface {
	// UseJTI records id until expiresAt; ErrAlreadyUsed when it is recorded
	// and not yet expired. Exactly one of concurrent callers succeeds. An
	// expiresAt later than the backend can store is kept as the latest time
	// it can (never wrapped into the past, never an error).
	UseJTI(ctx context.Context, id string, expiresAt time.Time) error
	// DeleteExpiredJTIs removes up to limit expired ids.
	DeleteExpiredJTIs(ctx context.Context, before time.Time, limit int) (int, error)
}

// Counter is the state of one login-throttle or rate-limit key, shared by
// every instance that uses the store. Its meaning belongs to the caller:
// the login throttle counts attempts in Count and locks the key until Until;
// the registration rate limit keeps its GCRA theoretical arrival time in
// Until.
type Counter struct {
	Key   string
	Count int
	Until time.Time
	// ExpiresAt is when the counter is as good as new: from then on it reads
	// as the zero Counter and may be deleted.
	ExpiresAt time.Time
}

// CounterStore keeps Counters. Keys are short strings chosen by the caller
// (a prefix, then an account name or an address).
type CounterStore interface {
	// UpdateCounters reads the counters of keys (a key without a record, or
	// whose ExpiresAt is not after now, reads as Counter{Key: key}), calls
	// update with them in the order of keys, and stores what it returns:
	// one Counter per key, in the same order; one with a zero ExpiresAt is
	// deleted. It is atomic across every instance: concurrent callers that
	// name a common key run one after the other, each seeing the other's
	// result. An error from update is returned unchanged and nothing is
	// written. keys must not repeat.
	UpdateCounters(ctx context.Context, keys []string, now time.Time, update func([]Counter) ([]Counter, error)) error
	// DeleteExpiredCounters removes up to limit counters whose ExpiresAt is
	// before before.
	DeleteExpiredCounters(ctx context.Context, before time.Time, limit int) (int, error)
}

// Session is a signed-in browser session. The cookie carries a random
// session id; the store keeps only ID, a keyed hash of it, so a copy of the
// database cannot be turned into cookies. Deleting the record ends the
// session wherever its cookie is.
type Session struct {
	ID        string
	Subject   string
	CreatedAt time.Time // the login
	// LastSeenAt is when the session was last used, refreshed at most about
	// once a minute.
	LastSeenAt time.Time
	// IdleExpiresAt is LastSeenAt plus the idle lifetime; ExpiresAt is the
	// absolute end, CreatedAt plus the absolute lifetime. The session ends at
	// the earlier of the two.
	IdleExpiresAt time.Time
	ExpiresAt     time.Time
	// UserAgent and Address describe where the login came from, for the
	// person's list of sessions.
	UserAgent string
	Address   string
}

// SessionStore keeps browser sessions.
type SessionStore interface {
	// CreateSession returns ErrAlreadyExists for a duplicate ID.
	CreateSession(ctx context.Context, s *Session) error
	// GetSession returns ErrNotFound for an unknown ID (expired ones are
	// returned; callers check the times).
	GetSession(ctx context.Context, id string) (*Session, error)
	// TouchSession sets LastSeenAt and IdleExpiresAt; ErrNotFound for an
	// unknown ID.
	TouchSession(ctx context.Context, id string, lastSeen, idleExpiresAt time.Time) error
	// ListSessions returns the subject's sessions.
	ListSessions(ctx context.Context, subject string) ([]Session, error)
	// DeleteSession removes one session of subject ("" for any subject); it
	// is not an error when there is none.
	DeleteSession(ctx context.Context, subject, id string) error
	// DeleteExpiredSessions removes up to limit sessions whose ExpiresAt or
	// IdleExpiresAt is before before.
	DeleteExpiredSessions(ctx context.Context, before time.Time, limit int) (int, error)
}

// User is a person known to the AS: a local account that has logged in or
// been administered, or a person who logged in through an upstream OpenID
// provider. Zero times are "never"; nil lists and maps are "none".
type User struct {
	Subject         string // the sub we issue; a local user's is the username
	Upstream        string // upstreams[].id; "" for a local user
	UpstreamSubject string // the upstream's subject_claim value
	Name, Email     string
	Groups          []string
	// Claims holds the claim values the claim_scopes and allow rules read,
	// by claim name.
	Claims              map[string][]string
	FirstSeen, LastSeen time.Time
	Disabled            bool
	// UpstreamRefresh is the upstream's refresh token, sealed by the AS
	// (internal/seal); nil if none. It is never sent to clients.
	UpstreamRefresh []byte
	// CheckedAt is when the upstream last confirmed the session and claims.
	CheckedAt time.Time
}

// UserStore keeps User records, keyed by Subject.
type UserStore interface {
	// RecordLogin creates the user, or updates Upstream, UpstreamSubject,
	// Name, Email, Groups, Claims and LastSeen, and UpstreamRefresh and
	// CheckedAt when they are set (non-empty, non-zero), keeping FirstSeen
	// and Disabled. A zero LastSeen is stored as the current time; FirstSeen
	// of a new record, or of one that was never seen (created by
	// SetUserDisabled), is LastSeen; u.FirstSeen and u.Disabled are ignored.
	// It returns the stored record, so a disabled user is seen as disabled.
	RecordLogin(ctx context.Context, u *User) (*User, error)
	// GetUser returns ErrNotFound for an unknown subject.
	GetUser(ctx context.Context, subject string) (*User, error)
	// ListUsers returns up to limit users whose Subject sorts after
	// afterSubject (byte order), in Subject order: page through all of them
	// by passing the last Subject of the previous page. A limit <= 0
	// returns none.
	ListUsers(ctx context.Context, afterSubject string, limit int) ([]User, error)
	// SetUserDisabled sets Disabled. When there is no record it creates a
	// minimal one (Subject and Disabled, never seen): callers decide which
	// subjects may be recorded, such as a configured local user who has
	// not logged in yet.
	SetUserDisabled(ctx context.Context, subject string, disabled bool) error
	// UpdateUpstreamSession records a successful check with the upstream:
	// it stores checkedAt, groups and claims, and sealedRefresh when it is
	// non-empty (an upstream that did not rotate its refresh token keeps the
	// stored one). ErrNotFound for an unknown subject.
	UpdateUpstreamSession(ctx context.Context, subject string, sealedRefresh []byte, checkedAt time.Time, groups []string, claims map[string][]string) error
}

// ApprovalStatus is the state of an Approval.
type ApprovalStatus string

// The states of an Approval. A pending approval is decided once (approved
// or denied); an approved one is used once (used). A denied one stays
// denied; UsedAt records that its denial was reported.
const (
	ApprovalPending  ApprovalStatus = "pending"
	ApprovalApproved ApprovalStatus = "approved"
	ApprovalDenied   ApprovalStatus = "denied"
	ApprovalUsed     ApprovalStatus = "used"
)

// ApprovalBinding is what an approval is for: one person, through one
// client, calling one tool of one resource with arguments of one digest.
type ApprovalBinding struct {
	Subject  string
	ClientID string
	Resource string
	Tool     string
	// ArgsDigest is the lowercase hex SHA-256 of the canonical (RFC 8785)
	// JSON of the arguments.
	ArgsDigest string
}

// Approval is a person's decision about one tool call held by a resource
// server: registered pending, approved or denied by the person on the AS's
// page, then used (or its denial reported) once. It is dead after
// ExpiresAt, whatever its status.
type Approval struct {
	ID string
	ApprovalBinding
	// Arguments are the canonical JSON bytes of the call's arguments, the
	// bytes ArgsDigest is the digest of and the page shows.
	Arguments []byte
	Status    ApprovalStatus
	CreatedAt time.Time
	ExpiresAt time.Time
	// DecidedAt is when the person approved or denied; UsedAt when the
	// approval was used, or its denial reported. Zero: not yet.
	DecidedAt time.Time
	UsedAt    time.Time
}

// Live reports whether a is unexpired at now.
func (a *Approval) Live(now time.Time) bool { return now.Before(a.ExpiresAt) }

// ApprovalStore keeps Approvals, keyed by ID.
type ApprovalStore interface {
	// CreateApproval stores a (Status pending) and returns it, unless a
	// pending approval for the same binding is live at a.CreatedAt: then
	// it returns that one and stores nothing. Of concurrent callers with
	// one binding, all get the same approval. ErrAlreadyExists for a
	// duplicate ID.
	CreateApproval(ctx context.Context, a *Approval) (*Approval, error)
	// GetApproval returns ErrNotFound for an unknown id.
	GetApproval(ctx context.Context, id string) (*Approval, error)
	// DecideApproval sets the status of the pending approval id of subject
	// to approved (approve) or denied, and DecidedAt to now, and returns
	// it. ErrNotFound when there is no approval id of subject; ErrInactive
	// when it is not pending or not live at now. Of concurrent callers at
	// most one succeeds.
	DecideApproval(ctx context.Context, id, subject string, approve bool, now time.Time) (*Approval, error)
	// UseApproval takes the oldest decided, unused approval for b that is
	// live at now: an approved one becomes used, a denied one stays denied;
	// both get UsedAt now. It returns it as changed; ErrNotFound when there
	// is none. Of concurrent callers exactly one gets each approval.
	UseApproval(ctx context.Context, b ApprovalBinding, now time.Time) (*Approval, error)
	// ListApprovals returns up to limit approvals of subject (every
	// subject's when subject is ""), whose ID sorts after afterID (byte
	// order), in ID order: page through them by passing the last ID of
	// the previous page. A limit <= 0 returns none.
	ListApprovals(ctx context.Context, subject, afterID string, limit int) ([]Approval, error)
	// DeleteApproval removes the approval id of subject (of any subject
	// when subject is ""); ErrNotFound when there is none.
	DeleteApproval(ctx context.Context, subject, id string) error
	// DeleteExpiredApprovals removes up to limit approvals whose ExpiresAt
	// is before before.
	DeleteExpiredApprovals(ctx context.Context, before time.Time, limit int) (int, error)
}

// PersonStatus is the part of a person's User record that decides whether
// they may still use their grants (policy.People.Active): whether there is
// a record, the upstream provider it says they signed in through ("" for a
// local account), and its disabled flag.
type PersonStatus struct {
	Recorded bool
	Upstream string
	Disabled bool
}

// TokenPersonReader is implemented by backends that read a token's record
// together with the status of its Subject's User record in one round trip
// (storage/postgres, storage/sqlite, storage/memory), so that checking
// whether the person of a grant may still use it, at every code
// redemption, refresh, token exchange and introspection, costs no query of
// its own and reads none of the record's other columns (groups, claims,
// the sealed upstream session). It is optional: callers fall back to
// GetToken and GetUser.
type TokenPersonReader interface {
	// GetTokenWithPerson is GetToken that also returns the PersonStatus of
	// the User record whose Subject is the token's: the zero PersonStatus
	// when the token's Subject is "" or there is no such record.
	// ErrNotFound when the token is absent.
	GetTokenWithPerson(ctx context.Context, kind TokenKind, signature string) (*Token, PersonStatus, error)
}

// AuditEvent is one audit record the AS keeps for the console: a copy of
// an audit line of its log (message "audit").
type AuditEvent struct {
	ID           int64 // assigned by the store, increasing
	Time         time.Time
	Event        string // e.g. "token.issued", "grant.revoked", "login.failed", "admin.grant_revoked": the audit line's event
	Subject      string // the person, "" if none
	ClientID     string // "" if none
	AdminSubject string // who did it through the admin API/console/CLI, "" if none
	Detail       []byte // JSON object of the audit line's other attributes (never secrets or tokens; the audit lines hold none)
}

// AuditFilter selects audit events.
type AuditFilter struct {
	Subject, ClientID, Event string // "" matches all; Event also matches as a prefix when it ends with "."
	BeforeID                 int64  // 0: newest first from the top; else only IDs < BeforeID (cursor)
	Limit                    int
}

// AuditStore keeps audit events, appended by every instance.
type AuditStore interface {
	// AppendAuditEvents stores events in their order, each with a new ID
	// greater than every ID handed out before (the ID fields given are
	// ignored). A zero Time is stored as the time of the call. Text a
	// backend cannot keep exactly (invalid UTF-8, NUL) is stored with
	// U+FFFD in its place: an event is never refused for what a client
	// sent.
	AppendAuditEvents(ctx context.Context, events []AuditEvent) error
	// ListAuditEvents returns up to f.Limit events matching f, newest
	// (highest ID) first; a Limit <= 0 returns none. Page through them by
	// passing the last ID of a page as the next BeforeID. An event whose
	// ID was handed out before another's but committed after it may be
	// missed by a page read in between.
	ListAuditEvents(ctx context.Context, f AuditFilter) ([]AuditEvent, error) // newest first
	// DeleteAuditEventsBefore removes up to limit events whose Time is
	// before before, and returns how many it removed.
	DeleteAuditEventsBefore(ctx context.Context, before time.Time, limit int) (int, error)
}

// StatCount is how many times Name happened in the hour starting at Hour (UTC, truncated).
type StatCount struct {
	Hour  time.Time
	Name  string
	Count int64
}

// StatsStore keeps hourly counts, added to by every instance.
type StatsStore interface {
	// AddStats adds each Count to the stored count of its (Hour, Name),
	// with Hour truncated to the hour in UTC (a zero Hour is the current
	// hour); counts of one key given twice are both added, a zero Count
	// adds nothing. Increments are atomic across instances: concurrent
	// callers never lose one.
	AddStats(ctx context.Context, counts []StatCount) error // adds to the stored counts (atomic increments across instances)
	// ListStats returns the counts whose Hour is not before since.
	ListStats(ctx context.Context, since time.Time) ([]StatCount, error) // Hour >= since, ordered by Hour then Name
	// DeleteStatsBefore removes up to limit counts whose Hour is before
	// before, and returns how many it removed.
	DeleteStatsBefore(ctx context.Context, before time.Time, limit int) (int, error)
}

// Transactional is fosite's storage.Transactional shape: the transaction
// travels in the returned context, and every method called with that context
// takes part in it. Backends without real transactions must still make the
// work of a rolled-back transaction invisible.
type Transactional interface {
	BeginTX(ctx context.Context) (context.Context, error)
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Store is everything a backend provides.
type Store interface {
	ClientStore
	TokenStore
	GrantStore
	StatusStore
	ConsentStore
	KeyStore
	JTIStore
	CounterStore
	SessionStore
	UserStore
	ApprovalStore
	AuditStore
	StatsStore
	Transactional
	// Ping reports ErrUnavailable (wrapped) when the backend is unreachable.
	Ping(ctx context.Context) error
	Close() error
}
