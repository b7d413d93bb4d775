package main

import (
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"slices"
	"time"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/console"
)

// consolePurpose is the HKDF info (RFC 5869 §3.2) under which the
// console's client secret is derived from the server's secret: every
// instance sharing the secret derives the same one, and it changes with it.
const consolePurpose = "mcpauth console client secret"

func consoleSecret(secret []byte) string {
	k, err := hkdf.Key(sha256.New, secret, nil, consolePurpose, 32)
	if err != nil {
		panic(err) // only for a secret hkdf refuses, which serverSecret never returns
	}
	return base64.RawURLEncoding.EncodeToString(k)
}

// consoleClient is the console's own confidential client when the admin
// listener is on: the authorization code grant with refresh, for the admin
// resource and scope only, redirecting to the console's callback.
func consoleClient(cfg *config.Config, secret []byte) []as.Client {
	if !cfg.AdminEnabled() {
		return nil
	}
	return []as.Client{{
		ID:           config.ConsoleClientID,
		Name:         "mcpauth console",
		Secret:       consoleSecret(secret),
		RedirectURIs: []string{cfg.ConsoleURL() + "/callback"},
		GrantTypes:   []string{"authorization_code", "refresh_token"},
		Scopes:       []string{config.AdminScope},
		Resources:    []string{cfg.AdminResource()},
	}}
}

// newConsole builds the console over the current generation: its
// operations, its people (who holds the admin scope), the stored sessions.
func (s *server) newConsole(inProcessClient *http.Client) (*console.Console, error) {
	cfg := s.cfg
	return console.New(console.Config{
		Issuer:       cfg.Issuer,
		BaseURL:      cfg.ConsoleURL(),
		ClientID:     config.ConsoleClientID,
		ClientSecret: consoleSecret(s.secret),
		Resource:     cfg.AdminResource(),
		HTTPClient:   inProcessClient,
		Secret:       s.secret,
		SessionTTL:   cfg.Admin.ConsoleSessionTTL.D(),
		Ops:          func() console.Operations { return s.current().ops },
		Sessions:     s.store,
		Allowed: func(ctx context.Context, subject string) (bool, error) {
			allowed, capped, err := s.current().people.CapOn(ctx, subject, cfg.AdminResource(), []string{config.AdminScope})
			if err != nil {
				return false, err
			}
			return !capped || slices.Contains(allowed, config.AdminScope), nil
		},
		AuditKept:    cfg.KeptAuditFor() > 0,
		KeyRetention: as.KeyRetention(cfg.Tokens.AccessTTL.D(), cfg.Signing.KeyReload.D()),
		Logger:       s.log.With("component", "console"),
		Now:          time.Now,
	})
}
