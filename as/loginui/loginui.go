// Package loginui serves the person-facing pages of the authorization server:
// the login form, sign-in through upstream providers, the consent page, the
// list of remembered consents and log-out. It knows nothing of OAuth wire
// formats and decides no policy: the authorization endpoint in as/
// validates the request once into an authflow.Transaction, authflow.Next
// decides the step, and this package renders that step's page (SignIn, Ask)
// and records the person's answer in the transaction.
//
// The forms of a transaction post to paths of their own (LoginPath,
// UpstreamPath, ConsentPath) with the sealed transaction, which is bound to
// the browser session and usable once per step; each step records its
// outcome and returns the browser to ContinuePath (RFC 9700 §4.7 and §2.1:
// state belongs to the client; the transaction is our own). Every form also
// carries a CSRF token tied to the browser session.
//
// Security measures follow the project's SECURITY-CHECKLIST ("Authorization
// endpoint and browser pages"): sessions in gorilla/securecookie cookies
// (HttpOnly, SameSite=Lax, __Host- and Secure on https), the session id
// rotated at login, anti-framing headers and a strict CSP on every page, login
// throttling per account and per client address with exponential backoff, and
// the same answer for unknown users as for wrong passwords.
package loginui

import (
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/securecookie"

	"github.com/mcpauth/mcpauth/as/authflow"
	"github.com/mcpauth/mcpauth/as/policy"
	"github.com/mcpauth/mcpauth/internal/clientaddr"
	"github.com/mcpauth/mcpauth/internal/password"
	"github.com/mcpauth/mcpauth/internal/seal"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// User is a local account that can log in.
type User struct {
	Username string
	// PasswordHash is an argon2id PHC string or a bcrypt hash
	// (internal/password).
	PasswordHash string
	// Disabled accounts cannot log in or consent, and the AS refuses the
	// grants they gave (policy.People.Active).
	Disabled bool
}

// GrantRevoker revokes what a person granted a client: their tokens and
// their remembered consent (as.GrantRevoker). The /consents page calls it
// when the person revokes a client (Config.Revoker).
type GrantRevoker interface {
	RevokeConsent(ctx context.Context, subject, clientID string) error
}

// ConsentStore is the part of storage.ConsentStore the pages use.
type ConsentStore interface {
	GetConsent(ctx context.Context, subject, clientID, resource string) (*storage.Consent, error)
	PutConsent(ctx context.Context, c *storage.Consent) error
	DeleteConsents(ctx context.Context, subject, clientID string) error
	ListConsents(ctx context.Context, subject string) ([]storage.Consent, error)
}

// SessionStore is the part of storage.SessionStore the pages use.
type SessionStore interface {
	CreateSession(ctx context.Context, s *storage.Session) error
	GetSession(ctx context.Context, id string) (*storage.Session, error)
	TouchSession(ctx context.Context, id string, lastSeen, idleExpiresAt time.Time) error
	ListSessions(ctx context.Context, subject string) ([]storage.Session, error)
	DeleteSession(ctx context.Context, subject, id string) error
}

// JTIStore is the part of storage.JTIStore the pages use to make flow tokens
// single-use.
type JTIStore interface {
	UseJTI(ctx context.Context, id string, expiresAt time.Time) error
}

// UserRecorder is the part of storage.UserStore the pages use to record
// local logins.
type UserRecorder interface {
	RecordLogin(ctx context.Context, u *storage.User) (*storage.User, error)
}

// Config configures the pages. Zero values are documented per field.
type Config struct {
	// Users who can log in. Usernames are matched exactly.
	Users []User
	// Consents remembers approvals per (subject, client, resource). Required.
	Consents ConsentStore
	// JTIs makes flow tokens single use. Required.
	JTIs JTIStore
	// Secret (at least 32 bytes) from which the cookie signing and encryption
	// keys and the CSRF key are derived with HKDF (RFC 5869), each with its
	// own purpose string.
	Secret []byte
	// Secure is true when the issuer is https: cookies get the __Host- prefix
	// and the Secure attribute (and therefore Path=/).
	Secure bool
	// BasePath is the issuer's path ("" or "/auth", no trailing slash). Links
	// to /ui/, /consents and /logout are prefixed with it, and so is the
	// cookie path when not Secure.
	BasePath string
	// Logger receives login failures and storage errors; nil discards.
	Logger *slog.Logger
	// Now returns the current time; nil means time.Now.
	Now func() time.Time

	// Sessions stores signed-in browser sessions, so that logging out (or
	// ending a session on the /consents page) ends it wherever its cookie
	// is. Give it the store every instance shares; nil keeps them in this
	// process's memory.
	Sessions SessionStore
	// SessionTTL is the absolute lifetime of a login; zero means 12 hours.
	SessionTTL time.Duration
	// SessionIdleTTL ends a session unused this long; zero means 2 hours
	// (never more than SessionTTL).
	SessionIdleTTL time.Duration
	// FlowTTL is how long a login or consent form stays valid; zero means 10
	// minutes.
	FlowTTL time.Duration
	// ConsentTTL is how long a remembered consent lasts; zero means until
	// revoked.
	ConsentTTL time.Duration

	// Records keeps a record of every person who logs in (first and last
	// seen), and holds the disabled flag an operator sets: a person whose
	// record is disabled cannot log in, with the answer of a wrong
	// password. Nil: logins are not recorded.
	Records UserRecorder

	// Counters holds the login throttle's counters. Give it the store every
	// instance shares so that the throttle holds across instances; nil
	// keeps them in this process's memory.
	Counters CounterStore

	// AccountFreeAttempts is how many logins for one username from one
	// client address are allowed before backoff starts; zero means 5. Every
	// attempt is counted before its password is checked, so however many
	// arrive at once, at most AccountFreeAttempts+1 passwords are checked
	// before the first lock-out.
	AccountFreeAttempts int
	// AddressFreeAttempts is the looser allowance of one client address
	// across all usernames (a spray of guesses from one place), so that
	// people sharing an address are not locked out by one of them; zero
	// means 50.
	AddressFreeAttempts int
	// AccountTotalFreeAttempts is the allowance of one username across all
	// addresses (a distributed guess); zero means 50.
	AccountTotalFreeAttempts int
	// LockoutBase is the first backoff; each further failure doubles it.
	// Zero means 2 seconds.
	LockoutBase time.Duration
	// LockoutMax caps the backoff; zero means 15 minutes. Failure counts are
	// forgotten after twice this long without a failure.
	LockoutMax time.Duration
	// ClientAddr returns the key per-address throttling counts under (the
	// client's address, IPv6 grouped by /64); nil means the TCP peer's
	// (internal/clientaddr with no trusted proxy). Set it when behind a
	// reverse proxy.
	ClientAddr func(r *http.Request) string
	// ClientIP returns the client's address as written in audit events;
	// nil means the TCP peer's. Set it together with ClientAddr.
	ClientIP func(r *http.Request) string
	// MaxConcurrentChecks bounds how many password hashes are computed at
	// once (each argon2id check takes 64 MiB); zero means 4.
	MaxConcurrentChecks int

	// Upstreams are the OpenID providers offered on the login page, in
	// order. With exactly one and no Users, the login page is skipped and
	// the person goes straight to the provider. Their callbacks are
	// /upstream/{id}/callback (Handler).
	Upstreams []Upstream
	// UpstreamUsers records the people who sign in through Upstreams and
	// is read for their scope cap and disabled flag. Required with
	// Upstreams.
	UpstreamUsers UpstreamUserStore

	// People decides who may sign in and consent (policy.People.Active) and
	// what a person's claims cap (policy.People.Cap, policy.Consent). Give
	// the one the AS is given, listing the same local accounts as Users.
	// Nil: built from Users, Upstreams and UpstreamUsers.
	People *policy.People
	// Revoker revokes a person's grants to a client when they revoke it on
	// the /consents page (as.GrantRevoker). Nil: the page only forgets the
	// remembered consent.
	Revoker GrantRevoker

	// ScopeDescriptions maps a scope to a human description shown on the
	// consent page; scopes without one are shown as they are.
	ScopeDescriptions map[string]string
	// ClientNames returns a display name for a client id on the /consents
	// page; nil shows the client id only.
	ClientNames func(ctx context.Context, clientID string) string

	// Approvals keeps the approvals of held tool calls: the approval page
	// (ApprovalPath) shows and decides them, /consents lists and revokes
	// the person's. Nil: there is no approval page.
	Approvals ApprovalStore
}

// UI serves the login, consent, consent-list and log-out pages.
type UI struct {
	cfg           Config
	users         map[string]string // username -> hash
	people        *policy.People
	dummyHash     string
	cookies       *securecookie.SecureCookie
	csrfKey       []byte
	cookie        cookieNames
	throttle      *throttle
	throttleKey   []byte
	sessionKeyMAC []byte
	checks        chan struct{}
	refreshSeal   *seal.Sealer
	flow          *authflow.Codec
	log           *slog.Logger
	now           func() time.Time
	// names names clients and resources on the approval page (SetNames).
	names Names
}

type cookieNames struct {
	session string
	path    string
}

// New checks cfg and returns the pages. It computes one password hash (the
// dummy used for unknown usernames), so it takes a few tens of milliseconds.
func New(cfg Config) (*UI, error) {
	if cfg.Consents == nil {
		return nil, errors.New("loginui: Config.Consents is required")
	}
	if cfg.JTIs == nil {
		return nil, errors.New("loginui: Config.JTIs is required")
	}
	if len(cfg.Secret) < 32 {
		return nil, errors.New("loginui: Config.Secret must be at least 32 bytes")
	}
	if cfg.BasePath != "" && (!strings.HasPrefix(cfg.BasePath, "/") || strings.HasSuffix(cfg.BasePath, "/")) {
		return nil, fmt.Errorf("loginui: Config.BasePath %q must start with / and not end with /", cfg.BasePath)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	users := make(map[string]string, len(cfg.Users))
	local := policy.LocalUsers{}
	for i, u := range cfg.Users {
		if u.Username == "" {
			return nil, fmt.Errorf("loginui: Config.Users[%d].Username is empty", i)
		}
		if _, dup := users[u.Username]; dup {
			return nil, fmt.Errorf("loginui: Config.Users[%d].Username %q is listed twice", i, u.Username)
		}
		if err := password.Validate(u.PasswordHash); err != nil {
			return nil, fmt.Errorf("loginui: Config.Users[%d].PasswordHash: %w", i, err)
		}
		if password.Weak(u.PasswordHash) {
			cfg.Logger.Warn("loginui: weak password hash (bcrypt cost below 10 or argon2id below the OWASP minimum); rehash with authserver hash-password", "username", u.Username)
		}
		users[u.Username] = u.PasswordHash
		local[u.Username] = u.Disabled
	}
	if len(cfg.Upstreams) > 0 && cfg.UpstreamUsers == nil {
		return nil, errors.New("loginui: Config.UpstreamUsers is required with Upstreams")
	}
	seen := map[string]bool{}
	for i := range cfg.Upstreams {
		up := &cfg.Upstreams[i]
		if up.Provider == nil || up.Provider.ID() == "" || strings.ContainsAny(up.Provider.ID(), ":/?#") {
			return nil, fmt.Errorf("loginui: Config.Upstreams[%d] has no provider or a bad id", i)
		}
		if seen[up.Provider.ID()] {
			return nil, fmt.Errorf("loginui: Config.Upstreams[%d]: id %q is listed twice", i, up.Provider.ID())
		}
		seen[up.Provider.ID()] = true
		if up.Name == "" {
			up.Name = up.Provider.ID()
		}
	}
	if cfg.People == nil {
		pc := policy.PeopleConfig{Local: local}
		for _, up := range cfg.Upstreams {
			pc.Upstreams = append(pc.Upstreams, policy.Upstream{ID: up.Provider.ID(), Claims: up.Provider})
		}
		if cfg.UpstreamUsers != nil {
			pc.Records = cfg.UpstreamUsers
		}
		cfg.People = policy.NewPeople(pc)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.SessionTTL, 12*time.Hour)
	def(&cfg.SessionIdleTTL, 2*time.Hour)
	cfg.SessionIdleTTL = min(cfg.SessionIdleTTL, cfg.SessionTTL)
	def(&cfg.FlowTTL, 10*time.Minute)
	def(&cfg.LockoutBase, 2*time.Second)
	def(&cfg.LockoutMax, 15*time.Minute)
	if cfg.AccountFreeAttempts <= 0 {
		cfg.AccountFreeAttempts = 5
	}
	if cfg.AddressFreeAttempts <= 0 {
		cfg.AddressFreeAttempts = 50
	}
	if cfg.AccountTotalFreeAttempts <= 0 {
		cfg.AccountTotalFreeAttempts = 50
	}
	if cfg.Counters == nil {
		cfg.Counters = memory.New()
	}
	if cfg.Sessions == nil {
		cfg.Sessions = memory.New()
	}
	if cfg.MaxConcurrentChecks <= 0 {
		cfg.MaxConcurrentChecks = 4
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ClientAddr == nil {
		cfg.ClientAddr = (*clientaddr.Resolver)(nil).Key
	}
	if cfg.ClientIP == nil {
		cfg.ClientIP = (*clientaddr.Resolver)(nil).String
	}

	derive := func(purpose string, n int) ([]byte, error) {
		return hkdf.Key(sha256.New, cfg.Secret, nil, "mcpauth loginui "+purpose, n)
	}
	hashKey, err := derive("cookie mac", 64)
	if err != nil {
		return nil, err
	}
	blockKey, err := derive("cookie encryption", 32)
	if err != nil {
		return nil, err
	}
	csrfKey, err := derive("csrf", 32)
	if err != nil {
		return nil, err
	}
	throttleKey, err := derive("throttle", 32)
	if err != nil {
		return nil, err
	}
	sessionKeyMAC, err := derive("session id", 32)
	if err != nil {
		return nil, err
	}
	sc := securecookie.New(hashKey, blockKey)
	sc.SetSerializer(securecookie.JSONEncoder{})
	sc.MaxAge(int(cfg.SessionTTL / time.Second))

	dummy, err := password.Hash(string(hashKey[:16]))
	if err != nil {
		return nil, err
	}
	names := cookieNames{session: "mcpauth_session", path: cfg.BasePath}
	if names.path == "" {
		names.path = "/"
	}
	if cfg.Secure {
		// RFC 6265bis §4.1.3.2: __Host- cookies are Secure, host-only, Path=/.
		names = cookieNames{session: "__Host-mcpauth_session", path: "/"}
	}
	refreshSeal, err := RefreshSealer(cfg.Secret)
	if err != nil {
		return nil, err
	}
	flow, err := authflow.NewCodec(cfg.Secret, cfg.JTIs, cfg.FlowTTL, cfg.Now)
	if err != nil {
		return nil, err
	}
	return &UI{
		refreshSeal:   refreshSeal,
		flow:          flow,
		cfg:           cfg,
		users:         users,
		people:        cfg.People,
		dummyHash:     dummy,
		cookies:       sc,
		csrfKey:       csrfKey,
		cookie:        names,
		throttle:      &throttle{store: cfg.Counters, base: cfg.LockoutBase, max: cfg.LockoutMax},
		throttleKey:   throttleKey,
		sessionKeyMAC: sessionKeyMAC,
		checks:        make(chan struct{}, cfg.MaxConcurrentChecks),
		log:           cfg.Logger,
		now:           cfg.Now,
	}, nil
}

// Step names carried in the hidden mcpauth_step form field.
const (
	stepField    = "mcpauth_step"
	stepLogin    = "login"
	stepConsent  = "consent"
	stepUpstream = "upstream"
	stepApproval = "approval"
	maxFormBytes = 16 << 10
)

// People returns the people the pages ask (Config.People).
func (u *UI) People() *policy.People { return u.people }

// active asks Config.People whether the signed-in person name may still
// be signed in (policy.People.Active). A storage error counts as not
// signed in.
func (u *UI) active(ctx context.Context, name string) bool {
	ok, err := u.people.IsActive(ctx, name)
	if err != nil {
		u.log.ErrorContext(ctx, "loginui: reading the user record", "err", err)
	}
	return ok
}

// audit writes one audit event in the shape the AS uses: message "audit",
// attribute "event" (login.succeeded, login.failed, login.throttled,
// consent.granted, consent.denied, consent.revoked, logout), then subject,
// client and arguments. Passwords never appear; a username that did not
// log in appears only as a digest (it may be a mistyped password).
func (u *UI) audit(ctx context.Context, event string, args ...any) {
	u.log.InfoContext(ctx, "audit", append([]any{"event", event}, args...)...)
}

// digest names a value in an audit event without revealing it: the first
// 12 bytes of its SHA-256, base64url.
func digest(v string) string {
	sum := sha256.Sum256([]byte(v))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// expired reports whether a remembered consent has lapsed at now (a zero
// ExpiresAt never does).
func expired(c *storage.Consent, now time.Time) bool {
	return !c.ExpiresAt.IsZero() && !now.Before(c.ExpiresAt)
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func (u *UI) storageError(w http.ResponseWriter, r *http.Request, what string, err error) {
	u.log.ErrorContext(r.Context(), "loginui: storage error", "op", what, "err", err)
	u.ErrorPage(w, http.StatusServiceUnavailable, "Temporarily unavailable", "The service cannot complete this step right now. Please try again in a moment.")
}
