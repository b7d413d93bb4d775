package policy

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/mcpauth/mcpauth/storage"
)

// Directory is the configuration's list of local accounts (users[]).
type Directory interface {
	// UserActive reports whether the account is configured and not
	// disabled (users[].disabled).
	UserActive(username string) bool
}

// LocalUsers is a Directory of configured accounts: username to disabled.
type LocalUsers map[string]bool

// UserActive implements Directory.
func (l LocalUsers) UserActive(username string) bool {
	disabled, ok := l[username]
	return ok && !disabled
}

// Records reads people's records (storage.UserStore).
type Records interface {
	GetUser(ctx context.Context, subject string) (*storage.User, error)
}

// ClaimMapping turns a person's claims at their upstream provider into the
// scopes they may be granted (upstreams[].claim_scopes;
// *upstream.Provider).
type ClaimMapping interface {
	// Capped reports whether the provider maps claims to scopes at all.
	Capped() bool
	// Scopes are the scopes the claims map to.
	Scopes(claims map[string][]string) []string
}

// Upstream is one configured upstream identity provider.
type Upstream struct {
	// ID is upstreams[].id: its people's subjects are "{ID}:{sub}".
	ID string
	// Claims maps their claims to scopes; nil caps nothing.
	Claims ClaimMapping
}

// PeopleConfig configures NewPeople. Zero values are documented per field.
type PeopleConfig struct {
	// Local lists the local accounts. Nil: every person who has no record
	// of an upstream sign-in is active unless their record is disabled.
	Local Directory
	// Upstreams are the configured upstream providers: a person recorded as
	// signed in through one that is not listed is not active.
	Upstreams []Upstream
	// Records holds people's records (disabled flag, upstream, claims).
	// Nil: no record is read, and nobody is capped.
	Records Records
	// Reserved are scopes only the people they name may be granted
	// (CapOn).
	Reserved []Reserved
}

// People decides who is active and what their claims cap, from the
// configuration and the people's records. Build it once with NewPeople and
// give it to everything that asks (the AS, the login pages, the operator
// tools); it is safe for concurrent use.
type People struct {
	local     Directory
	upstreams []Upstream
	records   Records
	reserved  []Reserved
}

// NewPeople returns the people of cfg.
func NewPeople(cfg PeopleConfig) *People {
	return &People{local: cfg.Local, upstreams: slices.Clone(cfg.Upstreams), records: cfg.Records, reserved: slices.Clone(cfg.Reserved)}
}

// Active is the one rule by which a person may sign in, consent, and keep
// using what they granted, given their record (nil when there is none):
//
//   - a disabled record: never;
//   - a person recorded as signed in through an upstream provider: while
//     that provider is configured;
//   - a subject of a configured provider ("{id}:{sub}", a form no local
//     account may have): while they have a record;
//   - anyone else (a local account, recorded or not): while the directory
//     of local accounts lists them, not disabled (with no directory,
//     always).
//
// The token endpoint (code, refresh, token exchange, jwt-bearer's account
// link), introspection, ListGrants, the login and consent pages and the
// operator tools all apply it.
func (p *People) Active(subject string, rec *storage.User) bool {
	if rec != nil && rec.Disabled {
		return false
	}
	if rec != nil && rec.Upstream != "" {
		return p.upstream(rec.Upstream) != nil
	}
	if id, _, ok := strings.Cut(subject, ":"); ok && p.upstream(id) != nil {
		return rec != nil
	}
	return p.local == nil || p.local.UserActive(subject)
}

// Record reads the record of subject: nil when there is none (or no
// Records). A storage error is returned, never taken for an answer.
func (p *People) Record(ctx context.Context, subject string) (*storage.User, error) {
	if p.records == nil {
		return nil, nil
	}
	u, err := p.records.GetUser(ctx, subject)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	return u, err
}

// IsActive reads the record of subject and applies Active.
func (p *People) IsActive(ctx context.Context, subject string) (bool, error) {
	rec, err := p.Record(ctx, subject)
	if err != nil {
		return false, err
	}
	return p.Active(subject, rec), nil
}

// LocalActive is Active for a local account only: false for a person
// recorded as signed in through an upstream provider. An ID-JAG is linked
// by its email to such an account alone.
func (p *People) LocalActive(subject string, rec *storage.User) bool {
	return (rec == nil || rec.Upstream == "") && p.Active(subject, rec)
}

// Cap returns the scopes the person subject may be granted and capped
// true when they signed in through a provider with a claim mapping
// (claim_scopes), from the claims their record holds: the consent page,
// token exchange and refresh bound a grant by it (Cap, Consent,
// CapRefresh). A person of such a provider without a record may hold
// none. Capped is false for everyone else (local people, providers
// without a mapping, subjects of no configured provider). A storage error
// is returned, with capped true, never taken for an answer.
func (p *People) Cap(ctx context.Context, subject string) (allowed []string, capped bool, err error) {
	id, _, ok := strings.Cut(subject, ":")
	if !ok {
		return nil, false, nil
	}
	up := p.upstream(id)
	if up == nil || up.Claims == nil || !up.Claims.Capped() {
		return nil, false, nil
	}
	rec, err := p.Record(ctx, subject)
	if err != nil || rec == nil {
		return nil, true, err
	}
	return up.Claims.Scopes(rec.Claims), true, nil
}

// Config returns what p was built from, for building people that differ
// in part (NewPeople copies it).
func (p *People) Config() PeopleConfig {
	return PeopleConfig{Local: p.local, Upstreams: slices.Clone(p.upstreams), Records: p.records, Reserved: slices.Clone(p.reserved)}
}

// UpstreamConfigured reports whether id is a configured upstream provider.
func (p *People) UpstreamConfigured(id string) bool { return p.upstream(id) != nil }

func (p *People) upstream(id string) *Upstream {
	for i := range p.upstreams {
		if p.upstreams[i].ID == id {
			return &p.upstreams[i]
		}
	}
	return nil
}
