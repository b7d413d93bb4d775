package sqlstore

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

const auditCols = `id, time, event, subject, client_id, admin_subject, detail`

// AuditText is s as every backend keeps an audit event's text: invalid
// UTF-8 and NUL (which PostgreSQL text cannot hold) become U+FFFD.
func AuditText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// AuditRow is an event as AppendAuditEvents stores it: its text made
// storable and a zero Time replaced by now.
func AuditRow(e storage.AuditEvent, now time.Time) storage.AuditEvent {
	if e.Time.IsZero() {
		e.Time = now
	}
	e.Event, e.Subject, e.ClientID, e.AdminSubject = AuditText(e.Event), AuditText(e.Subject), AuditText(e.ClientID), AuditText(e.AdminSubject)
	return e
}

// AppendAuditEvents implements storage.AuditStore with one insert per
// event in one transaction (the ids follow the order of events).
func (s *Store) AppendAuditEvents(ctx context.Context, events []storage.AuditEvent) error {
	if len(events) == 0 {
		return nil
	}
	now := time.Now()
	return s.d.InTx(ctx, func(q Querier) error {
		for _, e := range events {
			e = AuditRow(e, now)
			if _, err := q.Exec(ctx, `INSERT INTO audit_events (time, event, subject, client_id, admin_subject, detail)
				VALUES ($1, $2, $3, $4, $5, $6)`,
				s.d.Time(e.Time), e.Event, e.Subject, e.ClientID, e.AdminSubject, bytesOrNil(e.Detail)); err != nil {
				return s.fail(err)
			}
		}
		return nil
	})
}

