// Package clientaddr finds the address an HTTP request came from when the
// server may sit behind reverse proxies, for rate limits, login throttling
// and logs.
//
// The TCP peer (http.Request.RemoteAddr) is the client unless it is one of
// the configured trusted proxies. Then the X-Forwarded-For header is read
// from the right: each hop that is itself a trusted proxy is skipped, and the
// first one that is not is the client. Entries left of it were written by
// the client and are never believed. With no trusted proxies the header is
// ignored entirely, so a client cannot choose its own address.
//
// One Resolver built from the top-level trusted_proxies setting serves every
// component, so all of them count and log the same address.
package clientaddr

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Resolver finds client addresses. The zero value and a nil *Resolver trust
// no proxy: the address is always the TCP peer's.
type Resolver struct {
	trusted []netip.Prefix
}

// New returns a Resolver that believes X-Forwarded-For from the given
// proxies, each an IP address ("10.0.0.7", "::1") or a CIDR prefix
// ("10.0.0.0/8", "fd00::/8").
func New(trustedProxies []string) (*Resolver, error) {
	r := &Resolver{}
	for _, s := range trustedProxies {
		p, err := ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		r.trusted = append(r.trusted, p)
	}
	return r, nil
}

// ParsePrefix parses one trusted_proxies entry: an address (a single-address
// prefix) or a CIDR prefix.
func ParsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil {
		if p.Addr().Is4In6() {
			return netip.Prefix{}, fmt.Errorf("clientaddr: trusted proxy %q: write IPv4 prefixes in IPv4 form", s)
		}
		return p.Masked(), nil
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	return netip.Prefix{}, fmt.Errorf("clientaddr: trusted proxy %q is neither an IP address nor a CIDR prefix", s)
}

// Addr returns the client's address, zone removed and IPv4-mapped IPv6
// unmapped. It is the zero Addr when RemoteAddr is not an IP address (a test
// harness or a Unix socket).
func (r *Resolver) Addr(req *http.Request) netip.Addr {
	a := peer(req.RemoteAddr)
	if !a.IsValid() || r == nil || !r.trusts(a) {
		return a
	}
	hops := strings.Split(strings.Join(req.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		h, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			// A hop we cannot read: the proxy nearest to it is the
			// last address we can vouch for.
			break
		}
		a = h.WithZone("").Unmap()
		if !r.trusts(a) {
			break
		}
	}
	return a
}

// Key is the address in the form used to count requests: Addr, with IPv6
// addresses grouped by their /64 (one subscriber's usual allocation, RFC
// 6177), so a client cannot escape a limit by walking its own prefix. An
// unreadable RemoteAddr is returned as it is.
func (r *Resolver) Key(req *http.Request) string {
	a := r.Addr(req)
	if !a.IsValid() {
		return req.RemoteAddr
	}
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// String returns Addr as text for logs ("" when unknown).
func (r *Resolver) String(req *http.Request) string {
	a := r.Addr(req)
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

func (r *Resolver) trusts(a netip.Addr) bool {
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func peer(remote string) netip.Addr {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.WithZone("").Unmap()
}
