package rsmiddleware

import (
	"strconv"
	"testing"
	"time"
)

// TestTokenCacheBound: the cache never holds more than its size; when full
// it drops expired entries, then others until a tenth of the room is free.
func TestTokenCacheBound(t *testing.T) {
	now := time.Now()
	c := newTokenCache(10)
	live := &Principal{Expiry: now.Add(time.Hour)}
	for i := range 10 {
		c.put(strconv.Itoa(i), live, now)
	}
	if c.len() != 10 {
		t.Fatalf("%d entries after 10 puts into a cache of 10", c.len())
	}
	c.put("10", live, now)
	// Full: dropped down to below 9, then the new one.
	if got := c.len(); got != 9 {
		t.Fatalf("%d entries after the 11th put; want 9", got)
	}
	if _, ok := c.get("10", now); !ok {
		t.Fatal("the newest entry is not kept")
	}

	// An expired entry is never served, and is dropped when the cache is full.
	c = newTokenCache(10)
	c.put("old", &Principal{Expiry: now.Add(-time.Second)}, now)
	for i := range 9 {
		c.put(strconv.Itoa(i), live, now)
	}
	c.put("new", live, now)
	if _, ok := c.get("old", now); ok || c.len() != 9 {
		t.Fatalf("expired entry served, or %d entries; want 9", c.len())
	}
	c.mu.RLock()
	_, kept := c.m["old"]
	c.mu.RUnlock()
	if kept {
		t.Fatal("the expired entry was kept when the cache was full")
	}
}
