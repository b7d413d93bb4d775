package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/as/policy"
	"github.com/mcpauth/mcpauth/storage"
)

// LocalUser is a users: entry of the configuration file.
type LocalUser struct {
	Username string
	Disabled bool // users[].disabled
}

// ErrDisabledInConfig: the user is disabled by the configuration file,
// which only editing that file changes.
var ErrDisabledInConfig = errors.New("disabled in the configuration file; remove users[].disabled (and reload with SIGHUP) to enable the user")

// User is a person as an operator sees it: a configured local user, a
// person with a stored record (a local user who logged in, a person who
// signed in through an upstream), or both. It never holds the upstream's
// refresh token.
type User struct {
	Subject string `json:"subject"`
	// Source is "local" (a users: entry, or a record without upstream) or
	// "upstream".
	Source          string              `json:"source"`
	Upstream        string              `json:"upstream,omitempty"`
	UpstreamSubject string              `json:"upstream_subject,omitempty"`
	Name            string              `json:"name,omitempty"`
	Email           string              `json:"email,omitempty"`
	Groups          []string            `json:"groups"`
	Claims          map[string][]string `json:"claims,omitempty"`
	// Configured: a users: entry of the configuration file.
	Configured bool `json:"configured"`
	Disabled   bool `json:"disabled"`
	// DisabledBy says what disables the user: "config" (users[].disabled)
	// or "admin" (disabled with `users disable` or the admin API); "" when
	// enabled. Both may hold; "config" is named first.
	DisabledBy string `json:"disabled_by,omitempty"`
	// Active: the person may log in and use their grants
	// (policy.People.Active).
	Active    bool       `json:"active"`
	FirstSeen *time.Time `json:"first_seen,omitempty"`
	LastSeen  *time.Time `json:"last_seen,omitempty"`
	// CheckedAt is when the upstream last confirmed the person's session.
	CheckedAt *time.Time `json:"checked_at,omitempty"`
}

// UserChange is the outcome of DisableUser.
type UserChange struct {
	User User `json:"user"`
	// RevokedGrants are the grants the disable revoked.
	RevokedGrants []as.Grant `json:"revoked_grants"`
	// EndedSessions is how many browser sessions it ended.
	EndedSessions int `json:"ended_sessions"`
}

// people are the configured users and upstreams, as the server's
// policy.People has them: the rule of who is active is the server's.
func (o *Ops) people() *policy.People {
	ups := make([]policy.Upstream, 0, len(o.Upstreams))
	for _, id := range o.Upstreams {
		ups = append(ups, policy.Upstream{ID: id})
	}
	return policy.NewPeople(policy.PeopleConfig{Local: localDirectory(o.Users), Upstreams: ups})
}

// localDirectory answers policy.Directory from the configured users.
type localDirectory []LocalUser

func (d localDirectory) UserActive(name string) bool {
	u := d.find(name)
	return u != nil && !u.Disabled
}

func (d localDirectory) find(name string) *LocalUser {
	for i := range d {
		if d[i].Username == name {
			return &d[i]
		}
	}
	return nil
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// userView merges a configured user (nil if none) and a record (nil if
// none) of one subject.
func (o *Ops) userView(subject string, local *LocalUser, rec *storage.User) User {
	v := User{Subject: subject, Source: "local", Groups: []string{}, Configured: local != nil}
	var disabledBy []string
	if local != nil && local.Disabled {
		disabledBy = append(disabledBy, "config")
	}
	if rec != nil {
		if rec.Upstream != "" {
			v.Source = "upstream"
		}
		v.Upstream, v.UpstreamSubject, v.Name, v.Email = rec.Upstream, rec.UpstreamSubject, rec.Name, rec.Email
		v.Groups = nonNil(rec.Groups)
		v.Claims = rec.Claims
		v.FirstSeen, v.LastSeen, v.CheckedAt = timePtr(rec.FirstSeen), timePtr(rec.LastSeen), timePtr(rec.CheckedAt)
		if rec.Disabled {
			disabledBy = append(disabledBy, "admin")
		}
	}
	v.Disabled = len(disabledBy) > 0
	v.DisabledBy = strings.Join(disabledBy, ",")
	v.Active = o.people().Active(subject, rec)
	return v
}

// MaxUserPage caps ListUsers' limit.
const MaxUserPage = 1000

// ListUsers returns up to limit people whose subject sorts after after
// (byte order), in subject order: the configured local users (even those
// who never logged in) merged with the stored records. next is the
// subject to pass as after for the following page, "" after the last one.
// A limit <= 0 or above MaxUserPage means MaxUserPage.
func (o *Ops) ListUsers(ctx context.Context, after string, limit int) (users []User, next string, err error) {
	if limit <= 0 || limit > MaxUserPage {
		limit = MaxUserPage
	}
	// One more than asked tells whether another page follows.
	recs, err := o.Store.ListUsers(ctx, after, limit+1)
	if err != nil {
		return nil, "", err
	}
	var locals []string
	for _, u := range o.Users {
		if u.Username > after {
			locals = append(locals, u.Username)
		}
	}
	slices.Sort(locals)
	out := []User{}
	i, j := 0, 0
	for len(out) < limit+1 && (i < len(recs) || j < len(locals)) {
		switch {
		case j == len(locals) || i < len(recs) && recs[i].Subject < locals[j]:
			out = append(out, o.userView(recs[i].Subject, localDirectory(o.Users).find(recs[i].Subject), &recs[i]))
			i++
		case i == len(recs) || locals[j] < recs[i].Subject:
			out = append(out, o.userView(locals[j], localDirectory(o.Users).find(locals[j]), nil))
			j++
		default: // both
			out = append(out, o.userView(locals[j], localDirectory(o.Users).find(locals[j]), &recs[i]))
			i, j = i+1, j+1
		}
	}
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].Subject
	}
	return out, next, nil
}

