package config

import (
	"net"
	"net/url"
	"strings"
	"testing"
)

// TestDevIssuerFollowsListen: without a file the issuer is the listen
// address, so AUTHSERVER_LISTEN alone moves discovery with the server.
func TestDevIssuerFollowsListen(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    map[string]string
		issuer string
	}{
		{"the default listen gives the default issuer", nil, "http://127.0.0.1:9000"},
		{"AUTHSERVER_LISTEN moves the issuer", map[string]string{"AUTHSERVER_LISTEN": "127.0.0.1:9500"}, "http://127.0.0.1:9500"},
		{"an IPv6 loopback listen is bracketed", map[string]string{"AUTHSERVER_LISTEN": "[::1]:9501"}, "http://[::1]:9501"},
		{"localhost stays localhost", map[string]string{"AUTHSERVER_LISTEN": "localhost:9502"}, "http://localhost:9502"},
		{"an unspecified host is reached on 127.0.0.1", map[string]string{"AUTHSERVER_LISTEN": "0.0.0.0:9503", DevOptIn: "1"}, "http://127.0.0.1:9503"},
		{"an empty host is reached on 127.0.0.1", map[string]string{"AUTHSERVER_LISTEN": ":9504", DevOptIn: "1"}, "http://127.0.0.1:9504"},
		{"AUTHSERVER_ISSUER still wins", map[string]string{"AUTHSERVER_LISTEN": "127.0.0.1:9500", "AUTHSERVER_ISSUER": "https://auth.example.com"}, "https://auth.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load("", envOf(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if c.Issuer != tc.issuer {
				t.Errorf("issuer = %q, want %q", c.Issuer, tc.issuer)
			}
			if l, ok := tc.env["AUTHSERVER_LISTEN"]; ok && c.Listen != l {
				t.Errorf("listen = %q, want %q", c.Listen, l)
			}
			if _, named := tc.env["AUTHSERVER_ISSUER"]; !named && len(c.Warnings()) != 0 {
				t.Errorf("a derived issuer is warned about: %q", c.Warnings())
			}
		})
	}
	t.Run("a file without issuer keeps the documented default", func(t *testing.T) {
		c, err := Parse([]byte("listen: 127.0.0.1:9600\n"+baseWithoutAddresses()), envOf(nil))
		if err != nil {
			t.Fatal(err)
		}
		if c.Issuer != DefaultIssuer {
			t.Errorf("issuer = %q, want %q", c.Issuer, DefaultIssuer)
		}
	})
}

// TestWarningsNameALoopbackIssuerOnAnotherPort: a loopback issuer whose
// port is not listen's points clients at nothing; other hosts are assumed to
// sit behind a proxy.
func TestWarningsNameALoopbackIssuerOnAnotherPort(t *testing.T) {
	for _, tc := range []struct {
		issuer, listen string
		warn           bool
	}{
		{"http://127.0.0.1:9000", "127.0.0.1:9500", true},
		{"http://localhost:9000", "127.0.0.1:9500", true},
		{"http://[::1]:9000", "[::1]:9500", true},
		{"http://127.0.0.1", "127.0.0.1:9000", true}, // port 80
		{"http://127.0.0.1:9000/tenant", "0.0.0.0:9001", true},
		{"http://127.0.0.1:9000", "127.0.0.1:9000", false},
		{"http://localhost:9000/auth", "0.0.0.0:9000", false},
		{"https://auth.example.com", "127.0.0.1:9000", false},
		{"https://auth.internal:9000", "0.0.0.0:9500", false},
	} {
		file := "issuer: " + tc.issuer + "\nlisten: \"" + tc.listen + "\"\n" + baseWithoutAddresses()
		c, err := Parse([]byte(file), envOf(nil))
		if err != nil {
			t.Fatalf("%s on %s: %v", tc.issuer, tc.listen, err)
		}
		w := c.Warnings()
		if got := len(w) == 1 && w[0].Path == "issuer" && strings.Contains(w[0].Msg, tc.issuer) && strings.Contains(w[0].Msg, tc.listen); got != tc.warn {
			t.Errorf("issuer %s, listen %s: warnings %q, want a warning naming both: %v", tc.issuer, tc.listen, w, tc.warn)
		}
		if !tc.warn && len(w) != 0 {
			t.Errorf("issuer %s, listen %s: unexpected warnings %q", tc.issuer, tc.listen, w)
		}
	}
}

// baseWithoutAddresses is the test file base without its issuer and listen.
func baseWithoutAddresses() string {
	var keep []string
	for _, l := range strings.Split(base, "\n") {
		if !strings.HasPrefix(l, "issuer:") && !strings.HasPrefix(l, "listen:") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// FuzzIssuerForListen: whatever the listen address, the derived issuer is
// the default or an http URL on listen's port that validation accepts.
func FuzzIssuerForListen(f *testing.F) {
	for _, s := range []string{"127.0.0.1:9000", ":9500", "[::]:1", "localhost:80", "x", "[::1", "a:b:c", "h:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, listen string) {
		iss := issuerForListen(listen)
		if iss == DefaultIssuer {
			return
		}
		u, err := url.Parse(iss)
		if err != nil || u.Scheme != "http" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			t.Fatalf("issuerForListen(%q) = %q: not a plain http origin", listen, iss)
		}
		if _, port, _ := net.SplitHostPort(listen); u.Port() != port {
			t.Fatalf("issuerForListen(%q) = %q: port %q, want %q", listen, iss, u.Port(), port)
		}
	})
}
