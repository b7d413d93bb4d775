package config

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/internal/envvar"
)

// A storage value with a password is never echoed whole, in whichever way it
// is wrong, and whether it comes from the file or AUTHSERVER_STORAGE.
func TestStorageMistakesNeverEchoThePassword(t *testing.T) {
	secret := "secret: " + strings.Repeat("k9Zq", 8) + "\n"
	for _, tc := range []struct{ name, storage, wantErr string }{
		{"a mistyped scheme", "postgress://u:hunter2-pw@db/x", "config: storage: must be memory, sqlite:PATH or postgres://..., got \"postgress://u:redacted@db/x\""},
		{"a password with an unescaped slash", "postgres://u:Se@cr/et-pw@db/x", "config: storage: not a valid postgres URL: postgres://u:redacted@db/x"},
		{"a bad percent escape", "postgres://u:hunter2-pw%zz@db/x", "config: storage: not a valid postgres URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(base, "storage: memory", "storage: \""+tc.storage+"\"", 1) + secret
			_, errFile := Parse([]byte(src), envOf(nil))
			_, errEnv := Parse([]byte(base+secret), envOf(map[string]string{"AUTHSERVER_STORAGE": tc.storage}))
			for _, err := range []error{errFile, errEnv} {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want prefix %q", err, tc.wantErr)
				}
				for _, part := range []string{"hunter2", "cr/et", "Se@"} {
					if strings.Contains(err.Error(), part) {
						t.Fatalf("error holds the password (%q): %v", part, err)
					}
				}
			}
		})
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "v")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ${VAR} and the AUTHSERVER_* overrides read VAR_FILE when VAR is not set,
// without its trailing newline.
func TestVariablesFromFiles(t *testing.T) {
	sec := strings.Repeat("Xy7-", 10)
	t.Run("a reference reads NAME_FILE", func(t *testing.T) {
		src := strings.Replace(base, "0123456789abcdef0123", "${CI_BOT_SECRET}", 1)
		c, err := Parse([]byte(src), envOf(map[string]string{"CI_BOT_SECRET_FILE": writeFile(t, "from-a-file-0123456789\n")}))
		if err != nil {
			t.Fatal(err)
		}
		if c.Clients[0].Secret != "from-a-file-0123456789" {
			t.Fatalf("secret %q", c.Clients[0].Secret)
		}
	})
	t.Run("AUTHSERVER_SECRET_FILE sets the secret, CRLF trimmed", func(t *testing.T) {
		c, err := Parse([]byte(base), envOf(map[string]string{"AUTHSERVER_SECRET_FILE": writeFile(t, sec+"\r\n")}))
		if err != nil {
			t.Fatal(err)
		}
		if c.Secret != sec {
			t.Fatalf("secret %q", c.Secret)
		}
	})
	t.Run("AUTHSERVER_STORAGE_FILE sets the storage", func(t *testing.T) {
		c, err := Parse([]byte(base), envOf(map[string]string{"AUTHSERVER_STORAGE_FILE": writeFile(t, "sqlite:/tmp/from-file.db\n")}))
		if err != nil || c.Storage != "sqlite:/tmp/from-file.db" {
			t.Fatalf("storage %v %v", c, err)
		}
	})
	t.Run("only one trailing newline is removed", func(t *testing.T) {
		v, ok, err := envvar.Get(envOf(map[string]string{"X_FILE": writeFile(t, "a b \n\n")}), "X")
		if err != nil || !ok || v != "a b \n" {
			t.Fatalf("%q %v %v", v, ok, err)
		}
	})
	for _, tc := range []struct {
		name    string
		env     func(t *testing.T) map[string]string
		wantErr string
	}{
		{"refuses both forms at once", func(t *testing.T) map[string]string {
			return map[string]string{"AUTHSERVER_SECRET": sec, "AUTHSERVER_SECRET_FILE": writeFile(t, sec)}
		}, "config: both AUTHSERVER_SECRET and AUTHSERVER_SECRET_FILE are set"},
		{"names a file that cannot be read", func(t *testing.T) map[string]string {
			return map[string]string{"AUTHSERVER_SECRET_FILE": "/nonexistent/secret"}
		}, "config: AUTHSERVER_SECRET_FILE: open /nonexistent/secret"},
		{"refuses an empty file name", func(t *testing.T) map[string]string {
			return map[string]string{"AUTHSERVER_SECRET_FILE": ""}
		}, "config: AUTHSERVER_SECRET_FILE is set but empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(base), envOf(tc.env(t)))
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want prefix %q", err, tc.wantErr)
			}
		})
	}
	t.Run("a reference names the field when its file is missing", func(t *testing.T) {
		src := strings.Replace(base, "0123456789abcdef0123", "${CI_BOT_SECRET}", 1)
		_, err := Parse([]byte(src), envOf(map[string]string{"CI_BOT_SECRET_FILE": "/nonexistent/s"}))
		if err == nil || !strings.HasPrefix(err.Error(), "config: clients[0].secret: CI_BOT_SECRET_FILE: open /nonexistent/s") {
			t.Fatalf("got %v", err)
		}
	})
}

