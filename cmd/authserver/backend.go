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
	return st, nil
}
