package safehttp

import (
	"net/http"
	"testing"
	"time"
)

// transportOf returns the *http.Transport under the guard of a client built
// by NewClient.
func transportOf(t *testing.T, c *http.Client) *http.Transport {
	t.Helper()
	g, ok := c.Transport.(*guard)
	if !ok {
		t.Fatalf("client transport is %T, want *guard", c.Transport)
	}
	tr, ok := g.next.(*http.Transport)
	if !ok {
		t.Fatalf("guarded transport is %T, want *http.Transport", g.next)
	}
	return tr
}

// Pins the zero values documented on Config: a zero field gets its default,
// never "no timeout", and a set field is used as given.
func TestTimeouts(t *testing.T) {
	cases := []struct {
		name                           string
		cfg                            Config
		dial, tls, header, total, idle time.Duration
	}{
		{"the zero Config gets the documented defaults", Config{},
			3 * time.Second, 3 * time.Second, 3 * time.Second, 5 * time.Second, 60 * time.Second},
		{"set timeouts are used as given", Config{
			DialTimeout:           1 * time.Second,
			TLSHandshakeTimeout:   2 * time.Second,
			ResponseHeaderTimeout: 4 * time.Second,
			Timeout:               7 * time.Second,
		}, 1 * time.Second, 2 * time.Second, 4 * time.Second, 7 * time.Second, 60 * time.Second},
		{"a negative timeout gets the default", Config{DialTimeout: -1, Timeout: -1},
			3 * time.Second, 3 * time.Second, 3 * time.Second, 5 * time.Second, 60 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewClient(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			tr := transportOf(t, c)
			d := newDialer(tc.cfg, &policy{})
			for _, got := range []struct {
				what      string
				got, want time.Duration
			}{
				{"dial timeout", d.Timeout, tc.dial},
				{"TCP keep-alive period", d.KeepAlive, 30 * time.Second},
				{"TLS handshake timeout", tr.TLSHandshakeTimeout, tc.tls},
				{"response header timeout", tr.ResponseHeaderTimeout, tc.header},
				{"total timeout", c.Timeout, tc.total},
				{"idle connection timeout", tr.IdleConnTimeout, tc.idle},
			} {
				if got.got != got.want {
					t.Errorf("%s = %v, want %v", got.what, got.got, got.want)
				}
			}
			if d.Control == nil {
				t.Error("the dialer checks no address")
			}
			if tr.Proxy != nil {
				t.Error("the transport takes a proxy")
			}
		})
	}
}
