package loginui

import "testing"

// TestConcurrentPasswordChecksDefault: with MaxConcurrentChecks unset, four
// password checks may run at once; a configured number is kept. Fails
// (instead of hanging every login) if the default leaves no slot at all.
func TestConcurrentPasswordChecksDefault(t *testing.T) {
	for _, tc := range []struct{ configured, want int }{{0, 4}, {-1, 4}, {1, 1}, {9, 9}} {
		h := newHarness(t, func(c *Config) { c.MaxConcurrentChecks = tc.configured })
		if got := cap(h.ui.checks); got != tc.want {
			t.Errorf("MaxConcurrentChecks %d: %d slots, want %d", tc.configured, got, tc.want)
		}
	}
}
