// Package safehttp is the one HTTP client for anything fetched from a URL that
// a client gave us: Client ID Metadata Documents and jwks_uri
// (draft-ietf-oauth-client-id-metadata-document §6 "Security Considerations",
// RFC 7591 §5 on jwks_uri, and the SSRF guidance of RFC 9700 §4.17 / OWASP).
//
// The client it builds:
//   - speaks https only; plain http only for hosts listed in Config.AllowHTTP;
//   - checks the resolved IP address at connect time (net.Dialer.Control), so a
//     DNS name that resolves, or later rebinds, to loopback, private, link-local,
//     CGNAT, multicast, documentation or other special-use space is refused,
//     including IPv4-mapped IPv6 and NAT64 forms of such addresses;
//   - lets an explicit allowlist (host:port or CIDR) reach special addresses,
//     for tests and development, and then only what is listed;
//   - follows no redirects, keeps no cookies, ignores proxy environment
//     variables, and has short dial, TLS, header and total timeouts.
//
// Fetch adds what every caller needs: 200 only and a body size cap. Errors wrap
// the sentinels below so callers can map them with errors.Is.
package safehttp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Sentinel errors. Every error returned by this package's client or by Fetch
// wraps one of them, except that a 3xx answer the client returns to Fetch (one
// it had no Location to refuse to follow) wraps both ErrRedirect and a
// *StatusError (ErrStatus).
var (
	// ErrScheme: the URL is not https (or http for a host in AllowHTTP), or
	// carries userinfo.
	ErrScheme = errors.New("safehttp: URL scheme not allowed")
	// ErrAddress: the destination resolved to a special-use address that is
	// not on the allowlist.
	ErrAddress = errors.New("safehttp: destination address not allowed")
	// ErrRedirect: the server answered with a redirect; none are followed.
	ErrRedirect = errors.New("safehttp: redirects are not followed")
	// ErrStatus: the server answered with a status other than 200. The
	// wrapping *StatusError carries the code.
	ErrStatus = errors.New("safehttp: unexpected HTTP status")
	// ErrTooLarge: the body exceeds the cap.
	ErrTooLarge = errors.New("safehttp: response body too large")
	// ErrTimeout: a dial, TLS, header or total timeout (or the caller's
	// context deadline) expired.
	ErrTimeout = errors.New("safehttp: timeout")
	// ErrNetwork: any other failure to connect or read (DNS, TLS, reset).
	ErrNetwork = errors.New("safehttp: network error")
)

// StatusError reports a non-200 answer. errors.Is(err, ErrStatus) holds.
type StatusError struct {
	Code int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("safehttp: HTTP status %d, want 200", e.Code)
}

// Is makes errors.Is(err, ErrStatus) true.
func (e *StatusError) Is(target error) bool { return target == ErrStatus }

// Config configures NewClient. The zero value is the production setting: https
// to public addresses only, default timeouts, system roots.
type Config struct {
	// Allow lists destinations that may be reached although their address is
	// special-use: "127.0.0.1:8443" (exact IP and port) or "127.0.0.0/8"
	// (any port). Used by tests and development; empty in production.
	Allow []string `yaml:"allow"`
	// AllowHTTP lists URL hosts ("127.0.0.1:8080", "localhost:9000", as they
	// appear in the URL) that may be fetched over plain http. The address is
	// still checked against Allow at connect time.
	AllowHTTP []string `yaml:"allow_http"`
	// DialTimeout bounds TCP connect; 0 means 3s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// TLSHandshakeTimeout bounds the TLS handshake; 0 means 3s.
	TLSHandshakeTimeout time.Duration `yaml:"tls_handshake_timeout"`
	// ResponseHeaderTimeout bounds the wait for response headers; 0 means 3s.
	ResponseHeaderTimeout time.Duration `yaml:"response_header_timeout"`
	// Timeout bounds the whole request including the body; 0 means 5s.
	Timeout time.Duration `yaml:"timeout"`
	// RootCAs, when set, replaces the system roots (tests trust httptest's
	// certificate this way). Nil: system roots.
	RootCAs *x509.CertPool `yaml:"-"`
}

type policy struct {
	exact     map[netip.AddrPort]bool
	prefixes  []netip.Prefix
	httpHosts map[string]bool
}

