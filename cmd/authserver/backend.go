package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
	"github.com/mcpauth/mcpauth/migrations"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
	"github.com/mcpauth/mcpauth/storage/postgres"
	"github.com/mcpauth/mcpauth/storage/sqlite"
)

// migrator is what the SQL backends add to storage.Store.
type migrator interface {
	Migrate(ctx context.Context) ([]int, error)
	MigrationStatus(ctx context.Context) (migrations.Status, error)
}

// errNoMigrations: the backend has no schema (memory).
var errNoMigrations = errors.New("storage is memory: nothing to migrate")

// openBackend opens the backend named by the storage key.
func openBackend(ctx context.Context, cfg *config.Config) (storage.Store, error) {
	kind, path := cfg.StorageKind()
	switch kind {
	case "memory":
		return memory.New(), nil
	case "sqlite":
		return sqlite.Open(ctx, path)
	case "postgres":
		return postgres.Open(ctx, cfg.Storage, postgres.Options{})
	}
	return nil, fmt.Errorf("config: storage: unknown backend %q", cfg.Storage)
}

// openStore opens the configured backend and, when migrate is true, applies
// pending migrations (on PostgreSQL under an advisory lock, so instances
// starting together apply each version once).
func openStore(ctx context.Context, cfg *config.Config, migrate bool, log *slog.Logger) (storage.Store, error) {
	st, err := openBackend(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening storage: %w", err)
	}
	if m, ok := st.(migrator); ok && migrate {
		applied, err := m.Migrate(ctx)
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("migrating storage: %w", err)
		}
		if len(applied) > 0 {
			log.Info("applied migrations", "versions", applied)
		}
	}
	return st, nil
}
