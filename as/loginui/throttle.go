package loginui

import (
	"sync"
	"time"
)

// throttle counts failed logins per key (an account or a client address).
// After free failures each further failure locks the key for base, doubling
// up to max. A key with no failure for 2*max is forgotten. Keys of unknown
// usernames are counted the same way as known ones, so the answers reveal
// nothing about which usernames exist.
type throttle struct {
	mu      sync.Mutex
	entries map[string]*throttleEntry
	base    time.Duration
	max     time.Duration
}

type throttleEntry struct {
	fails int
	last  time.Time
	until time.Time
}

// maxThrottleEntries bounds memory under a spray of distinct usernames.
const maxThrottleEntries = 100_000

func newThrottle(base, max time.Duration) *throttle {
	return &throttle{entries: map[string]*throttleEntry{}, base: base, max: max}
}

func (t *throttle) stale(e *throttleEntry, now time.Time) bool {
	return now.Sub(e.last) > 2*t.max && !now.Before(e.until)
}

// wait returns how long the caller must wait before trying any of keys.
func (t *throttle) wait(now time.Time, keys ...string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var d time.Duration
	for _, k := range keys {
		if e, ok := t.entries[k]; ok {
			if w := e.until.Sub(now); w > d {
				d = w
			}
		}
	}
	return d
}

// fail records a failure for key, allowing free failures before backoff.
func (t *throttle) fail(now time.Time, key string, free int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[key]
	if ok && t.stale(e, now) {
		ok = false
	}
	if !ok {
		if len(t.entries) >= maxThrottleEntries {
			t.prune(now)
		}
		e = &throttleEntry{}
		t.entries[key] = e
	}
	e.fails++
	e.last = now
	if over := e.fails - free; over > 0 {
		d := t.base
		for i := 1; i < over && d < t.max; i++ {
			d *= 2
		}
		d = min(d, t.max)
		e.until = now.Add(d)
	}
}

// succeed forgets the failures of key (an account after a good password).
func (t *throttle) succeed(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.entries, key)
}

// prune drops stale entries; if that is not enough it drops entries that are
// not currently locked. Called with t.mu held.
func (t *throttle) prune(now time.Time) {
	for k, e := range t.entries {
		if t.stale(e, now) {
			delete(t.entries, k)
		}
	}
	if len(t.entries) < maxThrottleEntries {
		return
	}
	for k, e := range t.entries {
		if !now.Before(e.until) {
			delete(t.entries, k)
		}
		if len(t.entries) < maxThrottleEntries*3/4 {
			return
		}
	}
}