// ListAuditEvents implements storage.AuditStore. Only the conditions of
// the filter's set fields are written, so that each shape of filter is a
// statement of its own whose plan uses that field's index (subject, id),
// (client_id, id) or (event, id), read backwards from BeforeID. An event
// prefix is the range from the prefix to the prefix with its final '.'
// raised to '/', which compares bytewise in both databases; alone, it is
// listed as the events it names (auditPrefix).
func (s *Store) ListAuditEvents(ctx context.Context, f storage.AuditFilter) ([]storage.AuditEvent, error) {
	out := []storage.AuditEvent{}
	if f.Limit <= 0 || !s.storable(f.Subject, f.ClientID, f.Event) {
		return out, nil // unstorable text was stored replaced: nothing matches it
	}
	if strings.HasSuffix(f.Event, ".") {
		names, err := s.auditNames(ctx, f.Event)
		if err != nil {
			return nil, err
		}
		if len(names) <= maxPrefixNames {
			return s.auditPrefix(ctx, names, f, out)
		}
	}
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.Subject != "" {
		where = append(where, "subject = "+arg(f.Subject))
	}
	if f.ClientID != "" {
		where = append(where, clientCond(f)+arg(f.ClientID))
	}
	switch {
	case strings.HasSuffix(f.Event, "."):
		where = append(where, "event >= "+arg(f.Event)+s.syn.Collate+" AND event < "+arg(prefixEnd(f.Event))+s.syn.Collate)
	case f.Event != "":
		where = append(where, "event = "+arg(f.Event))
	}
	if f.BeforeID != 0 {
		where = append(where, "id < "+arg(f.BeforeID))
	}
	q := `SELECT ` + auditCols + ` FROM audit_events`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY id DESC LIMIT ` + arg(f.Limit)
	return s.scanAudit(ctx, out, q, args...)
}

// clientCond is the start of the condition on the client: with a person
// as well, written so that no index of client_id can serve it, and the
// person's index is read (a client's events are all of its people's; a
// planner without statistics, as SQLite's, might take either).
func clientCond(f storage.AuditFilter) string {
	if f.Subject != "" {
		return "client_id || '' = "
	}
	return "client_id = "
}

// prefixEnd is the least string above every string that starts with
// prefix, which ends in '.'.
func prefixEnd(prefix string) string { return prefix[:len(prefix)-1] + "/" }

// maxPrefixNames bounds how many events auditPrefix lists at once.
const maxPrefixNames = 64

// auditNames returns the distinct events that start with prefix, one
// index lookup each (a loose index scan of (event, id)), not a read of
// every event they name.
func (s *Store) auditNames(ctx context.Context, prefix string) ([]string, error) {
	names, err := ScanStrings(s.d.Read(ctx).Query(ctx, `WITH RECURSIVE names(v) AS (
			SELECT min(event) FROM audit_events WHERE event >= $1`+s.syn.Collate+` AND event < $2`+s.syn.Collate+`
			UNION ALL
			SELECT (SELECT min(event) FROM audit_events WHERE event > names.v AND event < $2`+s.syn.Collate+`)
			FROM names WHERE names.v IS NOT NULL)
		SELECT v FROM names WHERE v IS NOT NULL LIMIT $3`, prefix, prefixEnd(prefix), maxPrefixNames+1))
	if err != nil {
		return nil, s.fail(err)
	}
	return names, nil
}

// auditPrefix lists the events f selects by a prefix, given the events
// it names: the newest f.Limit of each (with f's person and client), read
// backwards from BeforeID in (event, id), (subject, event, id) or
// (client_id, event, id), then the newest f.Limit of them all. Read as one
// range of the index, the newest would only come out of a sort of every
// event the prefix names.
func (s *Store) auditPrefix(ctx context.Context, names []string, f storage.AuditFilter, out []storage.AuditEvent) ([]storage.AuditEvent, error) {
	if len(names) == 0 {
		return out, nil
	}
	before := int64(math.MaxInt64)
	if f.BeforeID != 0 {
		before = f.BeforeID
	}
	args := []any{before, f.Limit}
	cond := ""
	if f.Subject != "" {
		args = append(args, f.Subject)
		cond += " AND subject = $" + strconv.Itoa(len(args))
	}
	if f.ClientID != "" {
		args = append(args, f.ClientID)
		cond += " AND " + clientCond(f) + "$" + strconv.Itoa(len(args))
	}
	parts := make([]string, len(names))
	for i, n := range names {
		args = append(args, n)
		parts[i] = `SELECT * FROM (SELECT ` + auditCols + ` FROM audit_events WHERE event = $` + strconv.Itoa(len(args)) + cond +
			` AND id < $1 ORDER BY id DESC LIMIT $2) p` + strconv.Itoa(i)
	}
	q := strings.Join(parts, " UNION ALL ") + ` ORDER BY id DESC LIMIT $2`
	return s.scanAudit(ctx, out, q, args...)
}

// scanAudit runs a query of auditCols and appends its events to out.
func (s *Store) scanAudit(ctx context.Context, out []storage.AuditEvent, q string, args ...any) ([]storage.AuditEvent, error) {
	rows, err := s.d.Read(ctx).Query(ctx, q, args...)
	return collect(s, out, rows, err, func(r Row, e *storage.AuditEvent) error {
		if err := r.Scan(&e.ID, s.d.ScanTime(&e.Time), &e.Event, &e.Subject, &e.ClientID, &e.AdminSubject, &e.Detail); err != nil {
			return err
		}
		if len(e.Detail) == 0 {
			e.Detail = nil
		}
		return nil
	})
}

// DeleteAuditEventsBefore implements storage.AuditStore. A limit <= 0
// deletes nothing.
func (s *Store) DeleteAuditEventsBefore(ctx context.Context, before time.Time, limit int) (int, error) {
	return s.deleteBatch(ctx, "audit_events", "id", "time < $1", before, limit)
}

// StatRows returns counts merged by (Hour truncated to the hour in UTC,
// Name; a zero Hour is now's), without zero counts, sorted by Hour then Name: the order in
// which AddStats writes them, so that concurrent callers take their row
// locks in one order and never deadlock.
func StatRows(counts []storage.StatCount, now time.Time) []storage.StatCount {
	type key struct {
		hour int64
		name string
	}
	sum := map[key]int64{}
	for _, c := range counts {
		if c.Hour.IsZero() {
			c.Hour = now
		}
		sum[key{c.Hour.UTC().Truncate(time.Hour).Unix(), c.Name}] += c.Count
	}
	out := make([]storage.StatCount, 0, len(sum))
	for k, n := range sum {
		if n != 0 {
			out = append(out, storage.StatCount{Hour: time.Unix(k.hour, 0).UTC(), Name: k.name, Count: n})
		}
	}
	slices.SortFunc(out, func(a, b storage.StatCount) int {
		return cmp.Or(a.Hour.Compare(b.Hour), strings.Compare(a.Name, b.Name))
	})
	return out
}

// AddStats implements storage.StatsStore: one upsert that adds to the
// stored count per (hour, name), in one transaction.
func (s *Store) AddStats(ctx context.Context, counts []storage.StatCount) error {
	rows := StatRows(counts, time.Now())
	if len(rows) == 0 {
		return nil
	}
	for _, c := range rows {
		if err := s.checkText(c.Name); err != nil {
			return err
		}
	}
	return s.d.InTx(ctx, func(q Querier) error {
		for _, c := range rows {
			if _, err := q.Exec(ctx, `INSERT INTO hourly_stats (hour, name, count) VALUES ($1, $2, $3)
				ON CONFLICT (hour, name) DO UPDATE SET count = hourly_stats.count + excluded.count`,
				s.d.Time(c.Hour), c.Name, c.Count); err != nil {
				return s.fail(err)
			}
		}
		return nil
	})
}

// ListStats implements storage.StatsStore.
func (s *Store) ListStats(ctx context.Context, since time.Time) ([]storage.StatCount, error) {
	var from any = s.d.Time(since)
	if since.IsZero() {
		from = s.d.Time(time.Unix(0, 0))
	}
	rows, err := s.d.Read(ctx).Query(ctx, `SELECT hour, name, count FROM hourly_stats WHERE hour >= $1
		ORDER BY hour, name`+s.syn.Collate, from)
	return collect(s, []storage.StatCount{}, rows, err, func(r Row, c *storage.StatCount) error {
		return r.Scan(s.d.ScanTime(&c.Hour), &c.Name, &c.Count)
	})
}

// DeleteStatsBefore implements storage.StatsStore. A limit <= 0 deletes
// nothing.
func (s *Store) DeleteStatsBefore(ctx context.Context, before time.Time, limit int) (int, error) {
	return s.deleteBatch(ctx, "hourly_stats", "hour, name", "hour < $1", before, limit)
}
