package main

import (
	"context"
	"time"
)

// expirer is the part of storage the collector uses.
type expirer interface {
	DeleteExpiredTokens(ctx context.Context, before time.Time, limit int) (int, error)
	DeleteExpiredConsents(ctx context.Context, before time.Time, limit int) (int, error)
	DeleteExpiredJTIs(ctx context.Context, before time.Time, limit int) (int, error)
	DeleteExpiredCounters(ctx context.Context, before time.Time, limit int) (int, error)
	DeleteExpiredSessions(ctx context.Context, before time.Time, limit int) (int, error)
	DeleteExpiredStatuses(ctx context.Context, before time.Time, limit int) (int, error)
	DeleteExpiredApprovals(ctx context.Context, before time.Time, limit int) (int, error)
	DeleteAuditEventsBefore(ctx context.Context, before time.Time, limit int) (int, error)
	DeleteStatsBefore(ctx context.Context, before time.Time, limit int) (int, error)
}

// reaper deletes registered clients nobody uses (dcr.Handler).
type reaper interface {
	Reap(ctx context.Context, now time.Time) (int, error)
}

// gcResult counts what one pass removed.
type gcResult struct {
	Tokens, Consents, JTIs, Clients int
	Counters, Sessions, Statuses    int
	Approvals, AuditEvents, Stats   int
}

// keep is how long the records kept for the console stay: the audit
// events (admin.audit_retention; 0 keeps none) and the hourly counts.
type keep struct {
	audit, stats time.Duration
}

// collect runs one garbage-collection pass: expired codes and tokens,
// consents, one-time ids, throttle counters, browser sessions,
// consents, one-time ids, throttle counters, browser sessions,
// status-list records, approvals of tool calls, and the audit events and
// hourly counts older than k keeps them, are deleted in batches of batch
// records (each batch one short statement, so no long locks), then idle
// registered clients are reaped. It stops early when ctx ends.
func collect(ctx context.Context, st expirer, r reaper, now time.Time, batch int, k keep) (gcResult, error) {
	var res gcResult
	for _, step := range []struct {
		n      *int
		del    func(context.Context, time.Time, int) (int, error)
		before time.Time
	}{
		{&res.Tokens, st.DeleteExpiredTokens, now},
		{&res.Consents, st.DeleteExpiredConsents, now},
		{&res.JTIs, st.DeleteExpiredJTIs, now},
		{&res.Counters, st.DeleteExpiredCounters, now},
		{&res.Sessions, st.DeleteExpiredSessions, now},
		{&res.Statuses, st.DeleteExpiredStatuses, now},
		{&res.Approvals, st.DeleteExpiredApprovals, now},
		{&res.AuditEvents, st.DeleteAuditEventsBefore, now.Add(-k.audit)},
		{&res.Stats, st.DeleteStatsBefore, now.Add(-k.stats)},
	} {
		for {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			n, err := step.del(ctx, step.before, batch)
			*step.n += n
			if err != nil {
				return res, err
			}
			if n < batch {
				break
			}
		}
	}
	if r != nil {
		n, err := r.Reap(ctx, now)
		res.Clients = n
		if err != nil {
			return res, err
		}
	}
	return res, nil
}
