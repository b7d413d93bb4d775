package policy

import (
	"context"
	"slices"
)

// Reserved is a scope of one resource that only the people it names may be
// granted, whatever client asks: the admin resource's admin scope, held
// by the people of admin.people and admin.groups. Client credentials have
// no person and are not bound by it (their client's ceiling is).
type Reserved struct {
	// Resource is the canonical URI of the resource (RFC 8707).
	Resource string
	// Scope is the reserved scope.
	Scope string
	// Subjects may be granted it.
	Subjects []string
	// Groups: a person whose record lists one of them may be granted it.
	Groups []string
}

// holds reports whether the person subject, with the groups of their record,
// may be granted r.Scope.
func (r *Reserved) holds(subject string, groups []string) bool {
	if slices.Contains(r.Subjects, subject) {
		return true
	}
	for _, g := range groups {
		if slices.Contains(r.Groups, g) {
			return true
		}
	}
	return false
}

// CapOn is Cap for a grant on resource, whose scopes are scopes: besides
// the claim mapping, a reserved scope of the resource (PeopleConfig.Reserved)
// is left out of what the person may be granted unless the reservation
// names them or one of their record's groups; the reservation, not the
// claim mapping, decides the reserved scope of a person it names. A
// person it leaves something
// out for is capped even without a claim mapping, to the resource's other
// scopes: the same rules then refuse a request naming the reserved scope
// (a *NotPermittedError, the "not permitted" page) and drop it from the
// defaults and from a refresh of an older grant. A storage error is
// returned, with capped true, never taken for an answer.
func (p *People) CapOn(ctx context.Context, subject, resource string, scopes []string) (allowed []string, capped bool, err error) {
	allowed, capped, err = p.Cap(ctx, subject)
	if err != nil {
		return nil, true, err
	}
	var denied, held []string
	var groups []string
	read := false
	for i := range p.reserved {
		r := &p.reserved[i]
		if r.Resource != resource || !slices.Contains(scopes, r.Scope) {
			continue
		}
		if !read {
			rec, err := p.Record(ctx, subject)
			if err != nil {
				return nil, true, err
			}
			if rec != nil {
				groups = rec.Groups
			}
			read = true
		}
		if r.holds(subject, groups) {
			held = append(held, r.Scope)
		} else {
			denied = append(denied, r.Scope)
		}
	}
	if capped {
		// The reservation, not the claim mapping, decides a reserved scope.
		for _, sc := range held {
			if !slices.Contains(allowed, sc) {
				allowed = append(slices.Clone(allowed), sc)
			}
		}
	}
	if len(denied) == 0 {
		return allowed, capped, nil
	}
	if !capped {
		allowed = slices.Clone(scopes)
	}
	return slices.DeleteFunc(slices.Clone(allowed), func(sc string) bool { return slices.Contains(denied, sc) }), true, nil
}
