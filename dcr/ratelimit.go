package dcr

import (
	"context"
	"errors"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// CounterStore is the part of storage.CounterStore the registration rate
// limit uses. Given the store every instance shares, the limit holds across
// all of them.
type CounterStore interface {
	UpdateCounters(ctx context.Context, keys []string, now time.Time, update func([]storage.Counter) ([]storage.Counter, error)) error
}

// limiter allows a burst of registrations per client address and then one
// every interval: the generic cell rate algorithm, whose whole state per
// address is one time (the theoretical arrival time, kept in Counter.Until),
// so one atomic counter update decides each request on every instance.
type limiter struct {
	store    CounterStore
	interval time.Duration
	burst    int
}

func newLimiter(rl RateLimit, store CounterStore) *limiter {
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
	return &limiter{store: store, interval: time.Duration(float64(time.Minute) / per), burst: burst}
}

var errLimited = errors.New("dcr: rate limited")

// allow takes one registration for addr; when none is left it returns the
// wait until the next one.
func (l *limiter) allow(ctx context.Context, addr string, now time.Time) (bool, time.Duration, error) {
	if l == nil {
		return true, 0, nil
	}
	var wait time.Duration
	tolerance := time.Duration(l.burst-1) * l.interval
	err := l.store.UpdateCounters(ctx, []string{"dcr:addr:" + addr}, now, func(cs []storage.Counter) ([]storage.Counter, error) {
		tat := cs[0].Until
		if tat.Before(now) {
			tat = now
		}
		if over := tat.Sub(now) - tolerance; over > 0 {
			wait = over
			return nil, errLimited
		}
		tat = tat.Add(l.interval)
		cs[0].Until, cs[0].ExpiresAt = tat, tat
		return cs, nil
	})
	if errors.Is(err, errLimited) {
		return false, wait, nil
	}
	return err == nil, 0, err
}
