package storagetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// Awkward are strings that have broken storage layers before: SQL and
// array-literal syntax, NUL, invalid UTF-8, long values. Backends may refuse
// some of them, but must then write nothing.
var Awkward = []string{
	"",
	"plain",
	"'; DROP TABLE clients; --",
	`{"a","b"}`,
	"NULL",
	"a,b",
	`back\slash "quote"`,
	"ünïcödé ✓ 𝄞",
	"nul\x00byte",
	"bad\xffutf8",
	"\t\n\r",
	strings.Repeat("long", 4096),
}

// CheckRoundTrip writes one record of each kind built from a, b and raw, and
// checks that each write either fails and leaves nothing behind, or reads
// back exactly. unique keeps the keys of successive calls apart. It is the
// body of every backend's fuzz target.
func CheckRoundTrip(t *testing.T, s storage.Store, unique, a, b string, raw []byte) {
	t.Helper()
	ctx := context.Background()
	at := now()

	c := &storage.Client{ID: unique + a, Name: b, RedirectURIs: []string{a, b}, Scopes: []string{b},
		Metadata: raw, SecretHash: raw, Source: a, CreatedAt: at, UpdatedAt: at}
	if err := s.CreateClient(ctx, c); err != nil {
		refused(t, err, "CreateClient")
		_, gerr := s.GetClient(ctx, c.ID)
		if !errors.Is(gerr, storage.ErrNotFound) {
			t.Fatalf("CreateClient failed (%v) but GetClient = %v", err, gerr)
		}
	} else {
		same(t, "client", getClient(t, s, c.ID), normClient(*c))
	}

	tok := &storage.Token{Kind: storage.KindRefreshToken, Signature: unique + a, RequestID: b, ClientID: a,
		Subject: b, Active: true, CreatedAt: at, ExpiresAt: at.Add(time.Hour), Data: raw}
	if err := s.CreateToken(ctx, tok); err != nil {
		refused(t, err, "CreateToken")
		_, gerr := s.GetToken(ctx, tok.Kind, tok.Signature)
		if !errors.Is(gerr, storage.ErrNotFound) {
			t.Fatalf("CreateToken failed (%v) but GetToken = %v", err, gerr)
		}
	} else {
		same(t, "token", getToken(t, s, tok.Kind, tok.Signature), normToken(*tok))
	}

	con := &storage.Consent{Subject: unique + a, ClientID: b, Resource: a, Scopes: []string{a, b}, GrantedAt: at}
	if err := s.PutConsent(ctx, con); err != nil {
		refused(t, err, "PutConsent")
		_, gerr := s.GetConsent(ctx, con.Subject, con.ClientID, con.Resource)
		if !errors.Is(gerr, storage.ErrNotFound) {
			t.Fatalf("PutConsent failed (%v) but GetConsent = %v", err, gerr)
		}
	} else {
		same(t, "consent", getConsent(t, s, con.Subject, con.ClientID, con.Resource), normConsent(*con))
	}

	if err := s.UseJTI(ctx, unique+a, time.Now().Add(time.Hour)); err != nil {
		refused(t, err, "UseJTI")
	} else if err := s.UseJTI(ctx, unique+a, time.Now().Add(time.Hour)); !errors.Is(err, storage.ErrAlreadyUsed) {
		t.Fatalf("second UseJTI(%q) = %v, want ErrAlreadyUsed", unique+a, err)
	}

	checkUserRoundTrip(t, s, unique, a, b, raw)
}

// refused fails t when err says something else than "this value cannot be
// stored": a store that is down or a duplicate is not a refusal.
func refused(t *testing.T, err error, what string) {
	t.Helper()
	if errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("%s: %v", what, err)
	}
}

var roundTripCases = []testCase{
	{"awkward strings are stored exactly or refused without a trace", func(t *testing.T, s storage.Store) {
		for i, a := range Awkward {
			for j, b := range Awkward {
				CheckRoundTrip(t, s, string(rune('A'+i))+string(rune('A'+j))+":", a, b, []byte(a+b))
			}
		}
	}},
}
