package main

import (
	"context"
	"slices"
	"testing"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

func TestPeopleGivesLocalAndUpstreamAttributes(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	for _, u := range []*storage.User{
		{Subject: "corp:ann", Upstream: "corp", UpstreamSubject: "ann", Email: "ann@corp.example", Groups: []string{"ops"}, Claims: map[string][]string{"org": {"corp-eu", "x"}}},
		{Subject: "fixed:bob", Upstream: "fixed", UpstreamSubject: "bob", Email: "bob@fixed.example"},
		{Subject: "gone:eve", Upstream: "gone", UpstreamSubject: "eve"},
	} {
		if _, err := st.RecordLogin(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	p := newAttributes(&config.Config{
		Users:     []config.User{{Username: "alice", Email: "alice@example.com", Groups: []string{"dev"}, Tenant: "acme"}},
		Upstreams: []config.Upstream{{ID: "corp", TenantClaim: "org"}, {ID: "fixed", Tenant: "fixed-co"}},
	}, st)
	for _, tc := range []struct {
		sub  string
		want as.Person
		ok   bool
	}{
		{"alice", as.Person{Email: "alice@example.com", Groups: []string{"dev"}, Tenant: "acme"}, true},
		{"corp:ann", as.Person{Email: "ann@corp.example", Groups: []string{"ops"}, Tenant: "corp-eu"}, true},
		{"fixed:bob", as.Person{Email: "bob@fixed.example", Tenant: "fixed-co"}, true},
		{"gone:eve", as.Person{}, false},
		{"nobody", as.Person{}, false},
	} {
		got, ok, err := p.Person(ctx, tc.sub)
		if err != nil || ok != tc.ok || got.Email != tc.want.Email || got.Tenant != tc.want.Tenant || !slices.Equal(got.Groups, tc.want.Groups) {
			t.Errorf("%s: %+v %v %v, want %+v %v", tc.sub, got, ok, err, tc.want, tc.ok)
		}
	}
}
