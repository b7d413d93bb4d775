package ops

import (
	"context"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcpauth/mcpauth/storage"
)

// Page sizes of ListAudit.
const (
	DefaultAuditPage = 50
	MaxAuditPage     = 500
)

// AuditQuery selects the audit events ListAudit returns. Empty fields
// match every event; Event ending in "." matches every event it prefixes
// ("admin." every admin action).
type AuditQuery struct {
	User, Client, Event string
	// Before, when not 0, returns only events older than the one with
	// that id: the NextBefore of the previous page.
	Before int64
	// Limit is the page size, 1 to MaxAuditPage; 0 is DefaultAuditPage.
	Limit int
}

// AuditEvent is one audit event kept in storage as an operator sees it.
type AuditEvent struct {
	ID           int64           `json:"id"`
	Time         time.Time       `json:"time"`
	Event        string          `json:"event"`
	Subject      string          `json:"sub,omitempty"`
	ClientID     string          `json:"client_id,omitempty"`
	AdminSubject string          `json:"admin_subject,omitempty"`
	Detail       json.RawMessage `json:"detail,omitempty"`
}

// AuditPage is one page of ListAudit, newest first. NextBefore, when not
// 0, is the AuditQuery.Before of the next page.
type AuditPage struct {
	Events     []AuditEvent `json:"events"`
	NextBefore int64        `json:"next_before,omitempty"`
}

// maxAuditFilter bounds the length of a filter value.
const maxAuditFilter = 1024

// ListAudit returns a page of the audit events the servers keep in
// storage (admin.audit_retention), newest first, filtered by q.
func (o *Ops) ListAudit(ctx context.Context, q AuditQuery) (AuditPage, error) {
	for _, f := range []struct{ name, v string }{{"user", q.User}, {"client", q.Client}, {"event", q.Event}} {
		if len(f.v) > maxAuditFilter || !utf8.ValidString(f.v) || strings.IndexByte(f.v, 0) >= 0 {
			return AuditPage{}, invalidf("%s must be UTF-8 text of at most %d bytes", f.name, maxAuditFilter)
		}
	}
	if q.Before < 0 {
		return AuditPage{}, invalidf("before must be the next_before of a previous page")
	}
	switch {
	case q.Limit == 0:
		q.Limit = DefaultAuditPage
	case q.Limit < 0 || q.Limit > MaxAuditPage:
		return AuditPage{}, invalidf("limit must be from 1 to %d", MaxAuditPage)
	}
	es, err := o.Store.ListAuditEvents(ctx, storage.AuditFilter{
		Subject: q.User, ClientID: q.Client, Event: q.Event, BeforeID: q.Before, Limit: q.Limit + 1,
	})
	if err != nil {
		return AuditPage{}, err
	}
	page := AuditPage{Events: make([]AuditEvent, 0, min(len(es), q.Limit))}
	for i, e := range es {
		if i == q.Limit {
			page.NextBefore = es[i-1].ID
			break
		}
		v := AuditEvent{ID: e.ID, Time: e.Time.UTC(), Event: e.Event, Subject: e.Subject, ClientID: e.ClientID, AdminSubject: e.AdminSubject}
		if len(e.Detail) > 0 {
			if json.Valid(e.Detail) {
				v.Detail = e.Detail
			} else {
				v.Detail, _ = json.Marshal(string(e.Detail))
			}
		}
		page.Events = append(page.Events, v)
	}
	return page, nil
}

// HourlyCounts are the counts of the hours of a chart, oldest first.
type HourlyCounts struct {
	// Hours are the starts of the hours (UTC), one an hour, the last the
	// current one.
	Hours []time.Time `json:"hours"`
	// Counts holds, for each name asked for, one count per hour of Hours
	// (0 for an hour without a stored count).
	Counts map[string][]int64 `json:"counts"`
}

// HourlyCounts returns the stored counts of names (auditsink's
// tokens_issued, refusals, logins, login_failures) for the hours hours
// up to the one holding now, the counts of every instance added up.
func (o *Ops) HourlyCounts(ctx context.Context, now time.Time, hours int, names ...string) (HourlyCounts, error) {
	if hours < 1 || hours > 24*31 {
		return HourlyCounts{}, invalidf("hours must be from 1 to %d", 24*31)
	}
	last := now.UTC().Truncate(time.Hour)
	first := last.Add(-time.Duration(hours-1) * time.Hour)
	out := HourlyCounts{Hours: make([]time.Time, hours), Counts: make(map[string][]int64, len(names))}
	for i := range out.Hours {
		out.Hours[i] = first.Add(time.Duration(i) * time.Hour)
	}
	for _, n := range names {
		out.Counts[n] = make([]int64, hours)
	}
	cs, err := o.Store.ListStats(ctx, first)
	if err != nil {
		return HourlyCounts{}, err
	}
	for _, c := range cs {
		i := int(c.Hour.Sub(first) / time.Hour)
		if series, ok := out.Counts[c.Name]; ok && i >= 0 && i < hours {
			series[i] += c.Count
		}
	}
	return out, nil
}
