package ops

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// The counts of a chart: one per hour up to the current one, zeros where
// nothing was stored, the counts of every instance added up, other names
// and hours left out.
func TestHourlyCounts(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	now := time.Date(2026, 3, 4, 10, 25, 0, 0, time.UTC)
	h := now.Truncate(time.Hour)
	for _, add := range [][]storage.StatCount{
		{{Hour: h, Name: "tokens_issued", Count: 3}, {Hour: h.Add(-2 * time.Hour), Name: "tokens_issued", Count: 1}},
		{{Hour: h, Name: "tokens_issued", Count: 4}, {Hour: h.Add(-time.Hour), Name: "logins", Count: 2}}, // another instance
		{{Hour: h.Add(-3 * time.Hour), Name: "tokens_issued", Count: 50}, {Hour: h.Add(time.Hour), Name: "tokens_issued", Count: 60}},
		{{Hour: h, Name: "other", Count: 9}},
	} {
		if err := st.AddStats(ctx, add); err != nil {
			t.Fatal(err)
		}
	}
	o := &Ops{Store: st}
	got, err := o.HourlyCounts(ctx, now, 3, "tokens_issued", "logins", "refusals")
	if err != nil {
		t.Fatal(err)
	}
	if want := []time.Time{h.Add(-2 * time.Hour), h.Add(-time.Hour), h}; !slices.Equal(got.Hours, want) {
		t.Fatalf("hours %v, want %v", got.Hours, want)
	}
	for name, want := range map[string][]int64{"tokens_issued": {1, 0, 7}, "logins": {0, 2, 0}, "refusals": {0, 0, 0}} {
		if !slices.Equal(got.Counts[name], want) {
			t.Fatalf("%s = %v, want %v", name, got.Counts[name], want)
		}
	}
	if _, ok := got.Counts["other"]; ok || len(got.Counts) != 3 {
		t.Fatalf("counts %v, want only the names asked for", got.Counts)
	}
	for _, hours := range []int{0, -1, 24*31 + 1} {
		if _, err := o.HourlyCounts(ctx, now, hours); !errors.Is(err, ErrInvalid) {
			t.Fatalf("hours %d: %v, want ErrInvalid", hours, err)
		}
	}
}

// ListAudit checks its query before storage sees it, and pages with
// NextBefore only when more events are kept.
func TestListAuditPages(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	var es []storage.AuditEvent
	for range 5 {
		es = append(es, storage.AuditEvent{Event: "token.issued", ClientID: "app", Detail: []byte(`not json`)})
	}
	if err := st.AppendAuditEvents(ctx, es); err != nil {
		t.Fatal(err)
	}
	o := &Ops{Store: st}
	p, err := o.ListAudit(ctx, AuditQuery{Limit: 2})
	if err != nil || len(p.Events) != 2 || p.NextBefore != p.Events[1].ID || p.Events[0].ID != 5 {
		t.Fatalf("first page %+v, %v", p, err)
	}
	if string(p.Events[0].Detail) != `"not json"` {
		t.Fatalf("a detail that is not JSON is sent as a string, got %s", p.Events[0].Detail)
	}
	p, err = o.ListAudit(ctx, AuditQuery{Before: 2, Limit: 2})
	if err != nil || len(p.Events) != 1 || p.NextBefore != 0 {
		t.Fatalf("last page %+v, %v", p, err)
	}
	if p, err := o.ListAudit(ctx, AuditQuery{}); err != nil || len(p.Events) != 5 {
		t.Fatalf("default page %+v, %v", p, err)
	}
	for _, q := range []AuditQuery{{Limit: -1}, {Limit: MaxAuditPage + 1}, {Before: -1}, {User: "\xff"}, {Client: "a\x00"}, {Event: strings.Repeat("a", 1025)}} {
		if _, err := o.ListAudit(ctx, q); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%+v: %v, want ErrInvalid", q, err)
		}
	}
}
