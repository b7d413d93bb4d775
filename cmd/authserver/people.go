package main

import (
	"context"
	"errors"
	"slices"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
	"github.com/mcpauth/mcpauth/storage"
)

// attributes is the as.PersonDirectory of the configuration: a local
// account's attributes from users[], a person from a provider's from
// their record (email and groups as the provider last said) and the
// provider's tenant (upstreams[].tenant, or the value of
// upstreams[].tenant_claim the record keeps).
type attributes struct {
	local     map[string]config.User
	upstreams map[string]config.Upstream
	store     storage.UserStore
}

func newAttributes(cfg *config.Config, store storage.UserStore) *attributes {
	p := &attributes{local: map[string]config.User{}, upstreams: map[string]config.Upstream{}, store: store}
	for _, u := range cfg.Users {
		p.local[u.Username] = u
	}
	for _, u := range cfg.Upstreams {
		p.upstreams[u.ID] = u
	}
	return p
}

// Person implements as.PersonDirectory.
func (p *attributes) Person(ctx context.Context, subject string) (as.Person, bool, error) {
	if u, ok := p.local[subject]; ok {
		return as.Person{Email: u.Email, Groups: slices.Clone(u.Groups), Tenant: u.Tenant}, true, nil
	}
	rec, err := p.store.GetUser(ctx, subject)
	if errors.Is(err, storage.ErrNotFound) {
		return as.Person{}, false, nil
	}
	if err != nil {
		return as.Person{}, false, err
	}
	up, ok := p.upstreams[rec.Upstream]
	if !ok {
		return as.Person{}, false, nil
	}
	out := as.Person{Email: rec.Email, Groups: slices.Clone(rec.Groups), Tenant: up.Tenant}
	if up.TenantClaim != "" {
		out.Tenant = ""
		if v := rec.Claims[up.TenantClaim]; len(v) > 0 {
			out.Tenant = v[0]
		}
	}
	return out, true, nil
}
