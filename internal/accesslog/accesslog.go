// Package accesslog writes one structured log line per HTTP request and
// feeds the request metrics.
//
// A line holds the method, the path (never the query), the status, the
// duration, the client_id when the request names one (form, query or the
// user name of HTTP Basic authentication, RFC 6749 §2.3.1) and the OAuth
// error code of an error answer (the "error" member of a JSON body,
// RFC 6749 §5.2; the error parameter of a redirect, §4.1.2.1; the error of a
// WWW-Authenticate challenge, RFC 6750 §3). It never holds a token, code,
// secret, password, the query, the body or a Location header.
package accesslog

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/internal/metrics"
)

// Config configures Wrap.
type Config struct {
	// Logger receives the lines (message "access", level info). Nil: no
	// lines, metrics only.
	Logger *slog.Logger
	// Metrics counts requests and error codes. Nil counts nothing.
	Metrics *metrics.Metrics
	// Classify names the endpoint of a request for the metrics. Nil:
	// every request is metrics.Other.
	Classify func(path string) metrics.Endpoint
	// ClientAddr returns the client's address for the line. Nil: the host
	// of the TCP peer.
	ClientAddr func(r *http.Request) string
	// Observe, when set, is told of every answered request: its status
	// and OAuth error code ("" when none), as the line would say.
	Observe func(r *http.Request, status int, oauthError string)
}

type entryKey struct{}

type entry struct{ clientID string }

// SetClientID records the client a handler authenticated (say, from a
// verified access token) for the request's access line.
func SetClientID(ctx context.Context, id string) {
	if e, ok := ctx.Value(entryKey{}).(*entry); ok {
		e.clientID = id
	}
}

// Wrap returns h with access logging and request metrics.
func Wrap(h http.Handler, cfg Config) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		e := &entry{}
		rw := &recorder{ResponseWriter: w}
		r = r.WithContext(context.WithValue(r.Context(), entryKey{}, e))
		defer func() {
			// A handler that panics with http.ErrAbortHandler still gets
			// its line; the panic goes on.
			status := rw.status
			if status == 0 {
				status = http.StatusOK
			}
			d := time.Since(start)
			code := rw.errorCode()
			ep := metrics.Other
			if cfg.Classify != nil {
				ep = cfg.Classify(r.URL.Path)
			}
			cfg.Metrics.Request(ep, status, d)
			cfg.Metrics.OAuthError(ep, code)
			if cfg.Observe != nil {
				cfg.Observe(r, status, code)
			}
			if cfg.Logger == nil || !cfg.Logger.Enabled(r.Context(), slog.LevelInfo) {
				return
			}
			attrs := []slog.Attr{
				slog.String("method", r.Method),
				slog.String("path", clip(r.URL.Path, 256)),
				slog.Int("status", status),
				slog.Duration("duration", d),
				slog.String("addr", addr(r, cfg.ClientAddr)),
			}
			if id := clientID(r, e); id != "" {
				attrs = append(attrs, slog.String("client_id", id))
			}
			if code != "" {
				attrs = append(attrs, slog.String("error", code))
			}
			cfg.Logger.LogAttrs(r.Context(), slog.LevelInfo, "access", attrs...)
		}()
		h.ServeHTTP(rw, r)
	})
}

func addr(r *http.Request, f func(*http.Request) string) string {
	if f != nil {
		return f(r)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// clientID is the client a request names: set by the handler, else the
// client_id parameter of the form or query the handler parsed (or of the
// query), else the user name of HTTP Basic authentication. The password
// part of Basic authentication is never read.
func clientID(r *http.Request, e *entry) string {
	id := e.clientID
	if id == "" && r.Form != nil {
		id = r.Form.Get("client_id")
	}
	if id == "" && strings.Contains(r.URL.RawQuery, "client_id=") {
		id = r.URL.Query().Get("client_id")
	}
	if id == "" {
		if user, _, ok := r.BasicAuth(); ok {
			if u, err := url.QueryUnescape(user); err == nil {
				id = u
			}
		}
	}
	return clip(id, 200)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// recorder keeps the status and, for error answers in JSON, the start of
// the body, where the error code is.
type recorder struct {
	http.ResponseWriter
	status int
	head   []byte // first bytes of a JSON error body
	json   bool
}

const headMax = 256

func (rw *recorder) WriteHeader(status int) {
	// An informational answer (103 Early Hints, RFC 9110 §15.2) comes
	// before the final one; only the final one is the request's status.
	if rw.status == 0 && status >= 200 {
		rw.status = status
		rw.json = status >= 400 && strings.Contains(rw.Header().Get("Content-Type"), "json")
	}
	rw.ResponseWriter.WriteHeader(status)
}

func (rw *recorder) Write(b []byte) (int, error) {
	if rw.status == 0 {
		rw.WriteHeader(http.StatusOK)
	}
	if rw.json && len(rw.head) < headMax {
		n := min(len(b), headMax-len(rw.head))
		rw.head = append(rw.head, b[:n]...)
	}
	return rw.ResponseWriter.Write(b)
}

// Flush passes http.Flusher through.
func (rw *recorder) Flush() {
	if f, ok := rw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (rw *recorder) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

// errorCode is the OAuth error code of the answer, or "".
func (rw *recorder) errorCode() string {
	switch {
	case rw.json:
		return validCode(jsonErrorMember(rw.head))
	case rw.status >= 300 && rw.status < 400:
		loc := rw.Header().Get("Location")
		if !strings.Contains(loc, "error=") {
			return ""
		}
		u, err := url.Parse(loc)
		if err != nil {
			return ""
		}
		if c := u.Query().Get("error"); c != "" {
			return validCode(c)
		}
		q, _ := url.ParseQuery(u.Fragment)
		return validCode(q.Get("error"))
	case rw.status == http.StatusUnauthorized || rw.status == http.StatusForbidden:
		return validCode(challengeError(rw.Header().Get("WWW-Authenticate")))
	}
	return ""
}

// jsonErrorMember finds `"error":"..."` in the start of a JSON object.
func jsonErrorMember(b []byte) string {
	s := string(b)
	for {
		i := strings.Index(s, `"error"`)
		if i < 0 {
			return ""
		}
		s = strings.TrimLeft(s[i+len(`"error"`):], " \t\r\n")
		if !strings.HasPrefix(s, ":") {
			continue
		}
		s = strings.TrimLeft(s[1:], " \t\r\n")
		if !strings.HasPrefix(s, `"`) {
			return ""
		}
		s = s[1:]
		if j := strings.IndexByte(s, '"'); j >= 0 {
			return s[:j]
		}
		return ""
	}
}

// challengeError is the error auth-param of an RFC 6750 §3 challenge.
func challengeError(h string) string {
	i := strings.Index(h, `error="`)
	if i < 0 || (i > 0 && h[i-1] != ' ' && h[i-1] != ',') {
		return ""
	}
	s := h[i+len(`error="`):]
	if j := strings.IndexByte(s, '"'); j >= 0 {
		return s[:j]
	}
	return ""
}

// validCode keeps error codes made of the characters RFC 6749 §5.2 allows
// (and no space), at most 64 bytes; anything else is dropped.
func validCode(c string) string {
	if len(c) > 64 {
		return ""
	}
	for i := 0; i < len(c); i++ {
		if c[i] <= 0x20 || c[i] == '"' || c[i] == '\\' || c[i] > 0x7e {
			return ""
		}
	}
	return c
}
