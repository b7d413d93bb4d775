package rsmiddleware

import (
	"sync"
	"time"
)

// tokenCache is a bounded map of verified tokens to their principals, each
// kept until the token expires. When full, expired entries are dropped first,
// then arbitrary ones (map order) until a tenth of the room is free.
type tokenCache struct {
	mu  sync.RWMutex
	max int
	m   map[string]*Principal
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, m: make(map[string]*Principal, min(max, 1024))}
}

func (c *tokenCache) get(token string, now time.Time) (*Principal, bool) {
	c.mu.RLock()
	p, ok := c.m[token]
	c.mu.RUnlock()
	if !ok || !now.Before(p.Expiry) {
		return nil, false
	}
	return p, true
}

func (c *tokenCache) put(token string, p *Principal, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k, e := range c.m {
			if !now.Before(e.Expiry) {
				delete(c.m, k)
			}
		}
		for k := range c.m {
			if len(c.m) < c.max-c.max/10 {
				break
			}
			delete(c.m, k)
		}
	}
	c.m[token] = p
}

func (c *tokenCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
