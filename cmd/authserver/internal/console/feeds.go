package console

import (
	"context"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// StatsReader reads the hourly counts every instance adds to
// (storage.StatsStore).
type StatsReader interface {
	ListStats(ctx context.Context, since time.Time) ([]storage.StatCount, error)
}
