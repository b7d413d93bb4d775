package toolpolicy

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// RateLimit is one entry of rate_limits: a token bucket per subject,
// client or tenant, holding Burst tokens, refilled at Rate per Interval;
// each matching request takes one token.
type RateLimit struct {
	Match `yaml:",inline"`
	// Per keys the buckets: subject (the token's sub), client (its
	// client_id) or tenant (the configured tenant claim; callers without
	// one share one bucket).
	Per      string        `yaml:"per"`
	Rate     int           `yaml:"rate"`
	Interval time.Duration `yaml:"interval"`
	// Burst is the bucket's size. Zero value: Rate.
	Burst int `yaml:"burst"`
}

// Values of RateLimit.Per.
const (
	PerSubject = "subject"
	PerClient  = "client"
	PerTenant  = "tenant"
)

// Keys are the values a caller's buckets are keyed by.
type Keys struct {
	Subject, Client, Tenant string
}

// Limiter holds the token buckets of this process. Behind N instances each
// has its own buckets, so a caller spread over them gets up to N times the
// rate. It is safe for concurrent use.
type Limiter struct {
	limits  []RateLimit
	now     func() time.Time
	mu      sync.Mutex
	buckets map[bucketKey]*bucket
	sweepAt int
}

type bucketKey struct {
	limit int
	key   string
}

type bucket struct {
	tokens float64
	last   time.Time
}

// minSweep is the number of buckets below which full ones are not swept.
const minSweep = 1024

// NewLimiter checks limits (errors name rate_limits[i]) and returns their
// Limiter; now is the clock (nil: time.Now). No limits: nil, which allows
// everything.
func NewLimiter(limits []RateLimit, now func() time.Time) (*Limiter, error) {
	if len(limits) == 0 {
		return nil, nil
	}
	if now == nil {
		now = time.Now
	}
	l := &Limiter{now: now, buckets: map[bucketKey]*bucket{}, sweepAt: minSweep}
	for i, rl := range limits {
		path := fmt.Sprintf("rate_limits[%d]", i)
		if err := rl.Match.check(path); err != nil {
			return nil, err
		}
		if rl.Match.empty() {
			return nil, fmt.Errorf("%s: set tools, methods, prompts or resources", path)
		}
		switch rl.Per {
		case PerSubject, PerClient, PerTenant:
		default:
			return nil, fmt.Errorf("%s.per: %q is not subject, client or tenant", path, rl.Per)
		}
		if rl.Rate <= 0 {
			return nil, fmt.Errorf("%s.rate: must be at least 1", path)
		}
		if rl.Interval <= 0 {
			return nil, fmt.Errorf("%s.interval: must be positive (a duration such as 1m)", path)
		}
		if rl.Burst < 0 {
			return nil, fmt.Errorf("%s.burst: must not be negative", path)
		}
		if rl.Burst == 0 {
			rl.Burst = rl.Rate
		}
		l.limits = append(l.limits, rl)
	}
	return l, nil
}

// Refusal says which limit refused a request and when a token is back.
type Refusal struct {
	Limit      int           // index in rate_limits
	RetryAfter time.Duration // until the bucket holds a token again
}

// Take takes a token from every bucket of k whose limit matches a request
// of method on name. It returns nil when each had one; otherwise the
// first limit that had none (tokens already taken from others stay
// taken).
func (l *Limiter) Take(k Keys, method, name string) *Refusal {
	if l == nil {
		return nil
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.limits {
		rl := &l.limits[i]
		if !rl.Matches(method, name) {
			continue
		}
		key := k.Subject
		switch rl.Per {
		case PerClient:
			key = k.Client
		case PerTenant:
			key = k.Tenant
		}
		bk := bucketKey{i, key}
		b := l.buckets[bk]
		if b == nil {
			b = &bucket{tokens: float64(rl.Burst), last: now}
			l.buckets[bk] = b
		}
		perNS := float64(rl.Rate) / float64(rl.Interval)
		l.refill(b, rl, perNS, now)
		if b.tokens < 1 {
			wait := time.Duration(math.Ceil((1 - b.tokens) / perNS))
			return &Refusal{Limit: i, RetryAfter: wait}
		}
		b.tokens--
	}
	l.sweep(now)
	return nil
}

func (l *Limiter) refill(b *bucket, rl *RateLimit, perNS float64, now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = math.Min(float64(rl.Burst), b.tokens+float64(d)*perNS)
		b.last = now
	}
}

// sweep drops the buckets that are full again (they are what a new bucket
// would be) once there are sweepAt of them, so memory follows the callers
// active within an interval.
func (l *Limiter) sweep(now time.Time) {
	if len(l.buckets) < l.sweepAt {
		return
	}
	for k, b := range l.buckets {
		rl := &l.limits[k.limit]
		l.refill(b, rl, float64(rl.Rate)/float64(rl.Interval), now)
		if b.tokens >= float64(rl.Burst) {
			delete(l.buckets, k)
		}
	}
	l.sweepAt = max(minSweep, 2*len(l.buckets))
}

// Len is the number of buckets held.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
