package loginui

import (
	"context"
	"errors"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// CounterStore is the part of storage.CounterStore the login throttle uses.
// Given the store every instance shares (PostgreSQL, or one SQLite file), the
// throttle holds across all of them.
type CounterStore interface {
	UpdateCounters(ctx context.Context, keys []string, now time.Time, update func([]storage.Counter) ([]storage.Counter, error)) error
}

// throttle counts login attempts per key (RFC 6819 §5.1.4.2.3, OWASP
// authentication guidance). An attempt is reserved on every key that applies
// to it before the password is checked, in one atomic update, so concurrent
// attempts cannot all slip past the check: each sees the ones before it.
//
// A key allows free attempts; the attempt after them, and each one after
// that, locks the key for base, doubling up to max. A locked key refuses
// attempts without counting them. A key with no attempt for 2*max is
// forgotten. Keys of unknown usernames are counted like known ones, so the
// answers reveal nothing about which usernames exist.
type throttle struct {
	store CounterStore
	base  time.Duration
	max   time.Duration
}

// throttleKey is one counter an attempt is reserved on, with its allowance.
type throttleKey struct {
	key  string
	free int
}

// errLocked aborts a reservation without writing anything.
var errLocked = errors.New("loginui: throttled")

// reserve takes one attempt on every key, or on none when any key is locked;
// then it returns how long the caller must wait.
func (t *throttle) reserve(ctx context.Context, now time.Time, keys []throttleKey) (time.Duration, error) {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.key
	}
	var wait time.Duration
	err := t.store.UpdateCounters(ctx, names, now, func(cs []storage.Counter) ([]storage.Counter, error) {
		for _, c := range cs {
			if w := c.Until.Sub(now); w > wait {
				wait = w
			}
		}
		if wait > 0 {
			return nil, errLocked
		}
		for i := range cs {
			c := &cs[i]
			c.Count++
			if over := c.Count - keys[i].free; over > 0 {
				d := t.base
				for j := 1; j < over && d < t.max; j++ {
					d *= 2
				}
				c.Until = now.Add(min(d, t.max))
			}
			c.ExpiresAt = now.Add(2 * t.max)
			if c.Until.After(now) {
				c.ExpiresAt = c.Until.Add(2 * t.max)
			}
		}
		return cs, nil
	})
	if errors.Is(err, errLocked) {
		return wait, nil
	}
	return 0, err
}

// succeed is called after a right password: the keys in forget lose their
// count (the account's own failures), and the keys in refund get the
// reserved attempt back (the address, shared with other people).
func (t *throttle) succeed(ctx context.Context, now time.Time, forget, refund []string) error {
	keys := append(append([]string(nil), forget...), refund...)
	return t.store.UpdateCounters(ctx, keys, now, func(cs []storage.Counter) ([]storage.Counter, error) {
		for i := range cs {
			if i < len(forget) || cs[i].Count <= 1 && !cs[i].Until.After(now) {
				cs[i] = storage.Counter{}
				continue
			}
			if cs[i].Count > 0 {
				cs[i].Count--
			}
		}
		return cs, nil
	})
}
