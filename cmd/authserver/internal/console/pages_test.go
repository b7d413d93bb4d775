package console

import (
	"context"
	"fmt"
	"html"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/ops"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// listConsole is a console over the memory store with n stored clients
// and people, and two configured clients and local users that sort among
// them.
func listConsole(t *testing.T, n int) *Console {
	t.Helper()
	ctx := context.Background()
	st := memory.New()
	for i := range n {
		if err := st.CreateClient(ctx, &storage.Client{ID: fmt.Sprintf("client-%03d", i), Source: "dcr", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordLogin(ctx, &storage.User{Subject: fmt.Sprintf("person-%03d", i), LastSeen: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.CreateApproval(ctx, &storage.Approval{ID: fmt.Sprintf("approval-%03d", i),
			ApprovalBinding: storage.ApprovalBinding{Subject: fmt.Sprintf("person-%03d", i), ClientID: "client-000", Resource: "https://mcp.example", Tool: "t", ArgsDigest: "d"},
			CreatedAt:       time.Now(), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	o := &ops.Ops{Store: st,
		Configured: []ops.Client{{ID: "client-050a", Source: "config"}, {ID: "zz-config", Source: "config"}},
		Users:      []ops.LocalUser{{Username: "person-050a"}, {Username: "aa-local"}}}
	c, err := New(Config{Issuer: "http://127.0.0.1:9000", BaseURL: "http://127.0.0.1:9001/console", ClientID: "c", ClientSecret: "s", Resource: "r",
		Secret: []byte(strings.Repeat("k", 32)), Ops: func() Operations { return o }, Sessions: st,
		Allowed: func(context.Context, string) (bool, error) { return true, nil }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var (
	rowLink  = regexp.MustCompile(`<tr><td><a href="/console/(?:client\?id|person\?sub)=[^"]*">([^<]*)</a>`)
	nextLink = regexp.MustCompile(`<a href="([^"]*)" id="nextpage">`)
)

// walk follows a list's Next page links from target and returns every
// row's id in order.
func walk(t *testing.T, page pageFunc, target string) []string {
	t.Helper()
	var ids []string
	for range 100 {
		w := httptest.NewRecorder()
		page(w, httptest.NewRequest("GET", target, nil), &session{Subject: "op", CSRF: "x"})
		if w.Code != 200 {
			t.Fatalf("%s: %d\n%s", target, w.Code, w.Body)
		}
		for _, m := range rowLink.FindAllStringSubmatch(w.Body.String(), -1) {
			ids = append(ids, html.UnescapeString(m[1]))
		}
		m := nextLink.FindStringSubmatch(w.Body.String())
		if m == nil {
			return ids
		}
		target = html.UnescapeString(m[1])
	}
	t.Fatal("the pages never end")
	return nil
}

func TestListsPageThroughEveryRowOnceInOrder(t *testing.T) {
	c := listConsole(t, 120)
	for _, tc := range []struct {
		name   string
		page   pageFunc
		target string
		want   func(id string) bool
		count  int
	}{
		{"every client, stored and configured", c.clients, "/console/clients", func(string) bool { return true }, 122},
		{"clients whose id starts with a prefix", c.clients, "/console/clients?q=client-05", func(id string) bool { return strings.HasPrefix(id, "client-05") }, 11},
		{"a client id searched exactly, then those it prefixes", c.clients, "/console/clients?q=client-050", func(id string) bool { return strings.HasPrefix(id, "client-050") }, 2},
		{"every person, recorded and configured", c.people, "/console/people", func(string) bool { return true }, 122},
		{"people whose subject starts with a prefix", c.people, "/console/people?q=person-1", func(id string) bool { return strings.HasPrefix(id, "person-1") }, 20},
		// An approval's row starts with its person: approval-i is person-i's.
		{"every approval", c.approvals, "/console/approvals", func(string) bool { return true }, 120},
		{"the approvals of one person", c.approvals, "/console/approvals?user=person-042", func(id string) bool { return id == "person-042" }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids := walk(t, tc.page, tc.target)
			if len(ids) != tc.count || !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
				t.Fatalf("%d rows (want %d), sorted %v: %q", len(ids), tc.count, slices.IsSorted(ids), ids)
			}
			for _, id := range ids {
				if !tc.want(id) {
					t.Errorf("row %q does not match", id)
				}
			}
		})
	}
}

func TestChartsDrawTheLast24HoursScaledToTheBusiestHour(t *testing.T) {
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	values := make([]int64, 24)
	values[0], values[12], values[23] = 5, 10, 0
	ch := drawChart("Tokens issued", values, start)
	if ch.Total != 15 || ch.Max != 10 || len(ch.Bars) != 24 || len(ch.Labels) != 4 {
		t.Fatalf("chart: %+v", ch)
	}
	if ch.Bars[12].H != chartBars || ch.Bars[0].H != chartBars/2 || ch.Bars[23].H != 0 || ch.Bars[12].Y != 0 {
		t.Fatalf("bars: %+v %+v %+v", ch.Bars[0], ch.Bars[12], ch.Bars[23])
	}
	if ch.Bars[12].Title != "Tokens issued 21:00 UTC: 10" || ch.Labels[1].Text != "15:00" {
		t.Fatalf("titles: %q %q", ch.Bars[12].Title, ch.Labels[1].Text)
	}
	if empty := drawChart("Refusals", make([]int64, 24), start); empty.Max != 0 || empty.Bars[5].H != 0 {
		t.Fatalf("an empty chart: %+v", empty.Bars[5])
	}
}
