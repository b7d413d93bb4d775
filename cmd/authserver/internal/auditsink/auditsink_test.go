package auditsink_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/auditsink"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

func list(t *testing.T, st storage.Store) []storage.AuditEvent {
	t.Helper()
	es, err := st.ListAuditEvents(context.Background(), storage.AuditFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func stats(t *testing.T, st storage.Store) map[string]int64 {
	t.Helper()
	cs, err := st.ListStats(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, c := range cs {
		out[c.Name] += c.Count
	}
	return out
}

func closeSink(t *testing.T, s *auditsink.Sink) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// An audit record becomes an event: event, sub, client_id and
// admin_subject (else admin_client) its fields, every other attribute,
// those of With and of groups included, its detail (a JSON object); the log line is
// written as before, also when the log's level hides info records.
func TestAuditRecordsBecomeEvents(t *testing.T) {
	st := memory.New()
	var logged bytes.Buffer
	s := auditsink.New(auditsink.Config{KeepEvents: true})
	log := slog.New(s.Handler(slog.NewJSONHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn})))
	s.Start(st, st)

	as := log.With("component", "as")
	as.Info("audit", "event", "token.issued", "client_id", "app", "grant_type", "authorization_code", "sub", "alice", "scope", "mcp:tools")
	log.With("component", "admin").Info("audit", "event", "admin.grants.revoked", "admin_client", "ops-bot", "sub", "bob", "count", 2)
	log.Info("audit", "event", "admin.user.disabled", "admin_client", "console", "admin_subject", "carol", "sub", "bob",
		"err", errors.New("boom"), "took", time.Second, slog.Group("req", "path", "/token"))
	log.WithGroup("g").Info("audit", "event", "x.grouped", "sub", "in-group")
	log.Info("not audit", "event", "token.issued")
	log.Warn("a warning")
	closeSink(t, s)

	es := list(t, st)
	if len(es) != 4 {
		t.Fatalf("%d events, want 4: %+v", len(es), es)
	}
	detail := func(e storage.AuditEvent) map[string]any {
		var m map[string]any
		if err := json.Unmarshal(e.Detail, &m); err != nil {
			t.Fatalf("detail %q: %v", e.Detail, err)
		}
		return m
	}
	issued := es[3]
	if issued.Event != "token.issued" || issued.Subject != "alice" || issued.ClientID != "app" || issued.AdminSubject != "" {
		t.Fatalf("token.issued event %+v", issued)
	}
	if d := detail(issued); d["component"] != "as" || d["grant_type"] != "authorization_code" || d["scope"] != "mcp:tools" || len(d) != 3 {
		t.Fatalf("token.issued detail %v", d)
	}
	if time.Since(issued.Time) > time.Minute {
		t.Fatalf("time %v, want the record's", issued.Time)
	}
	revoked := es[2]
	if revoked.AdminSubject != "ops-bot" || revoked.Subject != "bob" {
		t.Fatalf("admin event %+v, want admin_subject from admin_client", revoked)
	}
	if d := detail(revoked); d["count"] != 2.0 || d["admin_client"] != "ops-bot" || d["component"] != "admin" {
		t.Fatalf("admin event detail %v", d)
	}
	disabled := es[1]
	d := detail(disabled)
	if disabled.AdminSubject != "carol" || d["admin_client"] != "console" || d["err"] != "boom" || d["took"] != "1s" ||
		d["req"].(map[string]any)["path"] != "/token" {
		t.Fatalf("event with admin_subject %+v, detail %v", disabled, d)
	}
	if g := es[0]; g.Event != "" || g.Subject != "" || detail(g)["g"].(map[string]any)["sub"] != "in-group" {
		t.Fatalf("an attribute inside a group is detail, not a field: %+v %s", g, g.Detail)
	}
	if lines := strings.Count(logged.String(), "\n"); lines != 1 || !strings.Contains(logged.String(), "a warning") {
		t.Fatalf("the log got %d lines, want only the warning (its level):\n%s", lines, logged.String())
	}
}

// Tokens issued, logins and login failures are counted from the audit
// events; refusals from the answers; the counts reach storage every
// interval and at Close, per hour.
func TestCountsReachStorage(t *testing.T) {
	st := memory.New()
	hour := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	var now atomic.Pointer[time.Time]
	set := func(t time.Time) { now.Store(&t) }
	set(hour.Add(59 * time.Minute))
	s := auditsink.New(auditsink.Config{Interval: 20 * time.Millisecond, Now: func() time.Time { return *now.Load() }})
	log := slog.New(s.Handler(slog.DiscardHandler))
	s.Start(st, st)
	for _, ev := range []string{"token.issued", "token.issued", "login.succeeded", "login.failed", "login.throttled",
		"login.refused", "login.upstream_failed", "login.upstream_refused", "consent.granted", "token.revoked"} {
		log.Info("audit", "event", ev)
	}
	for _, c := range []struct {
		status int
		code   string
		want   bool
	}{
		{400, "invalid_grant", true}, {401, "invalid_client", true}, {429, "", true}, {303, "access_denied", true},
		{302, "invalid_scope", true}, {200, "", false}, {302, "", false}, {500, "server_error", false},
		{503, "temporarily_unavailable", false}, {302, "server_error", false},
	} {
		if got := s.Refused(c.status, c.code); got != c.want {
			t.Errorf("Refused(%d, %q) = %v, want %v", c.status, c.code, got, c.want)
		}
	}
	want := map[string]int64{auditsink.TokensIssued: 2, auditsink.Logins: 1, auditsink.LoginFailures: 5, auditsink.Refusals: 5}
	deadline := time.Now().Add(5 * time.Second)
	for got := stats(t, st); len(got) != len(want) || got[auditsink.LoginFailures] != 5 || got[auditsink.Refusals] != 5; got = stats(t, st) {
		if time.Now().After(deadline) {
			t.Fatalf("counts in storage %v, want %v before Close", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	set(hour.Add(61 * time.Minute))
	log.Info("audit", "event", "token.issued")
	closeSink(t, s)
	cs, err := st.ListStats(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, c := range cs {
		if c.Hour.Equal(hour) {
			got[c.Name] = c.Count
		} else if !c.Hour.Equal(hour.Add(time.Hour)) || c.Name != auditsink.TokensIssued || c.Count != 1 {
			t.Fatalf("unexpected count %+v", c)
		}
	}
	if len(got) != len(want) || got[auditsink.TokensIssued] != 2 || got[auditsink.Logins] != 1 {
		t.Fatalf("counts of the first hour %v, want %v", got, want)
	}
	if n := len(list(t, st)); n != 0 {
		t.Fatalf("%d events kept with KeepEvents false", n)
	}
}

// A full buffer drops records, counts them and warns once, and never
// blocks the caller; what the buffer held is written once started.
func TestAFullBufferDropsWithoutBlocking(t *testing.T) {
	st := memory.New()
	var warnings bytes.Buffer
	var dropped, failed atomic.Int64
	s := auditsink.New(auditsink.Config{KeepEvents: true, Buffer: 3, Log: slog.New(slog.NewTextHandler(&warnings, nil)),
		Dropped: func(n int, f bool) {
			if f {
				failed.Add(int64(n))
			} else {
				dropped.Add(int64(n))
			}
		}})
	log := slog.New(s.Handler(slog.DiscardHandler))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 10 {
			log.Info("audit", "event", "token.issued")
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("logging blocked on a full buffer")
	}
	if dropped.Load() != 7 || failed.Load() != 0 {
		t.Fatalf("dropped %d (failed %d), want 7 (0)", dropped.Load(), failed.Load())
	}
	if n := strings.Count(warnings.String(), "dropping"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, warnings.String())
	}
	s.Start(st, st)
	closeSink(t, s)
	if n := len(list(t, st)); n != 3 {
		t.Fatalf("%d events written, want the 3 buffered", n)
	}
	log.Info("audit", "event", "token.issued")
	if n := len(list(t, st)); n != 3 {
		t.Fatalf("%d events after Close, want 3", n)
	}
}

// Events storage refuses are counted as failed and reported; Close still
// returns.
func TestRefusedEventsAreCountedAsFailed(t *testing.T) {
	st := memory.New()
	st.Close() // every call: storage.ErrUnavailable
	var warnings bytes.Buffer
	var failed atomic.Int64
	s := auditsink.New(auditsink.Config{KeepEvents: true, Log: slog.New(slog.NewTextHandler(&warnings, nil)),
		Dropped: func(n int, f bool) {
			if f {
				failed.Add(int64(n))
			}
		}})
	log := slog.New(s.Handler(slog.DiscardHandler))
	for range 4 {
		log.Info("audit", "event", "login.failed")
	}
	s.Start(st, st)
	closeSink(t, s)
	if failed.Load() != 4 {
		t.Fatalf("failed %d, want 4", failed.Load())
	}
	if !strings.Contains(warnings.String(), "could not be kept") || !strings.Contains(warnings.String(), "hourly counts could not be added") {
		t.Fatalf("warnings:\n%s", warnings.String())
	}
}

// The cost on a request's path of a token.issued record: turned into an
// event and queued (kept; the sink is not started, so that what drains
// the buffer does not count), or only counted (counted).
func BenchmarkTokenIssuedRecord(b *testing.B) {
	for _, keep := range []bool{true, false} {
		name := "counted"
		if keep {
			name = "kept"
		}
		b.Run(name, func(b *testing.B) {
			st := memory.New()
			s := auditsink.New(auditsink.Config{KeepEvents: keep, Buffer: b.N})
			if !keep {
				s.Start(st, st)
				defer s.Close(context.Background())
			}
			log := slog.New(s.Handler(slog.DiscardHandler)).With("component", "as")
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				log.LogAttrs(ctx, slog.LevelInfo, "audit", slog.String("event", "token.issued"), slog.String("client_id", "ci-bot"),
					slog.String("grant_type", "client_credentials"), slog.String("sub", ""), slog.String("aud", "https://mcp.example.com/mcp"),
					slog.String("scope", "mcp:tools"))
			}
		})
	}
}

// Every attribute value, whatever its bytes, makes a detail that is one
// valid JSON object holding the value (invalid UTF-8 as U+FFFD), and the
// fields hold the text as logged.
func FuzzDetail(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "\x00\x1f\x7f", "\xff\xfe", "\u2028\u2029", "<&>", "é😀"} {
		f.Add(s, int64(len(s)))
	}
	f.Fuzz(func(t *testing.T, v string, n int64) {
		st := memory.New()
		s := auditsink.New(auditsink.Config{KeepEvents: true})
		log := slog.New(s.Handler(slog.DiscardHandler)).With("with", v).WithGroup(v)
		log.Info("audit", "event", "fuzz", "value", v, "n", n, slog.Group("g", "inner", v, "f", float64(n)/3))
		slog.New(s.Handler(slog.DiscardHandler)).Info("audit", "event", "fuzz", "sub", v, v, v)
		s.Start(st, st)
		closeSink(t, s)
		es := list(t, st)
		if len(es) != 2 {
			t.Fatalf("%d events", len(es))
		}
		var want string // each invalid byte as U+FFFD, as encoding/json writes it
		for _, r := range v {
			want += string(r)
		}
		for _, e := range es {
			if !json.Valid(e.Detail) {
				t.Fatalf("detail is not JSON: %q", e.Detail)
			}
		}
		var grouped map[string]any
		if err := json.Unmarshal(es[1].Detail, &grouped); err != nil {
			t.Fatal(err)
		}
		if grouped["with"] != want {
			t.Fatalf("with = %q, want %q", grouped["with"], want)
		}
		inner, ok := grouped[want].(map[string]any)
		if v == "" { // WithGroup("") opens no group
			inner, ok = grouped, true
		}
		if !ok || inner["value"] != want || inner["n"] != float64(n) || inner["g"].(map[string]any)["inner"] != want {
			t.Fatalf("grouped detail %s", es[1].Detail)
		}
		if sub := strings.ReplaceAll(strings.ToValidUTF8(v, "\uFFFD"), "\x00", "\uFFFD"); es[0].Subject != sub {
			t.Fatalf("sub %q, want %q", es[0].Subject, sub)
		}
	})
}
