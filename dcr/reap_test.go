package dcr_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/dcr"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// reapCall is one ReapClients call as the store saw it.
type reapCall struct {
	neverUsedBefore, idleBefore time.Time
	limit                       int
}

// scriptedReaper answers ReapClients with the next of its results (the last
// one again when they run out) and records every call.
type scriptedReaper struct {
	storage.ClientStore
	mu      sync.Mutex
	results []int // deleted per call; -1 answers errReap
	calls   []reapCall
}

var errReap = errors.New("scriptedReaper: store failed")

func (s *scriptedReaper) ReapClients(ctx context.Context, neverUsedBefore, idleBefore time.Time, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, reapCall{neverUsedBefore, idleBefore, limit})
	if len(s.calls) > 2000 {
		return 0, errors.New("scriptedReaper: called too often")
	}
	n := s.results[min(len(s.calls), len(s.results))-1]
	if n < 0 {
		return 0, errReap
	}
	return n, nil
}

func TestReapBatches(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	cases := []struct {
		name                string
		neverUsed, idle     time.Duration // Policy.ReapNeverUsedAfter, ReapIdleAfter
		results             []int
		wantTotal, wantCall int
		wantErr             error
		wantNever, wantIdle time.Time
	}{
		{"stops after a batch smaller than the limit", 0, 0, []int{500, 500, 7}, 1007, 3, nil, now.Add(-day), now.Add(-90 * day)},
		{"asks again after a batch of exactly the limit", 0, 0, []int{500, 0}, 500, 2, nil, now.Add(-day), now.Add(-90 * day)},
		{"returns what it deleted before an error", 0, 0, []int{500, -1}, 500, 2, errReap, now.Add(-day), now.Add(-90 * day)},
		{"stops after 1000 full batches", 0, 0, []int{500}, 500000, 1000, nil, now.Add(-day), now.Add(-90 * day)},
		{"passes the configured ages", 2 * time.Hour, 7 * day, []int{0}, 0, 1, nil, now.Add(-2 * time.Hour), now.Add(-7 * day)},
		{"passes a zero time for a disabled never-used rule", -1, 0, []int{3}, 3, 1, nil, time.Time{}, now.Add(-90 * day)},
		{"passes a zero time for a disabled idle rule", 0, -1, []int{3}, 3, 1, nil, now.Add(-day), time.Time{}},
		{"does not call the store with both rules disabled", -1, -1, []int{3}, 0, 0, nil, time.Time{}, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := &scriptedReaper{ClientStore: memory.New(), results: tc.results}
			var logs syncBuffer
			p := defaultPolicy()
			p.ReapNeverUsedAfter, p.ReapIdleAfter = tc.neverUsed, tc.idle
			h, err := dcr.New(dcr.Config{Endpoint: "https://as.example/register", Store: store, Secret: testSecret,
				Policy: p, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			n, err := h.Reap(context.Background(), now)
			if n != tc.wantTotal || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("Reap = %d, %v; want %d, %v", n, err, tc.wantTotal, tc.wantErr)
			}
			if len(store.calls) != tc.wantCall {
				t.Fatalf("%d ReapClients calls, want %d", len(store.calls), tc.wantCall)
			}
			for i, c := range store.calls {
				if !c.neverUsedBefore.Equal(tc.wantNever) || !c.idleBefore.Equal(tc.wantIdle) || c.limit != 500 {
					t.Fatalf("call %d: ReapClients(%v, %v, %d); want (%v, %v, 500)", i, c.neverUsedBefore, c.idleBefore, c.limit, tc.wantNever, tc.wantIdle)
				}
			}
			logged := strings.Contains(logs.String(), `msg="dcr: reaped idle clients"`)
			if wantLog := tc.wantErr == nil && tc.wantTotal > 0; logged != wantLog {
				t.Fatalf("reap logged %v, want %v: %q", logged, wantLog, logs.String())
			}
		})
	}
}
