package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/open"
)

// openStore opens the configured backend (storage/open) and, when migrate is
// true, first applies pending migrations (on PostgreSQL under an advisory
// lock, so instances starting together apply each version once).
func openStore(ctx context.Context, cfg *config.Config, migrate bool, log *slog.Logger) (storage.Store, error) {
	if migrate {
		applied, err := open.Up(ctx, cfg.Storage)
		if err != nil {
			return nil, fmt.Errorf("migrating storage: %w", err)
		}
		if len(applied) > 0 {
			log.Info("applied migrations", "versions", applied)
		}
	}
	st, err := open.Open(ctx, cfg.Storage)
	if err != nil {
		return nil, fmt.Errorf("opening storage: %w", err)
	}
	if kind, _ := cfg.StorageKind(); !migrate && kind != "memory" {
		if err := checkSchema(ctx, cfg, log); err != nil {
			st.Close()
			return nil, err
		}
	}
	return st, nil
}

// checkSchema refuses a database with pending migrations when migrations
// are off, with the command that fixes it, rather than failing later on a
// missing table.
func checkSchema(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	status, err := open.MigrationStatus(ctx, cfg.Storage)
	if err != nil {
		return fmt.Errorf("reading migration status: %w", err)
	}
	if len(status.Pending) > 0 {
		return fmt.Errorf("storage schema is at version %d and %d migration(s) are pending; run `authserver migrate up` (or start without --no-migrate / migrate_on_start: false)",
			status.Current(), len(status.Pending))
	}
	if len(status.Unknown) > 0 {
		log.Warn("the database was migrated by a newer release", "unknown_versions", status.Unknown)
	}
	return nil
}

// dbSystem is the OpenTelemetry db.system.name of the configured storage.
func dbSystem(cfg *config.Config) string {
	switch kind, _ := cfg.StorageKind(); kind {
	case "postgres":
		return "postgresql"
	case "":
		return "other_sql"
	default:
		return kind
	}
}
