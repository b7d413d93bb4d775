package safehttp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/internal/safehttp"
)

func TestIsSpecial(t *testing.T) {
	cases := []struct {
		name    string
		addr    string
		special bool
	}{
		{"loopback v4 is special", "127.0.0.1", true},
		{"the whole of 127/8 is special", "127.9.9.9", true},
		{"RFC 1918 10/8 is special", "10.1.2.3", true},
		{"RFC 1918 172.16/12 is special", "172.31.255.254", true},
		{"RFC 1918 192.168/16 is special", "192.168.0.1", true},
		{"cloud metadata link-local is special", "169.254.169.254", true},
		{"CGNAT 100.64/10 is special", "100.100.100.200", true},
		{"multicast is special", "224.0.0.1", true},
		{"broadcast is special", "255.255.255.255", true},
		{"unspecified v4 is special", "0.0.0.0", true},
		{"TEST-NET-3 documentation is special", "203.0.113.7", true},
		{"benchmarking 198.18/15 is special", "198.19.0.1", true},
		{"loopback v6 is special", "::1", true},
		{"unspecified v6 is special", "::", true},
		{"unique local fc00::/7 is special", "fd12:3456::1", true},
		{"link-local fe80::/10 is special", "fe80::1", true},
		{"IPv4-mapped loopback is special", "::ffff:127.0.0.1", true},
		{"IPv4-mapped metadata address is special", "::ffff:169.254.169.254", true},
		{"NAT64 form of loopback is special", "64:ff9b::7f00:1", true},
		{"NAT64 form of 10.0.0.1 is special", "64:ff9b::a00:1", true},
		{"IPv6 documentation is special", "2001:db8::1", true},
		{"6to4 is special", "2002:7f00:1::1", true},
		{"IPv6 multicast is special", "ff02::1", true},
		{"a public v4 address is not special", "93.184.215.14", false},
		{"100.63/16 just below CGNAT is not special", "100.63.0.1", false},
		{"a public v6 address is not special", "2606:4700::6810:85e5", false},
		{"NAT64 form of a public address is not special", "64:ff9b::5db8:d70e", false},
		{"IPv4-mapped public address is not special", "::ffff:93.184.215.14", false},
		// The last four bytes of an IPv6 address outside 64:ff9b::/96 are no
		// IPv4 address: fails if every IPv6 address is judged as NAT64.
		{"link-local v6 ending in a public v4 address is special", "fe80::5db8:d70e", true},
		{"IPv6 documentation ending in a public v4 address is special", "2001:db8::5db8:d70e", true},
		{"a public v6 address ending in 10.0.0.1 is not special", "2606:4700::a00:1", false},
		{"a public v6 address ending in 127.0.0.1 is not special", "2606:4700::7f00:1", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := safehttp.IsSpecial(netip.MustParseAddr(tc.addr)); got != tc.special {
				t.Fatalf("IsSpecial(%s) = %v, want %v", tc.addr, got, tc.special)
			}
		})
	}
}

func hostOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func TestFetch(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Cookie") != "" {
			t.Error("a cookie was sent")
		}
		if got := r.Header.Get("Accept"); got != "application/json" {
			t.Errorf("Accept = %q, want Fetch's accept argument", got)
		}
		fmt.Fprint(w, `{"ok":true}`)
	})
	mux.HandleFunc("/exact", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(strings.Repeat("a", 100))) })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(strings.Repeat("a", 101))) })
	mux.HandleFunc("/big-chunked", func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 20; i++ {
			w.Write([]byte(strings.Repeat("b", 10)))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ok", http.StatusFound)
	})
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(3 * time.Second):
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	other := httptest.NewTLSServer(mux) // same content, not on the allowlist
	defer other.Close()
	plain := httptest.NewServer(mux)
	defer plain.Close()

	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	c, err := safehttp.NewClient(safehttp.Config{
		Allow:                 []string{hostOf(t, srv.URL), hostOf(t, plain.URL)},
		AllowHTTP:             []string{hostOf(t, plain.URL)},
		RootCAs:               pool,
		ResponseHeaderTimeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	strict, err := safehttp.NewClient(safehttp.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	otherPort := hostOf(t, other.URL)[strings.LastIndex(hostOf(t, other.URL), ":"):]

	cases := []struct {
		name   string
		client *http.Client
		url    string
		want   error // nil: success
	}{
		{"fetches an allowlisted TLS server", c, srv.URL + "/ok", nil},
		{"accepts a body of exactly the cap", c, srv.URL + "/exact", nil},
		{"fetches plain http from a host on AllowHTTP", c, plain.URL + "/ok", nil},
		{"refuses a body one byte over the cap", c, srv.URL + "/big", safehttp.ErrTooLarge},
		{"refuses a chunked body over the cap", c, srv.URL + "/big-chunked", safehttp.ErrTooLarge},
		{"refuses a redirect", c, srv.URL + "/redirect", safehttp.ErrRedirect},
		{"refuses a 404", c, srv.URL + "/missing", safehttp.ErrStatus},
		{"gives up on a slow server", c, srv.URL + "/slow", safehttp.ErrTimeout},
		{"refuses loopback that is not on the allowlist", c, other.URL + "/ok", safehttp.ErrAddress},
		{"refuses loopback without any allowlist", strict, srv.URL + "/ok", safehttp.ErrAddress},
		{"refuses a DNS name resolving to loopback", c, "https://localhost" + otherPort + "/ok", safehttp.ErrAddress},
		{"refuses IPv6 loopback", c, "https://[::1]" + otherPort + "/ok", safehttp.ErrAddress},
		{"refuses IPv4-mapped IPv6 loopback", c, "https://[::ffff:127.0.0.1]" + otherPort + "/ok", safehttp.ErrAddress},
		{"refuses NAT64 loopback", strict, "https://[64:ff9b::7f00:1]/ok", safehttp.ErrAddress},
		{"refuses a private 10.x address", strict, "https://10.20.30.40/ok", safehttp.ErrAddress},
		{"refuses the cloud metadata address", strict, "https://169.254.169.254/latest/meta-data/", safehttp.ErrAddress},
		{"refuses plain http elsewhere", c, "http://93.184.215.14/", safehttp.ErrScheme},
		{"refuses plain http to an allowlisted TLS host", c, strings.Replace(srv.URL, "https", "http", 1) + "/ok", safehttp.ErrScheme},
		{"refuses a file URL", c, "file:///etc/passwd", safehttp.ErrScheme},
		{"refuses userinfo", c, "https://user:pw@" + hostOf(t, srv.URL) + "/ok", safehttp.ErrScheme},
	}
	bodies := map[string]string{ // by URL, for the successes
		srv.URL + "/ok":    `{"ok":true}`,
		srv.URL + "/exact": strings.Repeat("a", 100),
		plain.URL + "/ok":  `{"ok":true}`,
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			body, _, err := safehttp.Fetch(ctx, tc.client, tc.url, "application/json", 100)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Fetch: %v", err)
				}
				if len(body) == 0 {
					t.Fatal("empty body")
				}
				if want := bodies[tc.url]; string(body) != want {
					t.Fatalf("body = %q, want %q", body, want)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Fetch error = %v, want %v", err, tc.want)
			}
			if body != nil {
				t.Fatal("a body came back with an error")
			}
		})
	}
}

// A caller using the client directly (the jwks_uri fetcher) must not leak
// credentials it set by mistake to a client-chosen host.
func TestClientStripsCookieAndAuthorization(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range []string{"Cookie", "Authorization"} {
			if v := r.Header.Get(h); v != "" {
				t.Errorf("%s reached the server: %q", h, v)
			}
		}
		if got := r.Header.Get("X-Kept"); got != "yes" {
			t.Errorf("X-Kept = %q: other headers must pass", got)
		}
	}))
	defer srv.Close()
	c, err := safehttp.NewClient(safehttp.Config{Allow: []string{hostOf(t, srv.URL)}, RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Cookie", "session=secret")
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Set("X-Kept", "yes")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if req.Header.Get("Authorization") == "" {
		t.Error("the caller's request was modified; the client must work on a copy")
	}
}

func TestStatusErrorCarriesTheCode(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	defer srv.Close()
	c, err := safehttp.NewClient(safehttp.Config{Allow: []string{hostOf(t, srv.URL)}, RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = safehttp.Fetch(context.Background(), c, srv.URL, "", 10)
	var se *safehttp.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusTeapot {
		t.Fatalf("err = %v, want StatusError 418", err)
	}
}

func TestNewClientRefusesAMalformedAllowEntry(t *testing.T) {
	for _, allow := range [][]string{
		{"localhost:80"},
		{"10.0.0.0/33"},
		{"not an address"},
		// A malformed entry after a good one of each kind is still seen.
		{"127.0.0.1:8443", "not an address"},
		{"10.0.0.0/8", "not an address"},
		{"192.0.2.1", "not an address"},
	} {
		_, err := safehttp.NewClient(safehttp.Config{Allow: allow})
		bad := fmt.Sprintf("%q", allow[len(allow)-1])
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("NewClient(Allow: %q) = %v, want an error naming %s", allow, err, bad)
		}
	}
}

// Fails if the allowlist stops at its first CIDR or bare address entry.
func TestEveryAllowEntryCounts(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("x")) }))
	defer srv.Close()
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	for _, first := range []string{"10.0.0.0/8", "192.0.2.1", "198.51.100.7:443"} {
		c, err := safehttp.NewClient(safehttp.Config{Allow: []string{first, hostOf(t, srv.URL)}, RootCAs: pool})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := safehttp.Fetch(context.Background(), c, srv.URL, "", 10); err != nil {
			t.Errorf("Allow %q then the server: Fetch: %v", first, err)
		}
	}
}

