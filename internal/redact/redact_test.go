package redact

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestDSN(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"hides the password in user info", "postgres://u:hunter2@db:5432/x?sslmode=disable", "postgres://u:redacted@db:5432/x?sslmode=disable"},
		{"hides a password parameter in place", "postgresql://db/x?sslmode=disable&password=hunter2&a=b", "postgresql://db/x?sslmode=disable&password=redacted&a=b"},
		{"hides a password with an unescaped slash", "postgres://u:se@cr/et@db/x", "postgres://u:redacted@db/x"},
		{"hides a password with an unescaped hash", "postgres://u:a#b@db/x", "postgres://u:redacted@db/x"},
		{"hides a password in a key=value string", "host=db password='a b' user=u", "host=db password=redacted user=u"},
		{"hides the password of a mistyped scheme", "postgress://u:hunter2@db/x", "postgress://u:redacted@db/x"},
		{"keeps a URL without a password", "postgres://u@db/x", "postgres://u@db/x"},
		{"keeps sqlite paths", "sqlite:./a.db", "sqlite:./a.db"},
		{"keeps memory", "memory", "memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DSN(tc.in); got != tc.want {
				t.Fatalf("DSN(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

var errSentinel = errors.New("sentinel")

func TestErrorHidesEveryFormOfThePassword(t *testing.T) {
	dsn := "postgres://u:p%40ss%2Fw0rd@db/x?password=other-secret"
	err := fmt.Errorf("wrapped: %w: cannot use p%%40ss%%2Fw0rd or p@ss/w0rd or other-secret", errSentinel)
	got := Error(err, dsn)
	for _, s := range []string{"p%40ss%2Fw0rd", "p@ss/w0rd", "other-secret"} {
		if strings.Contains(got.Error(), s) {
			t.Fatalf("%q still holds %q", got, s)
		}
	}
	if !errors.Is(got, errSentinel) {
		t.Fatal("errors.Is lost the sentinel")
	}
	if errors.Unwrap(got) != nil {
		t.Fatal("the unredacted error is reachable with errors.Unwrap")
	}
	plain := errors.New("connection refused")
	if Error(plain, dsn) != plain {
		t.Fatal("an error without the password was rewrapped")
	}
	if Error(nil, dsn) != nil {
		t.Fatal("nil error became non-nil")
	}
}

// FuzzDSN: whatever the password holds, DSN and Error hide it.
func FuzzDSN(f *testing.F) {
	f.Add("u", "hunter2", "db:5432")
	f.Add("u", "se@cr/et", "db")
	f.Add("", "a#b?c", "[::1]:5432")
	f.Fuzz(func(t *testing.T, user, pw, host string) {
		if strings.ContainsAny(user, ":@") || strings.Contains(host, "@") || pw == "" {
			t.Skip()
		}
		dsn := "postgres://" + user + ":" + pw + "@" + host + "/db?sslmode=disable"
		want := "postgres://" + user + ":" + Mark + "@" + host + "/db?sslmode=disable"
		if got := DSN(dsn); got != want {
			t.Fatalf("DSN(%q) = %q, want %q", dsn, got, want)
		}
		err := Error(errors.New("cannot parse "+dsn), dsn)
		if strings.Contains(err.Error(), ":"+pw+"@") {
			t.Fatalf("Error kept the password: %q", err)
		}
	})
}
