package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/ops"
)

type auditPage struct {
	Subject, Client, Event string
	Before                 int64
	Events                 []auditRow
	Next                   int64
	Kept                   bool
}

type auditRow struct {
	ID                            int64
	Time                          time.Time
	Event, Subject, Client, Admin string
	Detail                        string
}

// audit lists the kept audit events, newest first, filtered by person,
// client and event (an event ending in "." matches as a prefix), a page
// at a time (the store's cursor, ?before=ID).
func (c *Console) audit(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	d := auditPage{Subject: q.Get("subject"), Client: q.Get("client"), Event: q.Get("event"), Kept: c.cfg.AuditKept}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			c.render(w, http.StatusBadRequest, "message.html", &view{Title: "Bad page", Detail: "before must be an event id from the Next link.", Nav: "audit", Who: s.Subject, CSRF: s.CSRF})
			return
		}
		d.Before = n
	}
	if d.Kept {
		page, err := c.cfg.Ops().ListAudit(r.Context(), ops.AuditQuery{User: d.Subject, Client: d.Client, Event: d.Event, Before: d.Before, Limit: pageSize})
		if err != nil {
			c.failAs(w, s, err)
			return
		}
		d.Next = page.NextBefore
		for _, e := range page.Events {
			d.Events = append(d.Events, auditRow{ID: e.ID, Time: e.Time, Event: e.Event, Subject: e.Subject, Client: e.ClientID, Admin: e.AdminSubject, Detail: detailText(e.Detail)})
		}
	}
	c.show(w, s, http.StatusOK, "audit.html", "audit", "Audit", d)
}

// detailText renders an event's JSON object of attributes as key=value
// pairs in key order.
func detailText(b []byte) string {
	var m map[string]any
	if len(b) == 0 || json.Unmarshal(b, &m) != nil {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, " ")
}
