package rsmiddleware

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// notificationBatch is a JSON-RPC batch of n ping notifications, the
// shortest messages: 100,001 of them fit in the 4 MiB body bound.
func notificationBatch(n int) []byte {
	return []byte("[" + strings.Repeat(`{"jsonrpc":"2.0","method":"ping"},`, n-1) + `{"jsonrpc":"2.0","method":"ping"}]`)
}

// serveBatch sends body through h as a POST of token and returns the answer.
func serveBatch(h http.Handler, token string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// A batch of 100,001 messages gets the answer a batch one past
// MaxBatchRequests gets (400, one -32600 with id null), without reaching the
// server, and costs the Middleware and MCPFilter no more allocations than
// that batch does: the messages past the bound are not read.
func TestLongBatchIsRefusedUnread(t *testing.T) {
	var reached atomic.Int32
	fx := newFilterFixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	}), nil)
	tok := fx.token("mcp:tools")
	h := fx.srv.Config.Handler
	long, bound := notificationBatch(100_001), notificationBatch(MaxBatchRequests+1)
	if len(long) > 4<<20 {
		t.Fatalf("the batch is %d bytes, past the body bound", len(long))
	}

	want := serveBatch(h, tok, bound)
	got := serveBatch(h, tok, long)
	if got.Code != http.StatusBadRequest || got.Code != want.Code || got.Body.String() != want.Body.String() {
		t.Fatalf("100,001 messages: %d %s; %d messages: %d %s", got.Code, got.Body, MaxBatchRequests+1, want.Code, want.Body)
	}
	wantInvalidRequest(t, "100,001 messages", got.Result())
	if reached.Load() != 0 {
		t.Fatal("a long batch reached the server")
	}

	allocs := func(body []byte) float64 {
		return testing.AllocsPerRun(20, func() { serveBatch(h, tok, body) })
	}
	atBound, past := allocs(bound), allocs(long)
	t.Logf("allocations: %v for %d messages, %v for 100,001", atBound, MaxBatchRequests+1, past)
	// Reading every message would be at least one allocation per message
	// (the call list grows with them); a bounded read costs the same.
	if past > atBound+16 {
		t.Fatalf("100,001 messages cost %v allocations, %d messages %v: the batch is read past the bound", past, MaxBatchRequests+1, atBound)
	}
}

// BenchmarkLongBatchRefused measures the refusal of a 100,001-message batch
// by the Middleware and MCPFilter (docs/BENCHMARKS.md).
func BenchmarkLongBatchRefused(b *testing.B) {
	fx := newFilterFixture(b, http.NotFoundHandler(), nil)
	tok := fx.token("mcp:tools")
	h := fx.srv.Config.Handler
	body := notificationBatch(100_001)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if rec := serveBatch(h, tok, body); rec.Code != http.StatusBadRequest {
			b.Fatal(rec.Code, rec.Body)
		}
	}
}
