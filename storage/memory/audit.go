package memory

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// auditText is an audit event's text as the SQL backends keep it: invalid
// UTF-8 and NUL become U+FFFD.
func auditText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

func cloneAudit(e storage.AuditEvent) storage.AuditEvent {
	e.Detail = slices.Clone(e.Detail)
	if len(e.Detail) == 0 {
		e.Detail = nil
	}
	return e
}

// AppendAuditEvents implements storage.AuditStore. Events are kept in a
// slice in ID order; a rolled-back transaction removes the ones it added.
func (s *Store) AppendAuditEvents(ctx context.Context, events []storage.AuditEvent) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if len(events) == 0 {
		return nil
	}
	now := time.Now()
	first := s.auditLast + 1
	for _, e := range events {
		e = cloneAudit(e)
		s.auditLast++
		e.ID = s.auditLast
		if e.Time.IsZero() {
			e.Time = now
		}
		e.Time = e.Time.UTC()
		e.Event, e.Subject, e.ClientID, e.AdminSubject = auditText(e.Event), auditText(e.Subject), auditText(e.ClientID), auditText(e.AdminSubject)
		s.audit = append(s.audit, e)
	}
	last := s.auditLast
	if t != nil {
		t.undo = append(t.undo, func() {
			s.audit = slices.DeleteFunc(s.audit, func(e storage.AuditEvent) bool { return e.ID >= first && e.ID <= last })
		})
	}
	return nil
}

// matchAudit reports whether e matches f (every field but the cursor and
// the limit).
func matchAudit(f storage.AuditFilter, e *storage.AuditEvent) bool {
	switch {
	case f.Subject != "" && e.Subject != f.Subject,
		f.ClientID != "" && e.ClientID != f.ClientID,
		strings.HasSuffix(f.Event, ".") && !strings.HasPrefix(e.Event, f.Event),
		f.Event != "" && !strings.HasSuffix(f.Event, ".") && e.Event != f.Event:
		return false
	}
	return true
}

// ListAuditEvents implements storage.AuditStore.
func (s *Store) ListAuditEvents(ctx context.Context, f storage.AuditFilter) ([]storage.AuditEvent, error) {
	if _, err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := []storage.AuditEvent{}
	if f.Limit <= 0 {
		return out, nil
	}
	end := len(s.audit)
	if f.BeforeID != 0 {
		end, _ = slices.BinarySearchFunc(s.audit, f.BeforeID, func(e storage.AuditEvent, id int64) int { return cmp.Compare(e.ID, id) })
	}
	for i := end - 1; i >= 0 && len(out) < f.Limit; i-- {
		if matchAudit(f, &s.audit[i]) {
			out = append(out, cloneAudit(s.audit[i]))
		}
	}
	return out, nil
}

// DeleteAuditEventsBefore implements storage.AuditStore. A limit <= 0
// deletes nothing.
func (s *Store) DeleteAuditEventsBefore(ctx context.Context, before time.Time, limit int) (int, error) {
	t, err := s.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	var gone []storage.AuditEvent
	s.audit = slices.DeleteFunc(s.audit, func(e storage.AuditEvent) bool {
		if len(gone) < limit && e.Time.Before(before) {
			gone = append(gone, e)
			return true
		}
		return false
	})
	if t != nil && len(gone) > 0 {
		t.undo = append(t.undo, func() {
			s.audit = append(s.audit, gone...)
			slices.SortFunc(s.audit, func(a, b storage.AuditEvent) int { return cmp.Compare(a.ID, b.ID) })
		})
	}
	return len(gone), nil
}

type statKey struct {
	hour int64 // Unix seconds of the hour's start
	name string
}

// AddStats implements storage.StatsStore.
func (s *Store) AddStats(ctx context.Context, counts []storage.StatCount) error {
	t, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	now := time.Now()
	for _, c := range counts {
		if c.Count == 0 {
			continue
		}
		if c.Hour.IsZero() {
			c.Hour = now
		}
		k := statKey{c.Hour.UTC().Truncate(time.Hour).Unix(), c.Name}
		put(t, s.stats, k, s.stats[k]+c.Count)
	}
	return nil
}

// ListStats implements storage.StatsStore.
func (s *Store) ListStats(ctx context.Context, since time.Time) ([]storage.StatCount, error) {
	if _, err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := []storage.StatCount{}
	for k, n := range s.stats {
		h := time.Unix(k.hour, 0).UTC()
		if !h.Before(since) {
			out = append(out, storage.StatCount{Hour: h, Name: k.name, Count: n})
		}
	}
	slices.SortFunc(out, func(a, b storage.StatCount) int {
		return cmp.Or(a.Hour.Compare(b.Hour), strings.Compare(a.Name, b.Name))
	})
	return out, nil
}

// DeleteStatsBefore implements storage.StatsStore. A limit <= 0 deletes
// nothing.
func (s *Store) DeleteStatsBefore(ctx context.Context, before time.Time, limit int) (int, error) {
	t, err := s.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	n := 0
	for k := range s.stats {
		if n >= limit {
			break
		}
		if time.Unix(k.hour, 0).Before(before) {
			del(t, s.stats, k)
			n++
		}
	}
	return n, nil
}
