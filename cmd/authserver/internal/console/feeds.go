package console

import (
	"context"
	"time"
)

// StatsReader reads the hourly counters the server keeps.
type StatsReader interface {
	ListStats(ctx context.Context, since time.Time) ([]struct{}, error)
}

// AuditReader reads the audit events the server keeps.
type AuditReader interface {
	ListAuditEvents(ctx context.Context) ([]struct{}, error)
}
