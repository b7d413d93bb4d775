package load_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/scaletest/load"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// server starts an in-process AS with a machine client on 127.0.0.1.
func server(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ts := httptest.NewUnstartedServer(nil)
	issuer := "http://" + ts.Listener.Addr().String()
	srv, err := as.New(ctx, as.Config{
		Issuer: issuer,
		Resources: []as.Resource{
			{URI: "http://127.0.0.1:8080/mcp", Scopes: []string{"mcp:tools"}, Default: true},
		},
		Clients: []as.Client{{ID: "bot", Secret: "bot-secret-0123456789", GrantTypes: []string{"client_credentials"},
			Resources: []string{"http://127.0.0.1:8080/mcp"}}},
		Store:  memory.New(),
		Secret: bytes.Repeat([]byte{7}, 32),
	})
	if err != nil {
		tb.Fatal(err)
	}
	ts.Config.Handler = srv.Handler()
	ts.Start()
	tb.Cleanup(func() { ts.Close(); cancel() })
	return issuer
}

// Client credentials against an AS on this machine, 8 connections, 200
// requests.
func ExampleRun() {
	issuer := server(&testing.T{})
	res, err := load.Run(context.Background(), load.Config{
		Issuer: issuer, Grant: load.ClientCredentials, Connections: 8, Requests: 200,
		ClientID: "bot", ClientSecret: "bot-secret-0123456789",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Requests, "requests,", res.Errors, "errors, status", res.Status)
	// Output: 200 requests, 0 errors, status map[200:200]
}

func TestRunMeasuresEveryRequest(t *testing.T) {
	issuer := server(t)
	cases := []struct {
		name  string
		grant load.Grant
	}{
		{"counts client credentials tokens", load.ClientCredentials},
		{"counts introspections of an active token", load.Introspection},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := load.Run(context.Background(), load.Config{
				Issuer: issuer, Grant: tc.grant, Connections: 4, Requests: 50,
				ClientID: "bot", ClientSecret: "bot-secret-0123456789",
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests != 50 || res.Errors != 0 || res.Status[200] != 50 || res.PerSecond <= 0 || res.P50 <= 0 || res.P99 < res.P50 {
				t.Fatalf("result %v", res)
			}
		})
	}
	t.Run("counts refused requests as errors", func(t *testing.T) {
		res, err := load.Run(context.Background(), load.Config{
			Issuer: issuer, Grant: load.ClientCredentials, Connections: 2, Requests: 10,
			ClientID: "bot", ClientSecret: "wrong-secret-0123456789",
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Errors != 10 || res.Status[401] != 10 || !strings.Contains(res.FirstError, "invalid_client") {
			t.Fatalf("result %v", res)
		}
	})
}

func TestConfigIsCheckedBeforeAnyRequest(t *testing.T) {
	cc := func(mod func(*load.Config)) load.Config {
		c := load.Config{Issuer: "http://127.0.0.1:1", Grant: load.ClientCredentials, ClientID: "a", ClientSecret: "b"}
		mod(&c)
		return c
	}
	cases := []struct {
		name    string
		cfg     load.Config
		wantErr string
	}{
		{"refuses a target that is not on this machine", cc(func(c *load.Config) { c.Issuer = "http://192.0.2.1:9000" }), "only loopback"},
		{"refuses a host name other than localhost", cc(func(c *load.Config) { c.Issuer = "https://auth.example.com" }), "only loopback"},
		{"refuses a non-loopback connect address behind a loopback issuer", cc(func(c *load.Config) { c.Connect = "10.0.0.1:9000" }), "only loopback"},
		{"refuses an issuer that is not an http URL", cc(func(c *load.Config) { c.Issuer = "ftp://127.0.0.1" }), "not an http(s) URL"},
		{"refuses an unknown grant", cc(func(c *load.Config) { c.Grant = "password" }), "unknown grant"},
		{"refuses client credentials without a secret", cc(func(c *load.Config) { c.ClientSecret = "" }), "needs a client id and secret"},
		{"refuses code redemption without a request count", cc(func(c *load.Config) {
			c.Grant, c.PublicClientID, c.RedirectURI, c.Username, c.Password = load.AuthorizationCode, "app", "http://127.0.0.1/cb", "u", "p"
		}), "needs a request count"},
		{"refuses refresh without a user", cc(func(c *load.Config) { c.Grant, c.PublicClientID = load.Refresh, "app" }), "needs a public client id"},
		{"accepts localhost and then fails to connect", cc(func(c *load.Config) { c.Issuer = "http://localhost:1" }), "metadata"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load.Run(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// FuzzIssuer: whatever the issuer, Run never panics and never contacts a
// host that is not loopback (a refused one fails with ErrNotLoopback before
// any connection).
func FuzzIssuer(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:1", "http://[::1]:1", "http://localhost:1", "http://10.0.0.1", "http://0x7f.1:1", "http://127.1:1", "http://[::ffff:127.0.0.1]:1", "http://%31%32%37.0.0.1:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, issuer string) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // no request gets far; only the checks run
		_, err := load.Run(ctx, load.Config{Issuer: issuer, Grant: load.ClientCredentials, ClientID: "a", ClientSecret: "b"})
		if err == nil {
			t.Fatal("a cancelled run succeeded")
		}
		if errors.Is(err, load.ErrNotLoopback) || !strings.Contains(err.Error(), "load: metadata") {
			return // refused before any connection
		}
		// Accepted: the host must be loopback.
		u, perr := url.Parse(issuer)
		if perr != nil {
			t.Fatalf("issuer %q does not parse but was accepted: %v", issuer, err)
		}
		host := u.Hostname()
		if ip := net.ParseIP(host); !strings.EqualFold(host, "localhost") && (ip == nil || !ip.IsLoopback()) {
			t.Fatalf("issuer %q with host %q was accepted: %v", issuer, host, err)
		}
	})
}
