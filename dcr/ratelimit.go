package dcr

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// limiter is a token bucket per client address, in memory.
type limiter struct {
	mu      sync.Mutex
	rate    float64 // tokens per second
	burst   float64
	buckets map[netip.Addr]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

const maxTrackedAddresses = 100_000

func newLimiter(rl RateLimit) *limiter {
	if rl.PerMinute < 0 {
		return nil
	}
	per := rl.PerMinute
	if per == 0 {
		per = 20
	}
	burst := rl.Burst
	if burst <= 0 {
		burst = 10
	}
	return &limiter{rate: per / 60, burst: float64(burst), buckets: map[netip.Addr]*bucket{}}
}

// allow takes one token for addr; when none is left it returns the wait until
// the next one.
func (l *limiter) allow(addr netip.Addr, now time.Time) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[addr]
	if !ok {
		if len(l.buckets) >= maxTrackedAddresses {
			l.sweep(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[addr] = b
	}
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = math.Min(l.burst, b.tokens+el*l.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
	return false, wait
}

// sweep forgets buckets that have refilled (they behave like new ones); if
// that is not enough it forgets everything, which errs on the side of
// letting clients in rather than growing without bound.
func (l *limiter) sweep(now time.Time) {
	for a, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst {
			delete(l.buckets, a)
		}
	}
	if len(l.buckets) >= maxTrackedAddresses {
		clear(l.buckets)
	}
}

// clientAddr is the address a request came from: RemoteAddr, or, when
// RemoteAddr is a trusted proxy, the rightmost X-Forwarded-For entry that is
// not a trusted proxy. IPv6 clients are bucketed by /64.
func clientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	a = a.WithZone("").Unmap()
	if inPrefixes(a, trusted) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			h, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break
			}
			h = h.WithZone("").Unmap()
			a = h
			if !inPrefixes(h, trusted) {
				break
			}
		}
	}
	if a.Is6() {
		p, _ := a.Prefix(64)
		a = p.Addr()
	}
	return a
}

func inPrefixes(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
