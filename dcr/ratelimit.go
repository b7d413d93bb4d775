package dcr

import (
	"math"
	"sync"
	"time"
)

// limiter is a token bucket per client address, in memory.
type limiter struct {
	mu      sync.Mutex
	rate    float64 // tokens per second
	burst   float64
	buckets map[string]*bucket
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
	return &limiter{rate: per / 60, burst: float64(burst), buckets: map[string]*bucket{}}
}

// allow takes one token for addr; when none is left it returns the wait until
// the next one.
func (l *limiter) allow(addr string, now time.Time) (bool, time.Duration) {
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
