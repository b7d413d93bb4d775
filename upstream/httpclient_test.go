package upstream

import (
	"testing"
	"time"
)

// TestNewDialerTimeout: NewHTTPClient connects within its timeout, at most
// 5 seconds.
func TestNewDialerTimeout(t *testing.T) {
	for given, want := range map[time.Duration]time.Duration{time.Second: time.Second, 5 * time.Second: 5 * time.Second, time.Minute: 5 * time.Second} {
		if got := newDialer(given).Timeout; got != want {
			t.Errorf("newDialer(%s).Timeout = %s, want %s", given, got, want)
		}
	}
}
