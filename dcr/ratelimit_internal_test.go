package dcr

import (
	"net/netip"
	"testing"
	"time"
)

func TestLimiterForgetsRefilledBucketsWhenFull(t *testing.T) {
	l := newLimiter(RateLimit{PerMinute: 60, Burst: 2})
	now := time.Unix(0, 0)
	for i := 0; i < maxTrackedAddresses; i++ {
		var b [4]byte
		b[0], b[1], b[2], b[3] = 10, byte(i>>16), byte(i>>8), byte(i)
		l.allow(netip.AddrFrom4(b).String(), now)
	}
	if len(l.buckets) != maxTrackedAddresses {
		t.Fatalf("%d buckets", len(l.buckets))
	}
	// Two seconds later every bucket has refilled; the next new address
	// triggers a sweep instead of growing the map.
	l.allow("192.0.2.1", now.Add(2*time.Second))
	if len(l.buckets) != 1 {
		t.Fatalf("%d buckets after the sweep, want 1", len(l.buckets))
	}
}
