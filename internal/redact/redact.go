// Package redact hides the password of a storage DSN (a postgres:// URL, its
// password= parameter, or a key=value connection string) in text meant for
// people: log lines, error messages, `authserver check-config` output.
//
// It copes with DSNs that do not parse as URLs (a password with an unescaped
// "/" or "#"), which is exactly when a library tends to echo the string back.
package redact

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
)

// Mark replaces every password.
const Mark = "redacted"

// passwordParam matches a password parameter in a URL query or a key=value
// connection string (libpq syntax: a value may be single-quoted).
var passwordParam = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]*)`)

// DSN returns dsn with its password, if any, replaced by Mark. A DSN without
// a password comes back unchanged.
func DSN(dsn string) string {
	out := dsn
	if scheme, rest, ok := strings.Cut(out, "://"); ok {
		// The user info ends at the last "@": a password may hold an
		// unescaped "@" or "/", which a URL parser would take for the host
		// or path.
		if at := strings.LastIndexByte(rest, '@'); at >= 0 {
			if c := strings.IndexByte(rest[:at], ':'); c >= 0 {
				out = scheme + "://" + rest[:c+1] + Mark + rest[at:]
			}
		}
	}
	return passwordParam.ReplaceAllString(out, "${1}"+Mark)
}

// Secrets returns the passwords dsn holds, as written and percent-decoded,
// longest first; nil when it holds none.
func Secrets(dsn string) []string {
	var raw []string
	if _, rest, ok := strings.Cut(dsn, "://"); ok {
		if at := strings.LastIndexByte(rest, '@'); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
				raw = append(raw, pw)
			}
		}
	}
	for _, m := range passwordParam.FindAllStringSubmatch(dsn, -1) {
		raw = append(raw, strings.Trim(m[2], "'"))
	}
	var out []string
	add := func(s string) {
		if s == "" || s == Mark {
			return
		}
		for _, o := range out {
			if o == s {
				return
			}
		}
		out = append(out, s)
	}
	for _, s := range raw {
		add(s)
		if d, err := url.PathUnescape(s); err == nil {
			add(d)
		}
		if d, err := url.QueryUnescape(s); err == nil {
			add(d)
		}
	}
	// Longest first, so that a password containing another is replaced whole.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && len(out[j]) > len(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Error returns err with every password of dsn in its message replaced by
// Mark. errors.Is still sees the errors err wraps; errors.Unwrap and
// errors.As do not, so no part of the chain can print the password. An error
// whose message holds no password is returned as it is.
func Error(err error, dsn string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, s := range Secrets(dsn) {
		msg = strings.ReplaceAll(msg, s, Mark)
	}
	if msg == err.Error() {
		return err
	}
	return &redacted{msg: msg, err: err}
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }

// Is reports whether the original error matches target.
func (e *redacted) Is(target error) bool { return errors.Is(e.err, target) }
