package toolpolicy

import (
	"strings"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestLimiterSixtyFirstCallRefused(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	l, err := NewLimiter([]RateLimit{{Match: Match{Tools: []string{"*"}}, Per: PerSubject, Rate: 60, Interval: time.Minute}}, c.now)
	if err != nil {
		t.Fatal(err)
	}
	alice := Keys{Subject: "alice"}
	for i := range 60 {
		if r := l.Take(alice, "tools/call", "echo"); r != nil {
			t.Fatalf("call %d refused", i+1)
		}
	}
	r := l.Take(alice, "tools/call", "echo")
	if r == nil || r.Limit != 0 || r.RetryAfter != time.Second {
		t.Fatalf("61st call: %+v, want refused with a retry after 1s", r)
	}
	if l.Take(Keys{Subject: "bob"}, "tools/call", "echo") != nil {
		t.Error("another subject shares alice's bucket")
	}
	if l.Take(alice, "tools/list", "") != nil {
		t.Error("a method the limit does not match was refused")
	}
	c.t = c.t.Add(time.Second)
	if l.Take(alice, "tools/call", "echo") != nil {
		t.Error("no token back after a second")
	}
	if l.Take(alice, "tools/call", "echo") == nil {
		t.Error("two tokens back after a second")
	}
}

func TestLimiterBurstAndKeys(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	l, err := NewLimiter([]RateLimit{
		{Match: Match{Tools: []string{"slow_*"}}, Per: PerTenant, Rate: 1, Interval: time.Hour, Burst: 2},
		{Match: Match{Methods: []string{"tools/call"}}, Per: PerClient, Rate: 100, Interval: time.Second},
	}, c.now)
	if err != nil {
		t.Fatal(err)
	}
	a, b := Keys{Subject: "a", Client: "x", Tenant: "acme"}, Keys{Subject: "b", Client: "y", Tenant: "acme"}
	if l.Take(a, "tools/call", "slow_x") != nil || l.Take(b, "tools/call", "slow_y") != nil {
		t.Fatal("burst of 2 refused")
	}
	r := l.Take(a, "tools/call", "slow_x")
	if r == nil || r.Limit != 0 || r.RetryAfter != time.Hour {
		t.Fatalf("third call of the tenant: %+v", r)
	}
	if l.Take(Keys{Tenant: "other"}, "tools/call", "slow_x") != nil {
		t.Error("another tenant refused")
	}
}

func TestLimiterSweepsFullBuckets(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	l, _ := NewLimiter([]RateLimit{{Match: Match{Methods: []string{"*"}}, Per: PerSubject, Rate: 10, Interval: time.Hour}}, c.now)
	for i := range minSweep + 10 {
		l.Take(Keys{Subject: strings.Repeat("x", i%50) + string(rune('a'+i%26)) + time.Duration(i).String()}, "ping", "")
		c.t = c.t.Add(time.Millisecond)
	}
	if n := l.Len(); n != minSweep+10 {
		t.Fatalf("%d buckets, want %d (none full yet)", n, minSweep+10)
	}
	// An interval on, those buckets are full again: the next sweep (at
	// twice the number kept) drops them and keeps the new callers' only.
	c.t = c.t.Add(time.Hour)
	for i := range minSweep {
		l.Take(Keys{Subject: "new" + time.Duration(i).String()}, "ping", "")
	}
	if n := l.Len(); n != minSweep {
		t.Errorf("%d buckets held, want the %d new ones only", n, minSweep)
	}
}

func TestNewLimiterRefuses(t *testing.T) {
	m := Match{Tools: []string{"*"}}
	for _, tc := range []struct {
		rl   RateLimit
		want string
	}{
		{RateLimit{Match: m, Per: "ip", Rate: 1, Interval: time.Second}, "rate_limits[0].per"},
		{RateLimit{Match: m, Per: PerSubject, Interval: time.Second}, "rate_limits[0].rate"},
		{RateLimit{Match: m, Per: PerSubject, Rate: 1}, "rate_limits[0].interval"},
		{RateLimit{Match: m, Per: PerSubject, Rate: 1, Interval: time.Second, Burst: -1}, "rate_limits[0].burst"},
		{RateLimit{Per: PerSubject, Rate: 1, Interval: time.Second}, "rate_limits[0]"},
	} {
		if _, err := NewLimiter([]RateLimit{tc.rl}, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %s", tc.rl, err, tc.want)
		}
	}
	if l, err := NewLimiter(nil, nil); l != nil || err != nil || l.Take(Keys{}, "x", "") != nil {
		t.Error("no limits")
	}
}
