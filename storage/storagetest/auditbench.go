package storagetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// auditMix is the share, in thousandths, of each event in the audit
// events RunAuditBenchmarks writes: mostly tokens, a few admin actions.
var auditMix = []struct {
	event string
	per   int
}{
	{"token.issued", 600}, {"login.succeeded", 100}, {"login.failed", 100}, {"consent.granted", 80},
	{"client.auth_failed", 70}, {"token.revoked", 40}, {"admin.grants.revoked", 10},
}

// SeedAuditEvents appends n audit events spread over the week before now:
// events as auditMix, 10,000 people (none for a third of them: client
// credentials), 1,000 clients, an admin subject on the admin actions.
func SeedAuditEvents(tb testing.TB, s storage.Store, n int, now time.Time) {
	tb.Helper()
	ctx := context.Background()
	const batch = 2000
	step := 7 * 24 * time.Hour / time.Duration(max(n, 1))
	var es []storage.AuditEvent
	for i := range n {
		k := i * 7919 % 1000 // a spread of 0..999 over i
		e := storage.AuditEvent{Time: now.Add(-7*24*time.Hour + time.Duration(i)*step), ClientID: fmt.Sprintf("client-%04d", i*31%1000)}
		for acc, m := 0, 0; m < len(auditMix); m++ {
			if acc += auditMix[m].per; k < acc {
				e.Event = auditMix[m].event
				break
			}
		}
		if i%3 != 0 {
			e.Subject = fmt.Sprintf("user-%05d", i*7%10000)
		}
		if e.Event == "admin.grants.revoked" {
			e.AdminSubject, e.ClientID = "ops", ""
		}
		e.Detail = []byte(`{"grant_type":"authorization_code","scope":"mcp:tools","aud":"https://mcp.example.com/mcp"}`)
		es = append(es, e)
		if len(es) == batch || i == n-1 {
			if err := s.AppendAuditEvents(ctx, es); err != nil {
				tb.Fatal(err)
			}
			es = es[:0]
		}
	}
}

// RunAuditBenchmarks measures ListAuditEvents, one page of 50 events, on
// s holding the events of SeedAuditEvents (n of them): the first page
// unfiltered and filtered by person, client, event and event prefix, and
// a page deep in the list (half the ids), so that paging at any depth
// with any filter is shown to stay fast.
func RunAuditBenchmarks(b *testing.B, s storage.Store, n int) {
	ctx := context.Background()
	top, err := s.ListAuditEvents(ctx, storage.AuditFilter{Limit: 1})
	if err != nil || len(top) == 0 {
		b.Fatalf("no events to list: %v", err)
	}
	middle := top[0].ID - int64(n/2)
	for _, c := range []struct {
		name string
		f    storage.AuditFilter
	}{
		{"all", storage.AuditFilter{}},
		{"all/deep", storage.AuditFilter{BeforeID: middle}},
		{"person", storage.AuditFilter{Subject: "user-00042"}},
		{"person/deep", storage.AuditFilter{Subject: "user-00042", BeforeID: middle}},
		{"client", storage.AuditFilter{ClientID: "client-0042"}},
		{"client/deep", storage.AuditFilter{ClientID: "client-0042", BeforeID: middle}},
		{"event", storage.AuditFilter{Event: "login.failed"}},
		{"event/deep", storage.AuditFilter{Event: "login.failed", BeforeID: middle}},
		{"event-prefix-rare", storage.AuditFilter{Event: "admin."}},
		{"event-prefix-rare/deep", storage.AuditFilter{Event: "admin.", BeforeID: middle}},
		{"event-prefix-common", storage.AuditFilter{Event: "token."}},
		{"person+client", storage.AuditFilter{Subject: "user-00042", ClientID: "client-0042"}},
		{"client+event-prefix", storage.AuditFilter{ClientID: "client-0042", Event: "login."}},
		{"person-without-events", storage.AuditFilter{Subject: "nobody"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			f := c.f
			f.Limit = 50
			got := 0
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				es, err := s.ListAuditEvents(ctx, f)
				if err != nil {
					b.Fatal(err)
				}
				got = len(es)
			}
			b.ReportMetric(float64(got), "events/op")
		})
	}
}
