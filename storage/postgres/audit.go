package postgres

import (
	"context"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/internal/sqlstore"
)

// AppendAuditEvents implements storage.AuditStore in one statement: the
// events travel as arrays and are inserted in their order, so that their
// ids follow it.
func (s *Store) AppendAuditEvents(ctx context.Context, events []storage.AuditEvent) error {
	if len(events) == 0 {
		return nil
	}
	now := time.Now()
	n := len(events)
	times := make([]time.Time, n)
	names, subjects, clients, admins := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	details := make([][]byte, n)
	for i, e := range events {
		e = sqlstore.AuditRow(e, now)
		times[i], names[i], subjects[i], clients[i], admins[i] = e.Time, e.Event, e.Subject, e.ClientID, e.AdminSubject
		if len(e.Detail) > 0 {
			details[i] = e.Detail
		}
	}
	_, err := s.q(ctx).Exec(ctx, `INSERT INTO audit_events (time, event, subject, client_id, admin_subject, detail)
		SELECT t, e, s, c, a, d
		FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[])
			WITH ORDINALITY AS u(t, e, s, c, a, d, n)
		ORDER BY n`, times, names, subjects, clients, admins, details)
	return mapErr(err)
}

// AddStats implements storage.StatsStore in one upsert of every count,
// merged and sorted (sqlstore.StatRows) so that concurrent callers lock
// the rows they share in one order.
func (s *Store) AddStats(ctx context.Context, counts []storage.StatCount) error {
	rows := sqlstore.StatRows(counts, time.Now())
	if len(rows) == 0 {
		return nil
	}
	hours, names, ns := make([]time.Time, len(rows)), make([]string, len(rows)), make([]int64, len(rows))
	for i, c := range rows {
		if !storable(c.Name) {
			return ErrUnstorable
		}
		hours[i], names[i], ns[i] = c.Hour, c.Name, c.Count
	}
	_, err := s.q(ctx).Exec(ctx, `INSERT INTO hourly_stats (hour, name, count)
		SELECT h, m, c FROM unnest($1::timestamptz[], $2::text[], $3::bigint[]) WITH ORDINALITY AS u(h, m, c, n)
		ORDER BY n
		ON CONFLICT (hour, name) DO UPDATE SET count = hourly_stats.count + excluded.count`, hours, names, ns)
	return mapErr(err)
}
