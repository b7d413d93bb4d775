package upstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mcpauth/mcpauth/internal/seal"
	"github.com/mcpauth/mcpauth/storage"
)

// SessionStore is the part of storage.UserStore a Rechecker uses.
type SessionStore interface {
	GetUser(ctx context.Context, subject string) (*storage.User, error)
	UpdateUpstreamSession(ctx context.Context, subject string, sealedRefresh []byte, checkedAt time.Time, groups []string, claims map[string][]string) error
}

// Rechecker confirms at a refresh of our tokens that a person who signed
// in through a provider is still who the provider says may hold the grant
// (upstreams[].recheck_after): when their record was last confirmed longer
// ago than the provider's interval, it uses the provider's refresh token,
// kept sealed in the record, to refresh the provider's session, reads the
// claims again, applies the allow rules and the claim mapping to the
// grant's scopes, and stores the rotated refresh token, groups and claims.
type Rechecker struct {
	// Providers by id, with the interval after which each rechecks (zero:
	// never).
	Providers map[string]*Provider
	After     map[string]time.Duration
	Store     SessionStore
	// Sealer opens and seals the refresh tokens; the subject is the
	// associated data (loginui.RefreshSealer).
	Sealer *seal.Sealer
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Refusal says why a recheck refused the person.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return "upstream: recheck refused: " + r.Reason }

// Recheck reports whether the person subject may go on holding a grant of
// scopes. It returns (true, nil) for anyone it does not recheck (a local
// person, a provider without recheck_after, a recent confirmation), (false,
// *Refusal) when the provider refuses the refresh token or the person no
// longer passes the allow rules or the mapping, and (false, err) when it
// cannot tell (the provider or the store is unavailable); the caller must
// not grant then either.
func (r *Rechecker) Recheck(ctx context.Context, subject string, scopes []string) (bool, error) {
	rec, err := r.Store.GetUser(ctx, subject)
	if errors.Is(err, storage.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	p := r.Providers[rec.Upstream]
	after := r.After[rec.Upstream]
	if rec.Upstream == "" || p == nil || after <= 0 {
		return true, nil
	}
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	if now.Sub(rec.CheckedAt) < after {
		return true, nil
	}
	if len(rec.UpstreamRefresh) == 0 {
		return false, &Refusal{Reason: "no refresh token of the provider to recheck with (ask for offline_access)"}
	}
	rt, err := r.Sealer.Open(rec.UpstreamRefresh, []byte(subject))
	if err != nil {
		return false, &Refusal{Reason: "the stored refresh token of the provider does not open"}
	}
	id, err := p.Refresh(ctx, string(rt), rec.UpstreamSubject)
	switch {
	case errors.Is(err, ErrUnavailable):
		return false, err
	case err != nil:
		return false, &Refusal{Reason: err.Error()}
	}
	// The provider may have rotated its refresh token: keep the new one,
	// and the claims it confirmed, whatever the verdict on this grant. Only
	// an approval counts as a confirmation (CheckedAt).
	sealed := r.Sealer.Seal([]byte(id.RefreshToken), []byte(subject))
	verdict := p.Check(id)
	if verdict == nil && p.Capped() {
		allowed := p.Scopes(id.Claims)
		for _, s := range scopes {
			if s != "offline_access" && !slices.Contains(allowed, s) {
				verdict = fmt.Errorf("the person's claims no longer allow scope %q", s)
				break
			}
		}
	}
	checked := now
	if verdict != nil {
		checked = rec.CheckedAt
	}
	if err := r.Store.UpdateUpstreamSession(ctx, subject, sealed, checked, id.Groups, id.Claims); err != nil {
		return false, err
	}
	if verdict != nil {
		return false, &Refusal{Reason: verdict.Error()}
	}
	return true, nil
}
