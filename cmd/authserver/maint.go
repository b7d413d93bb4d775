package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
	"github.com/mcpauth/mcpauth/migrations"
	"github.com/mcpauth/mcpauth/storage/open"
)

// gcLoop runs collect every gc.interval until ctx ends.
func (s *server) gcLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.GC.Interval.D())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.gcPass(ctx)
	}
}

func (s *server) gcPass(ctx context.Context) (gcResult, error) {
	res, err := collect(ctx, s.store, s.current().dcr, time.Now(), s.cfg.GC.BatchSize,
		keep{audit: s.cfg.KeptAuditFor(), stats: config.StatsRetention})
	if err != nil && !errors.Is(err, context.Canceled) {
		s.log.Warn("garbage collection failed", "err", err)
	} else {
		s.log.Info("garbage collection", "tokens", res.Tokens, "consents", res.Consents, "jtis", res.JTIs, "clients", res.Clients,
			"counters", res.Counters, "sessions", res.Sessions, "statuses", res.Statuses,
			"approvals", res.Approvals, "audit_events", res.AuditEvents, "stats", res.Stats)
	}
	return res, err
}

// gcOnce is `authserver gc`.
func gcOnce(ctx context.Context, cfg *config.Config, log *slog.Logger, e env) error {
	s, err := build(ctx, cfg, false, log, e)
	if err != nil {
		return err
	}
	defer s.close()
	res, err := s.gcPass(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "deleted %d tokens, %d consents, %d one-time ids, %d clients, %d counters, %d sessions, %d audit events, %d hourly counts\n",
		res.Tokens, res.Consents, res.JTIs, res.Clients, res.Counters, res.Sessions, res.AuditEvents, res.Stats)
	return nil
}

// migrate is `authserver migrate up|status`.
func migrate(ctx context.Context, cfg *config.Config, what string, e env) error {
	if kind, _ := cfg.StorageKind(); kind == "memory" {
		fmt.Fprintln(e.stdout, "storage is memory: nothing to migrate")
		return nil
	}
	switch what {
	case "up":
		applied, err := open.Up(ctx, cfg.Storage)
		if err != nil {
			return err
		}
		if len(applied) == 0 {
			fmt.Fprintln(e.stdout, "schema is up to date")
		}
		for _, v := range applied {
			fmt.Fprintf(e.stdout, "applied %04d\n", v)
		}
		return nil
	default:
		status, err := open.MigrationStatus(ctx, cfg.Storage)
		if err != nil {
			return err
		}
		fmt.Fprint(e.stdout, formatStatus(status))
		return nil
	}
}

// rotateKey is `authserver keys rotate`: it adds a signing key of the
// configured algorithm and retires the others. Running servers pick it up
// at their next key reload.
func rotateKey(ctx context.Context, cfg *config.Config, e env, asJSON bool) error {
	key, _, err := serverSecret(cfg)
	if err != nil {
		return err
	}
	if kind, _ := cfg.StorageKind(); kind == "memory" {
		return errors.New("keys rotate: storage is memory, which lives inside one serve process; nothing to rotate")
	}
	st, err := openStore(ctx, cfg, cfg.MigrateEnabled(), slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer st.Close()
	kid, err := as.RotateKey(ctx, st, key, cfg.Signing.Algorithm)
	if err != nil {
		return err
	}
	if asJSON {
		return printer{w: e.stdout, json: true}.encode(map[string]string{"signing_kid": kid, "alg": cfg.Signing.Algorithm})
	}
	fmt.Fprintf(e.stdout, "new signing key %s (%s); older keys stay in the JWKS until their tokens expire\n", kid, cfg.Signing.Algorithm)
	return nil
}

// formatStatus prints migration status one version a line.
func formatStatus(st migrations.Status) string {
	var b strings.Builder
	fmt.Fprintf(&b, "current version: %d\n", st.Current())
	for _, v := range st.Applied {
		fmt.Fprintf(&b, "  %04d applied\n", v)
	}
	for _, v := range st.Pending {
		fmt.Fprintf(&b, "  %04d pending\n", v)
	}
	for _, v := range st.Unknown {
		fmt.Fprintf(&b, "  %04d applied by a newer release (unknown to this binary)\n", v)
	}
	return b.String()
}
