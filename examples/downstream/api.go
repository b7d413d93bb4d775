package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mcpauth/mcpauth/metadata"
	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// ScopeReportsRead is the scope /api/report needs.
const ScopeReportsRead = "reports:read"

type config struct {
	listen   string
	resource string
	issuer   string
	// issuerInternal is the origin at which this process reaches the AS
	// when it differs from the issuer's (a container network); "" for the
	// same.
	issuerInternal string
	// httpClient reaches the AS (tests); nil means rsmiddleware's default.
	httpClient *http.Client
}

// asClient is cfg.httpClient, sending requests for the issuer's origin to
// --issuer-internal when that is set (rsmiddleware.RewriteOrigins).
func asClient(cfg config) (*http.Client, error) {
	if cfg.issuerInternal == "" {
		return cfg.httpClient, nil
	}
	u, err := url.Parse(cfg.issuer)
	if err != nil || u.Host == "" {
		return nil, errors.New("--issuer-internal needs --issuer")
	}
	var base http.RoundTripper
	if cfg.httpClient != nil {
		base = cfg.httpClient.Transport
	}
	rt, err := rsmiddleware.RewriteOrigins(base, map[string]string{u.Scheme + "://" + u.Host: cfg.issuerInternal})
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: rt, Timeout: 10 * time.Second}, nil
}

// Seen is what the API recorded about one request that reached its protected
// paths. It holds no token, only a fingerprint of it.
type Seen struct {
	Time     time.Time           `json:"time"`
	Path     string              `json:"path"`
	Status   int                 `json:"status"`
	TokenSHA string              `json:"token_sha256,omitempty"` // hex SHA-256 of the bearer token
	Subject  string              `json:"sub,omitempty"`
	Audience []string            `json:"aud,omitempty"`
	ClientID string              `json:"client_id,omitempty"`
	Scopes   []string            `json:"scopes,omitempty"`
	TokenID  string              `json:"jti,omitempty"`
	Actor    *rsmiddleware.Actor `json:"act,omitempty"`
}

// recorder keeps the last maxSeen records.
type recorder struct {
	mu   sync.Mutex
	seen []Seen
}

const maxSeen = 1000

func (r *recorder) add(s Seen) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) == maxSeen {
		r.seen = r.seen[1:]
	}
	r.seen = append(r.seen, s)
}

func (r *recorder) all() []Seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Seen(nil), r.seen...)
}

// newAPI builds the API's handler.
func newAPI(cfg config, logger *slog.Logger) (http.Handler, error) {
	resource, err := metadata.CanonicalResource(cfg.resource)
	if err != nil {
		return nil, errors.New("--resource: " + err.Error())
	}
	u, err := url.Parse(resource)
	if err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(u.Path, "/")
	if base == "" {
		return nil, errors.New("--resource needs a path (e.g. http://127.0.0.1:8081/api)")
	}
	client, err := asClient(cfg)
	if err != nil {
		return nil, err
	}
	verifier, err := rsmiddleware.NewVerifier(rsmiddleware.Config{
		Issuer:     cfg.issuer,
		Resource:   resource,
		HTTPClient: client,
		Logger:     logger,
	})
	if err != nil {
		return nil, err
	}
	prmURL, err := rsmiddleware.ResourceMetadataURL(resource)
	if err != nil {
		return nil, err
	}
	guard, err := rsmiddleware.NewMiddleware(rsmiddleware.MiddlewareConfig{
		Verifier:            verifier,
		ResourceMetadataURL: prmURL,
		Scopes:              rsmiddleware.Scopes{Base: []string{ScopeReportsRead}},
		Logger:              logger,
	})
	if err != nil {
		return nil, err
	}
	prm, err := rsmiddleware.NewProtectedResourceMetadata(resource, []string{cfg.issuer}, []string{ScopeReportsRead})
	if err != nil {
		return nil, err
	}

	rec := &recorder{}
	api := http.NewServeMux()
	api.HandleFunc("GET "+base+"/report", func(w http.ResponseWriter, r *http.Request) {
		p, ok := rsmiddleware.PrincipalFromContext(r.Context())
		if !ok { // unreachable behind the guard; never serve unauthenticated
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		report := map[string]any{
			"report":       "quarterly figures",
			"for":          p.Subject,
			"generated_at": time.Now().UTC().Format(time.RFC3339),
			"items":        []map[string]any{{"name": "requests", "value": 42}, {"name": "errors", "value": 0}},
		}
		if p.Actor != nil {
			report["via"] = p.Actor.Subject
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(report)
	})

	mux := http.NewServeMux()
	if err := rsmiddleware.MountPRM(mux, prm, false); err != nil {
		return nil, err
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /debug/seen", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(rec.all())
	})
	protected := record(rec, logger, guard.Wrap(capture(api)))
	mux.Handle(base, protected)
	mux.Handle(base+"/", protected)
	return mux, nil
}

// record wraps the guarded API: it notes, for every request, a fingerprint of
// the bearer token (taken before the guard strips the header), the status the
// guard or the API answered, and the verified principal.
func record(rec *recorder, logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := Seen{Time: time.Now().UTC(), Path: r.URL.Path}
		if tok, err := rsmiddleware.ParseAuthorization(r.Header.Get("Authorization")); err == nil {
			sum := sha256.Sum256([]byte(tok))
			s.TokenSHA = hex.EncodeToString(sum[:])
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		var principal *rsmiddleware.Principal
		next.ServeHTTP(sw, r.WithContext(withPrincipalSink(r.Context(), &principal)))
		s.Status = sw.status
		if p := principal; p != nil {
			s.Subject, s.Audience, s.ClientID, s.Scopes, s.TokenID, s.Actor = p.Subject, p.Audience, p.ClientID, p.Scopes, p.TokenID, p.Actor
		}
		rec.add(s)
		attrs := []any{"path", s.Path, "status", s.Status, "sub", s.Subject, "aud", s.Audience, "client_id", s.ClientID, "jti", s.TokenID}
		if s.Actor != nil {
			attrs = append(attrs, "act", s.Actor.Subject)
		}
		logger.Info("request", attrs...)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

type sinkKey struct{}

// withPrincipalSink lets the handler inside the guard hand the verified
// principal back out to record.
func withPrincipalSink(ctx context.Context, dst **rsmiddleware.Principal) context.Context {
	return context.WithValue(ctx, sinkKey{}, dst)
}

// capture runs inside the guard and fills the sink.
func capture(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dst, ok := r.Context().Value(sinkKey{}).(**rsmiddleware.Principal); ok {
			if p, ok := rsmiddleware.PrincipalFromContext(r.Context()); ok {
				*dst = p
			}
		}
		next.ServeHTTP(w, r)
	})
}