// NewClient returns an *http.Client enforcing cfg. It fails on a malformed
// allowlist entry.
func NewClient(cfg Config) (*http.Client, error) {
	p := &policy{exact: map[netip.AddrPort]bool{}, httpHosts: map[string]bool{}}
	for _, a := range cfg.Allow {
		a = strings.TrimSpace(a)
		if ap, err := netip.ParseAddrPort(a); err == nil {
			p.exact[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())] = true
			continue
		}
		if pr, err := netip.ParsePrefix(a); err == nil {
			p.prefixes = append(p.prefixes, pr.Masked())
			continue
		}
		if ad, err := netip.ParseAddr(a); err == nil {
			ad = ad.Unmap()
			p.prefixes = append(p.prefixes, netip.PrefixFrom(ad, ad.BitLen()))
			continue
		}
		return nil, fmt.Errorf("safehttp: allow entry %q is neither ip:port nor a CIDR", a)
	}
	for _, h := range cfg.AllowHTTP {
		p.httpHosts[strings.ToLower(strings.TrimSpace(h))] = true
	}
	tr := &http.Transport{
		Proxy:                  nil, // never from the environment
		DialContext:            newDialer(cfg, p).DialContext,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: cfg.RootCAs},
		TLSHandshakeTimeout:    orDefault(cfg.TLSHandshakeTimeout, 3*time.Second),
		ResponseHeaderTimeout:  orDefault(cfg.ResponseHeaderTimeout, 3*time.Second),
		MaxResponseHeaderBytes: 32 << 10,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        60 * time.Second,
		ForceAttemptHTTP2:      true,
	}
	return &http.Client{
		Transport: &guard{next: tr, policy: p},
		Jar:       nil,
		Timeout:   orDefault(cfg.Timeout, 5*time.Second),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			return fmt.Errorf("%w (to %s)", ErrRedirect, req.URL.Redacted())
		},
	}, nil
}

// newDialer returns the dialer of NewClient's transport: cfg's connect
// timeout, and p's address check run on every address it connects to.
func newDialer(cfg Config, p *policy) *net.Dialer {
	return &net.Dialer{
		Timeout:   orDefault(cfg.DialTimeout, 3*time.Second),
		KeepAlive: 30 * time.Second,
		Control:   p.control,
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// guard refuses URLs with a forbidden scheme before anything is dialled, and
// strips what must not leave this process.
type guard struct {
	next   http.RoundTripper
	policy *policy
}

func (g *guard) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := g.policy.checkURL(req.URL); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Del("Cookie")
	r.Header.Del("Authorization")
	return g.next.RoundTrip(r)
}

func (p *policy) checkURL(u *url.URL) error {
	if u.User != nil {
		return fmt.Errorf("%w: userinfo in URL", ErrScheme)
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return nil
	case "http":
		if p.httpHosts[strings.ToLower(u.Host)] {
			return nil
		}
	}
	return fmt.Errorf("%w: %q", ErrScheme, u.Scheme+"://"+u.Host)
}

// control runs after DNS resolution, just before connect, for every address
// the dialer tries; this is what defeats DNS rebinding.
func (p *policy) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparsable address %q", ErrAddress, address)
	}
	ap = netip.AddrPortFrom(ap.Addr().WithZone("").Unmap(), ap.Port())
	if p.allowed(ap) {
		return nil
	}
	if IsSpecial(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrAddress, ap.Addr())
	}
	return nil
}

func (p *policy) allowed(ap netip.AddrPort) bool {
	if p.exact[ap] {
		return true
	}
	for _, pr := range p.prefixes {
		if pr.Contains(ap.Addr()) {
			return true
		}
	}
	return false
}