// AllUsers pages through ListUsers to the end.
func (o *Ops) AllUsers(ctx context.Context) ([]User, error) {
	var all []User
	after := ""
	for {
		page, next, err := o.ListUsers(ctx, after, MaxUserPage)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" {
			return all, nil
		}
		after = next
	}
}

// lookUser returns the configured user and the record of subject;
// ErrNotFound when there is neither.
func (o *Ops) lookUser(ctx context.Context, subject string) (*LocalUser, *storage.User, error) {
	if subject == "" {
		return nil, nil, invalidf("a user subject is required")
	}
	local := localDirectory(o.Users).find(subject)
	rec, err := o.Store.GetUser(ctx, subject)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		rec = nil
	case err != nil:
		return nil, nil, err
	}
	if local == nil && rec == nil {
		return nil, nil, fmt.Errorf("user %q: %w", subject, ErrNotFound)
	}
	return local, rec, nil
}

// GetUser returns one person; ErrNotFound when subject is neither a
// configured user nor recorded.
func (o *Ops) GetUser(ctx context.Context, subject string) (*User, error) {
	local, rec, err := o.lookUser(ctx, subject)
	if err != nil {
		return nil, err
	}
	v := o.userView(subject, local, rec)
	return &v, nil
}

// DisableUser disables a person: they can no longer log in, every grant
// they gave is revoked (as.Server.RevokeGrants: refresh tokens refused,
// access tokens inactive at introspection and flagged in the status list,
// remembered consents gone) and their browser sessions end. It is
// idempotent: disabling again revokes what was issued since. ErrNotFound
// for a subject that is neither configured nor recorded.
func (o *Ops) DisableUser(ctx context.Context, actor, subject string) (*UserChange, error) {
	if o.Grants == nil {
		return nil, ErrNoGrants
	}
	if _, _, err := o.lookUser(ctx, subject); err != nil {
		return nil, err
	}
	// The flag first: from here on refresh and login are refused, so
	// nothing issued after the revocation below outlives it.
	if err := o.Store.SetUserDisabled(ctx, subject, true); err != nil {
		return nil, err
	}
	revoked, err := o.Grants.RevokeGrants(ctx, as.GrantFilter{User: subject})
	if err != nil {
		return nil, fmt.Errorf("user %q is disabled but revoking their grants failed (disable again to retry): %w", subject, err)
	}
	sessions, err := o.Store.ListSessions(ctx, subject)
	if err != nil {
		return nil, fmt.Errorf("user %q is disabled but ending their sessions failed (disable again to retry): %w", subject, err)
	}
	for _, s := range sessions {
		if err := o.Store.DeleteSession(ctx, subject, s.ID); err != nil {
			return nil, fmt.Errorf("user %q is disabled but ending their sessions failed (disable again to retry): %w", subject, err)
		}
	}
	if revoked == nil {
		revoked = []as.Grant{}
	}
	o.audit(ctx, actor, "admin.user.disabled", "sub", subject, "grants", len(revoked), "sessions", len(sessions))
	u, err := o.GetUser(ctx, subject)
	if err != nil {
		return nil, err
	}
	return &UserChange{User: *u, RevokedGrants: revoked, EndedSessions: len(sessions)}, nil
}

// EnableUser lets a disabled person log in again. Nothing revoked by the
// disable comes back: they log in and consent anew. A user disabled by the
// configuration file is refused with ErrDisabledInConfig; ErrNotFound for
// a subject that is neither configured nor recorded.
func (o *Ops) EnableUser(ctx context.Context, actor, subject string) (*User, error) {
	local, _, err := o.lookUser(ctx, subject)
	if err != nil {
		return nil, err
	}
	if local != nil && local.Disabled {
		return nil, fmt.Errorf("user %q: %w", subject, ErrDisabledInConfig)
	}
	if err := o.Store.SetUserDisabled(ctx, subject, false); err != nil {
		return nil, err
	}
	o.audit(ctx, actor, "admin.user.enabled", "sub", subject)
	return o.GetUser(ctx, subject)
}