func TestCIDRAllowEntryAdmitsAnyPortInside(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("x")) }))
	defer srv.Close()
	c, err := safehttp.NewClient(safehttp.Config{Allow: []string{"127.0.0.0/8"}, RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := safehttp.Fetch(context.Background(), c, srv.URL, "", 10); err != nil {
		t.Fatalf("Fetch: %v", err)
	}
}

// A non-200 answer the client returns (no Location to refuse to follow) is a
// *StatusError, and also ErrRedirect exactly when it is a 3xx.
func TestNon200Answers(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		if err != nil {
			t.Errorf("path %q", r.URL.Path)
			return
		}
		w.WriteHeader(code) // no Location header
	}))
	defer srv.Close()
	c, err := safehttp.NewClient(safehttp.Config{Allow: []string{hostOf(t, srv.URL)}, RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		code     int
		redirect bool
	}{
		{204, false}, {299, false}, {300, true}, {302, true}, {304, true}, {399, true},
		{400, false}, {404, false}, {500, false},
	} {
		body, _, err := safehttp.Fetch(context.Background(), c, fmt.Sprintf("%s/%d", srv.URL, tc.code), "", 10)
		var se *safehttp.StatusError
		if !errors.As(err, &se) || se.Code != tc.code || body != nil {
			t.Errorf("status %d: err = %v, want StatusError %d and no body", tc.code, err, tc.code)
			continue
		}
		if got := errors.Is(err, safehttp.ErrRedirect); got != tc.redirect {
			t.Errorf("status %d: errors.Is(err, ErrRedirect) = %v, want %v", tc.code, got, tc.redirect)
		}
	}
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func TestClassify(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"a caller's deadline is a timeout", fmt.Errorf("get: %w", context.DeadlineExceeded), safehttp.ErrTimeout},
		{"a connection deadline is a timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, safehttp.ErrTimeout},
		{"a net.Error that timed out is a timeout", &url.Error{Op: "Get", URL: "https://x", Err: timeoutError{}}, safehttp.ErrTimeout},
		{"a refused connection is a network error", refused, safehttp.ErrNetwork},
		{"a DNS failure is a network error", &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, safehttp.ErrNetwork},
		{"a plain error is a network error", errors.New("tls: bad certificate"), safehttp.ErrNetwork},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := safehttp.Classify(tc.err)
			for _, s := range []error{safehttp.ErrTimeout, safehttp.ErrNetwork} {
				if errors.Is(got, s) != (s == tc.want) {
					t.Fatalf("Classify(%v) = %v, want it to wrap %v only", tc.err, got, tc.want)
				}
			}
			if !errors.Is(got, tc.err) {
				t.Fatalf("Classify(%v) = %v, which lost the cause", tc.err, got)
			}
		})
	}
	t.Run("an error that already wraps a sentinel is returned unchanged", func(t *testing.T) {
		in := fmt.Errorf("%w: 10.0.0.1", safehttp.ErrAddress)
		if got := safehttp.Classify(in); got != in {
			t.Fatalf("Classify(%v) = %v", in, got)
		}
	})
	t.Run("a refused connection through the client is a network error, not a timeout", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		c, err := safehttp.NewClient(safehttp.Config{Allow: []string{addr}})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = safehttp.Fetch(context.Background(), c, "https://"+addr+"/", "", 10)
		if !errors.Is(err, safehttp.ErrNetwork) || errors.Is(err, safehttp.ErrTimeout) || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("Fetch to a closed port: %v, want ErrNetwork (connection refused)", err)
		}
	})
}

func ExampleNewClient() {
	// Production: the zero Config. Tests and development add an allowlist.
	c, err := safehttp.NewClient(safehttp.Config{})
	if err != nil {
		panic(err)
	}
	_, _, err = safehttp.Fetch(context.Background(), c, "https://169.254.169.254/latest/meta-data/", "application/json", 5<<10)
	fmt.Println(errors.Is(err, safehttp.ErrAddress))
	_, _, err = safehttp.Fetch(context.Background(), c, "http://example.com/client.json", "application/json", 5<<10)
	fmt.Println(errors.Is(err, safehttp.ErrScheme))
	// Output:
	// true
	// true
}