// special lists address blocks that a fetch of a client-supplied URL must not
// reach (IANA IPv4 and IPv6 Special-Purpose Address Registries, RFC 6890).
var special = mustPrefixes(
	// IPv4
	"0.0.0.0/8",       // "this network", unspecified (RFC 791)
	"10.0.0.0/8",      // private (RFC 1918)
	"100.64.0.0/10",   // CGNAT shared space (RFC 6598)
	"127.0.0.0/8",     // loopback (RFC 1122)
	"169.254.0.0/16",  // link-local, cloud metadata (RFC 3927)
	"172.16.0.0/12",   // private (RFC 1918)
	"192.0.0.0/24",    // IETF protocol assignments (RFC 6890)
	"192.0.2.0/24",    // TEST-NET-1 (RFC 5737)
	"192.88.99.0/24",  // 6to4 relay anycast (RFC 7526)
	"192.168.0.0/16",  // private (RFC 1918)
	"198.18.0.0/15",   // benchmarking (RFC 2544)
	"198.51.100.0/24", // TEST-NET-2 (RFC 5737)
	"203.0.113.0/24",  // TEST-NET-3 (RFC 5737)
	"224.0.0.0/4",     // multicast (RFC 5771)
	"240.0.0.0/4",     // reserved (RFC 1112), includes broadcast 255.255.255.255
	// IPv6
	"::/96",          // unspecified, loopback, IPv4-compatible (RFC 4291)
	"::ffff:0:0/96",  // IPv4-mapped, when not unmapped (RFC 4291)
	"64:ff9b:1::/48", // local-use NAT64 (RFC 8215)
	"100::/64",       // discard-only (RFC 6666)
	"2001::/23",      // IETF protocol assignments incl. Teredo (RFC 2928, 4380)
	"2001:db8::/32",  // documentation (RFC 3849)
	"2002::/16",      // 6to4 (RFC 3056)
	"3fff::/20",      // documentation (RFC 9637)
	"5f00::/16",      // SRv6 SIDs (RFC 9602)
	"fc00::/7",       // unique local (RFC 4193)
	"fe80::/10",      // link-local (RFC 4291)
	"fec0::/10",      // site-local, deprecated (RFC 3879)
	"ff00::/8",       // multicast (RFC 4291)
)

var (
	nat64         = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052 well-known prefix
	globalUnicast = netip.MustParsePrefix("2000::/3")     // IPv6 global unicast (IANA); IsSpecial refuses the rest
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// IsSpecial reports whether a is an address a fetch of a client-supplied URL
// must not reach: loopback, private, link-local, CGNAT, multicast, unspecified,
// broadcast, documentation, benchmarking or reserved, in IPv4 or IPv6 form.
// IPv4-mapped IPv6 addresses and NAT64 (64:ff9b::/96) addresses are judged by
// the IPv4 address they carry. IPv6 outside 2000::/3 is special too.
func IsSpecial(a netip.Addr) bool {
	if !a.IsValid() {
		return true
	}
	a = a.WithZone("").Unmap()
	if a.Is6() && nat64.Contains(a) {
		b := a.As16()
		return IsSpecial(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	for _, p := range special {
		if p.Contains(a) {
			return true
		}
	}
	if a.Is6() && !globalUnicast.Contains(a) {
		return true
	}
	return false
}

// Fetch GETs rawURL with c and returns the body and headers of a 200 answer
// whose body is at most maxBytes. It reads maxBytes+1 bytes to tell a body of
// exactly the cap from a larger one. accept, when not empty, is sent as the
// Accept header.
func Fetch(ctx context.Context, c *http.Client, rawURL, accept string, maxBytes int64) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrScheme, err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, Classify(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			return nil, nil, fmt.Errorf("%w: %w", ErrRedirect, &StatusError{Code: resp.StatusCode})
		}
		return nil, nil, &StatusError{Code: resp.StatusCode}
	}
	if resp.ContentLength > maxBytes {
		return nil, nil, fmt.Errorf("%w: Content-Length %d > %d", ErrTooLarge, resp.ContentLength, maxBytes)
	}
	body, err := ReadLimited(resp.Body, maxBytes)
	if err != nil {
		return nil, nil, err
	}
	return body, resp.Header, nil
}

// ReadLimited reads all of r if it holds at most maxBytes, else it fails with
// ErrTooLarge. Read errors are classified like the client's.
func ReadLimited(r io.Reader, maxBytes int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
	if err != nil {
		return nil, Classify(err)
	}
	if int64(len(b)) > maxBytes {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, maxBytes)
	}
	return b, nil
}

// Classify wraps err, as returned by the client, in the matching sentinel.
// An error that already wraps one of them is returned unchanged.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	for _, s := range []error{ErrScheme, ErrAddress, ErrRedirect, ErrStatus, ErrTooLarge, ErrTimeout, ErrNetwork} {
		if errors.Is(err, s) {
			return err
		}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return fmt.Errorf("%w: %w", ErrNetwork, err)
}
