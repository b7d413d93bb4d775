package rsmiddleware

import (
	"strconv"
	"testing"
)

// BenchmarkSessionBindingBindFull: a new session when MaxSessions (the
// default 100000) are recorded, none idle, so each bind drops one.
func BenchmarkSessionBindingBindFull(b *testing.B) {
	var sb SessionBinding
	for i := 0; i < 100000; i++ {
		sb.bind("s"+strconv.Itoa(i), "alice")
	}
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = "n" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sb.bind(ids[i], "alice")
	}
}

// BenchmarkSignedSessionOpen: the check of a signed Mcp-Session-Id on each
// request of a session.
func BenchmarkSignedSessionOpen(b *testing.B) {
	s := newSessionSigner(keyA)
	signed, _ := s.sign("1f6b0e3c-8a4d-4c1e-9b1a-7d2e5f3a9c10", "alice")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok := s.open(signed, "alice"); !ok {
			b.Fatal("refused")
		}
	}
}