// With no file, the development defaults serve only on loopback unless
// AUTHSERVER_DEV=1 asks for them elsewhere.
func TestDevDefaultsOffLoopbackNeedTheOptIn(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:9000", ":9000", "[::]:9000", "10.0.0.5:9000"} {
		_, err := Load("", envOf(map[string]string{"AUTHSERVER_LISTEN": listen}))
		if err == nil || !strings.Contains(err.Error(), "no configuration file, and listen is "+listen) ||
			!strings.Contains(err.Error(), "AUTHSERVER_CONFIG") || !strings.Contains(err.Error(), "AUTHSERVER_DEV=1") {
			t.Fatalf("listen %s: %v", listen, err)
		}
		c, err := Load("", envOf(map[string]string{"AUTHSERVER_LISTEN": listen, "AUTHSERVER_DEV": "1"}))
		if err != nil || c.Listen != listen || c.FromFile {
			t.Fatalf("listen %s with AUTHSERVER_DEV=1: %v", listen, err)
		}
	}
	for _, listen := range []string{"127.0.0.1:9000", "localhost:9000", "[::1]:9000"} {
		if _, err := Load("", envOf(map[string]string{"AUTHSERVER_LISTEN": listen})); err != nil {
			t.Fatalf("listen %s: %v", listen, err)
		}
	}
	// A file is never refused for its listen address.
	if _, err := Parse([]byte(strings.Replace(base, "listen: 127.0.0.1:9000", "listen: 0.0.0.0:9000", 1)), envOf(nil)); err != nil {
		t.Fatal(err)
	}
}

func TestRateLimitPerMinuteZeroTurnsTheLimitOff(t *testing.T) {
	c, err := Parse([]byte(base+"registration:\n  rate_limit:\n    per_minute: 0\n"), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Registration.RateLimit.PerMinute != 0 {
		t.Fatalf("rate limit %+v, want off", c.Registration.RateLimit)
	}
	c, err = Parse([]byte(base), envOf(nil))
	if err != nil || c.Registration.RateLimit != (RateLimit{PerMinute: 20, Burst: 10}) {
		t.Fatalf("default rate limit %+v %v", c.Registration.RateLimit, err)
	}
}

func warningPaths(c *Config) string {
	var p []string
	for _, w := range c.Warnings() {
		p = append(p, w.Path)
	}
	return strings.Join(p, " ")
}

func TestWarnings(t *testing.T) {
	weakBcrypt := "$2b$04$abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0"
	weakArgon := "$argon2id$v=19$m=4096,t=1,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA"
	for _, tc := range []struct {
		name, src, want, msg string
	}{
		{"none for the example", base, "", ""},
		{"a secret of one repeated byte", base + "secret: " + strings.Repeat("a", 32) + "\n", "secret", "only 1 distinct bytes"},
		{"a secret of few distinct bytes", base + "secret: " + strings.Repeat("abcdeab", 6) + "\n", "secret", "only 5 distinct bytes"},
		{"a secret repeating a pattern", base + "secret: " + strings.Repeat("0123456789abcdef", 3) + "\n", "secret", "a 16-byte pattern repeated"},
		{"a plain http issuer off loopback", strings.Replace(base, "https://auth.example.com", "http://auth.example.com", 1), "issuer", "plain http on a non-loopback host"},
		{"a bcrypt cost below 10", strings.Replace(base, "$2b$10$", "$2b$04$", 1), "users[0].password_hash", "weak password hash for \"alice\""},
		{"allowed_domains for Entra ID, which sends no email_verified", base + "upstreams:\n  - id: entra\n    issuer: https://login.microsoftonline.com/00000000-0000-0000-0000-000000000000/v2.0\n    client_id: c\n    client_secret: s\n    allowed_domains: [acme.example]\n",
			"upstreams[0].allowed_domains", "admits nobody"},
		{"Entra ID without allowed_domains", base + "upstreams:\n  - id: entra\n    issuer: https://login.microsoftonline.com/00000000-0000-0000-0000-000000000000/v2.0\n    client_id: c\n    client_secret: s\n", "", ""},
		{"Google without a rule", base + "upstreams:\n  - id: google\n    issuer: https://accounts.google.com\n    client_id: c\n    client_secret: s\n", "upstreams[0].claim_scopes", "every Google account"},
		{"Google with allowed_domains only", base + "upstreams:\n  - id: google\n    issuer: https://accounts.google.com\n    client_id: c\n    client_secret: s\n    allowed_domains: [acme.example]\n", "upstreams[0].claim_scopes", "a personal Google account"},
		{"Google with an hd mapping", base + "upstreams:\n  - id: google\n    issuer: https://accounts.google.com\n    client_id: c\n    client_secret: s\n    allowed_domains: [acme.example]\n    claim_scopes:\n      hd:\n        acme.example: [mcp:tools]\n", "", ""},
		{"argon2id below the floor", strings.Replace(base, "\""+strings.Replace(weakBcrypt, "$04$", "$10$", 1)+"\"", "\""+weakArgon+"\"", 1), "users[0].password_hash", "below the OWASP minimum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.src), envOf(nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := warningPaths(c); got != tc.want {
				t.Fatalf("warnings %v, want %q", c.Warnings(), tc.want)
			}
			if tc.msg != "" && !strings.Contains(c.Warnings()[0].Msg, tc.msg) {
				t.Fatalf("warning %q lacks %q", c.Warnings()[0].Msg, tc.msg)
			}
		})
	}
	// Random key material of the usual forms never warns.
	for range 2000 {
		b := make([]byte, 32)
		rand.Read(b)
		for _, s := range []string{hex.EncodeToString(b[:16]), hex.EncodeToString(b), base64.StdEncoding.EncodeToString(b)} {
			if why := weakSecret(s); why != "" {
				t.Fatalf("random secret %q: %s", s, why)
			}
		}
	}
}
