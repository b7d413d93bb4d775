package dcr

import (
	"net/http/httptest"
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
		l.allow(netip.AddrFrom4(b), now)
	}
	if len(l.buckets) != maxTrackedAddresses {
		t.Fatalf("%d buckets", len(l.buckets))
	}
	// Two seconds later every bucket has refilled; the next new address
	// triggers a sweep instead of growing the map.
	l.allow(netip.MustParseAddr("192.0.2.1"), now.Add(2*time.Second))
	if len(l.buckets) != 1 {
		t.Fatalf("%d buckets after the sweep, want 1", len(l.buckets))
	}
}

func TestClientAddr(t *testing.T) {
	trusted, _ := parseTrusted([]string{"10.0.0.0/8"})
	cases := []struct {
		name, remote, xff string
		trusted           bool
		want              string
	}{
		{"uses RemoteAddr without trusted proxies", "203.0.113.5:1234", "198.51.100.1", false, "203.0.113.5"},
		{"uses the forwarded address from a trusted proxy", "10.1.1.1:1234", "198.51.100.1", true, "198.51.100.1"},
		{"ignores forwarding from an untrusted peer", "203.0.113.5:1234", "198.51.100.1", true, "203.0.113.5"},
		{"buckets IPv6 by /64", "[2001:db8:1:2:3:4:5:6]:443", "", false, "2001:db8:1:2::"},
		{"unmaps IPv4-mapped IPv6", "[::ffff:203.0.113.5]:1", "", false, "203.0.113.5"},
		{"stops at garbage in X-Forwarded-For", "10.1.1.1:1", "nonsense, 10.2.2.2", true, "10.2.2.2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/register", nil)
			r.RemoteAddr = tc.remote
			if tc.xff != "" {
				r.Header.Set("X-Forwarded-For", tc.xff)
			}
			var tp []netip.Prefix
			if tc.trusted {
				tp = trusted
			}
			if got := clientAddr(r, tp); got.String() != tc.want {
				t.Fatalf("clientAddr = %s, want %s", got, tc.want)
			}
		})
	}
}
