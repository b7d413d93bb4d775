package clientaddr_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/internal/clientaddr"
)

func TestAddrAndKey(t *testing.T) {
	trusted, err := clientaddr.New([]string{"10.0.0.0/8", "192.0.2.7", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, remote string
		xff          []string
		r            *clientaddr.Resolver
		addr, key    string
	}{
		{"the peer without trusted proxies", "203.0.113.5:1234", []string{"198.51.100.1"}, nil, "203.0.113.5", "203.0.113.5"},
		{"the forwarded address from a trusted proxy", "10.1.1.1:1234", []string{"198.51.100.1"}, trusted, "198.51.100.1", "198.51.100.1"},
		{"a single trusted address", "192.0.2.7:80", []string{"198.51.100.1"}, trusted, "198.51.100.1", "198.51.100.1"},
		{"forwarding from an untrusted peer is ignored", "203.0.113.5:1234", []string{"198.51.100.1"}, trusted, "203.0.113.5", "203.0.113.5"},
		{"entries the client wrote left of the proxy's are ignored", "10.1.1.1:1", []string{"1.2.3.4, 198.51.100.1"}, trusted, "198.51.100.1", "198.51.100.1"},
		{"a chain of trusted proxies is skipped", "10.1.1.1:1", []string{"198.51.100.1, 10.9.9.9", "fd00::1"}, trusted, "198.51.100.1", "198.51.100.1"},
		{"garbage stops the walk at the last readable hop", "10.1.1.1:1", []string{"nonsense, 10.2.2.2"}, trusted, "10.2.2.2", "10.2.2.2"},
		{"only trusted hops leave the innermost one", "10.1.1.1:1", []string{"10.3.3.3"}, trusted, "10.3.3.3", "10.3.3.3"},
		{"no header from a trusted proxy is the proxy", "10.1.1.1:1", nil, trusted, "10.1.1.1", "10.1.1.1"},
		{"IPv6 is grouped by /64 in the key", "[2001:db8:1:2:3:4:5:6]:443", nil, nil, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"IPv4-mapped IPv6 is unmapped", "[::ffff:203.0.113.5]:1", nil, nil, "203.0.113.5", "203.0.113.5"},
		{"a zone is dropped", "[fe80::1%eth0]:1", nil, nil, "fe80::1", "fe80::/64"},
		{"a forwarded IPv4-mapped address is unmapped", "10.1.1.1:1", []string{"::ffff:198.51.100.9"}, trusted, "198.51.100.9", "198.51.100.9"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := tc.r.String(r); got != tc.addr {
				t.Errorf("String = %q, want %q", got, tc.addr)
			}
			if got := tc.r.Key(r); got != tc.key {
				t.Errorf("Key = %q, want %q", got, tc.key)
			}
		})
	}
}

func TestUnreadableRemoteAddr(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "@"
	var res *clientaddr.Resolver
	if got := res.String(r); got != "" {
		t.Fatalf("String = %q, want empty", got)
	}
	if got := res.Key(r); got != "@" {
		t.Fatalf("Key = %q, want the raw RemoteAddr", got)
	}
}

func TestNewRefusesBadEntries(t *testing.T) {
	for _, bad := range []string{"", "proxy.example", "10.0.0.0/33", "::ffff:10.0.0.0/104", "fe80::1%eth0", "10.0.0.1:80"} {
		if _, err := clientaddr.New([]string{bad}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("trusted proxy %q", bad)) {
			t.Errorf("New(%q): err = %v, want one naming the entry", bad, err)
		}
	}
}

func ExampleResolver_Addr() {
	res, err := clientaddr.New([]string{"10.0.0.0/8"})
	if err != nil {
		panic(err)
	}
	r := httptest.NewRequest("GET", "/authorize", nil)
	r.RemoteAddr = "10.0.0.2:41000" // the load balancer
	r.Header.Set("X-Forwarded-For", "6.6.6.6, 203.0.113.9")
	fmt.Println(res.Addr(r))
	// Output: 203.0.113.9
}
