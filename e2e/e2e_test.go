package e2e

import (
	"context"
	"crypto/rand"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpauth/mcpauth/examples/stack/launch"
)

// Demo credentials from deploy/authserver.yaml.
const (
	demoUser     = "alice"
	demoPassword = "alice-demo-password"
)

// formFlow is a flow that logs in through the real HTML forms with an
// http.Client and checks the pages it went through.
func formFlow(t *testing.T, redirectURI string, cimd *cimdServer) flow {
	fl := newFormLogin(demoUser, demoPassword, redirectURI)
	return flow{
		cimd:        cimd,
		redirectURI: redirectURI,
		fetch:       fl.fetch,
		afterLogin: func(t *testing.T, authorizations int) {
			fl.mu.Lock()
			defer fl.mu.Unlock()
			var logins, consents int
			for _, p := range fl.pages {
				switch p.Kind {
				case "login":
					logins++
				case "consent":
					consents++
					if !strings.Contains(p.Text, "mcp:tools") {
						t.Errorf("consent page does not list the requested scope mcp:tools: %q", p.Text)
					}
				}
			}
			// One login (the session cookie carries the step-up), and a
			// consent for each new set of scopes.
			if logins != 1 {
				t.Errorf("%d login pages after %d authorizations, want 1 (the session is remembered)", logins, authorizations)
			}
			if consents != authorizations {
				t.Errorf("%d consent pages after %d authorizations, want one each", consents, authorizations)
			}
			for i, st := range fl.posts {
				if st != 303 {
					t.Errorf("form POST %d answered %d, want 303 See Other (RFC 9700 §4.12)", i, st)
				}
			}
		},
	}
}

// loopbackRedirect is a loopback redirect URI on a port nothing listens on:
// the form driver stops at the redirect and reads the code from it.
func loopbackRedirect(t *testing.T) string {
	a, err := launch.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + a + "/callback"
}

func TestFullFlowWithDynamicClientRegistration(t *testing.T) {
	s := startStack(t, stackOptions{})
	runFlow(t, s, formFlow(t, loopbackRedirect(t), nil))
}

func TestFullFlowWithClientIDMetadataDocument(t *testing.T) {
	redirect := loopbackRedirect(t)
	cimd := newCIMDServer(t, redirect)
	s := startStack(t, stackOptions{
		cimdHost: cimd.Host(),
		extraEnv: []string{"SSL_CERT_FILE=" + cimd.CertFile},
	})
	runFlow(t, s, formFlow(t, redirect, cimd))
}

func TestFullFlowOnPostgreSQL(t *testing.T) {
	dsn := os.Getenv("AUTHSERVER_TEST_POSTGRES")
	if dsn == "" {
		requireCI(t, "AUTHSERVER_TEST_POSTGRES is not set")
	}
	s := startStack(t, stackOptions{storage: freshDatabase(t, dsn)})
	runFlow(t, s, formFlow(t, loopbackRedirect(t), nil))
}

// freshDatabase creates a database of its own for the test (dropped at the
// end) on the server of dsn, and returns its connection string.
func freshDatabase(t *testing.T, dsn string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to AUTHSERVER_TEST_POSTGRES: %v", err)
	}
	defer conn.Close(context.Background())
	name := "mcpauth_e2e_" + strings.ToLower(rand.Text()[:12])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Logf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("AUTHSERVER_TEST_POSTGRES: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}
