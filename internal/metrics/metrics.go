// Package metrics keeps the authorization server's Prometheus metrics
// (names prefixed mcpauth_) and serves them in the Prometheus text format.
//
// Counting is cheap on the request path: every label value is known in
// advance, so each observation is an array index and an atomic add on a
// pre-resolved child, never a label lookup or an allocation.
//
// Most counters are fed by the audit events the server already writes
// (AuditHandler wraps the server's slog handler): token.issued counts tokens
// by grant type, refresh.reused replays, client.registered registrations,
// login.failed and login.throttled the login page's refusals; any log record
// that carries a storage.ErrUnavailable error counts a storage error. So the
// audit trail and the metrics cannot disagree.
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpauth/mcpauth/storage"
)

// Endpoint names one endpoint, the value of the "endpoint" label.
type Endpoint uint8

// The endpoints requests are counted under.
const (
	Other Endpoint = iota
	Authorize
	Token
	Introspect
	Revoke
	JWKS
	Metadata
	Register
	RegisterClient // RFC 7592 /register/{client_id}
	Consents
	Logout
	UI
	Health // /healthz, /livez, /readyz
	Admin
	MetricsEndpoint
	StatusList // the Token Status List and its aggregation
	Approvals  // the approvals endpoint of held tool calls
	Approve    // the approval pages, /approve/{id}
	numEndpoints
)

var endpointNames = [numEndpoints]string{
	"other", "authorize", "token", "introspect", "revoke", "jwks", "metadata",
	"register", "register_client", "consents", "logout", "ui", "health", "admin", "metrics",
	"status_list", "approvals", "approve",
}

func (e Endpoint) String() string {
	if e >= numEndpoints {
		return "other"
	}
	return endpointNames[e]
}

// errorCodes are the OAuth error words the server answers with (RFC 6749
// §4.1.2.1, §5.2, RFC 6750 §3.1, RFC 7591 §3.2.2, RFC 8707 §2, RFC 8693
// §2.2.2); anything else counts as "other".
var errorCodes = []string{
	"other",
	"invalid_request", "invalid_client", "invalid_grant", "unauthorized_client",
	"unsupported_grant_type", "invalid_scope", "invalid_target", "access_denied",
	"unsupported_response_type", "server_error", "temporarily_unavailable",
	"unsupported_token_type", "invalid_token", "insufficient_scope",
	"invalid_redirect_uri", "invalid_client_metadata", "invalid_software_statement",
	"unapproved_software_statement", "login_required", "consent_required",
	"interaction_required", "invalid_request_uri", "invalid_request_object",
}

// grantTypes label tokens issued; anything else counts as "other".
var grantTypes = []string{
	"other", "authorization_code", "refresh_token", "client_credentials",
	"urn:ietf:params:oauth:grant-type:token-exchange",
}

// Metrics is one server's set of metrics. Create it with New; a nil
// *Metrics is valid and counts nothing.
type Metrics struct {
	reg *prometheus.Registry

	requestsVec *prometheus.CounterVec
	requests    [numEndpoints][]atomic.Pointer[prometheus.Counter] // by status-100
	requestsMu  sync.Mutex
	durations   [numEndpoints]prometheus.Observer
	errs        [numEndpoints][]prometheus.Counter // by index in errorCodes
	errIndex    map[string]int
	tokens      []prometheus.Counter // by index in grantTypes
	grantIndex  map[string]int

	refreshReplays, codeReplays, registrations, registrationsLimited prometheus.Counter
	loginFailures, loginThrottles, clientAuthFailures, revocations   prometheus.Counter
	cimdOK, cimdFailed, cimdHits, storageErrors, adminActions        prometheus.Counter
	grantRevocations                                                 prometheus.Counter
	auditDropped                                                     [2]prometheus.Counter // full, failed
}

// New registers every metric, plus the Go runtime and process collectors,
// on a registry of its own.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), errIndex: map[string]int{}, grantIndex: map[string]int{}}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.requestsVec = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpauth_http_requests_total", Help: "HTTP requests by endpoint and status code.",
	}, []string{"endpoint", "code"})
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "mcpauth_http_request_duration_seconds", Help: "HTTP request latency by endpoint.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"endpoint"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpauth_oauth_errors_total", Help: "OAuth error responses by endpoint and error code (RFC 6749 §5.2, RFC 6750 §3.1).",
	}, []string{"endpoint", "error"})
	tokens := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpauth_tokens_issued_total", Help: "Access tokens issued by grant type.",
	}, []string{"grant_type"})
	cimd := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpauth_cimd_fetches_total", Help: "Client ID Metadata Document fetches by result.",
	}, []string{"result"})
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		m.reg.MustRegister(c)
		return c
	}
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpauth_audit_events_dropped_total", Help: "Audit events not kept in storage for the console, by reason: full (the buffer was full) or failed (storage refused them). The log still has them.",
	}, []string{"reason"})
	m.reg.MustRegister(m.requestsVec, dur, errs, tokens, cimd, dropped)
	m.auditDropped = [2]prometheus.Counter{dropped.WithLabelValues("full"), dropped.WithLabelValues("failed")}
	for e := range numEndpoints {
		m.requests[e] = make([]atomic.Pointer[prometheus.Counter], 500)
		m.durations[e] = dur.WithLabelValues(e.String())
		m.errs[e] = make([]prometheus.Counter, len(errorCodes))
		for i, code := range errorCodes {
			m.errs[e][i] = errs.WithLabelValues(e.String(), code)
		}
	}
	for i, code := range errorCodes {
		m.errIndex[code] = i
	}
	for i, gt := range grantTypes {
		m.grantIndex[gt] = i
		m.tokens = append(m.tokens, tokens.WithLabelValues(gt))
	}
	m.cimdOK, m.cimdFailed = cimd.WithLabelValues("ok"), cimd.WithLabelValues("error")
	m.cimdHits = counter("mcpauth_cimd_cache_hits_total", "Client ID Metadata Documents answered from the cache.")
	m.refreshReplays = counter("mcpauth_refresh_replays_total", "Rotated refresh tokens presented again, outside the grace window (the grant is revoked).")
	m.codeReplays = counter("mcpauth_code_replays_total", "Authorization codes presented again (what they issued is revoked).")
	m.registrations = counter("mcpauth_registrations_total", "Clients registered (RFC 7591).")
	m.registrationsLimited = counter("mcpauth_registrations_limited_total", "Registrations refused by the rate limit.")
	m.loginFailures = counter("mcpauth_login_failures_total", "Failed logins (wrong username or password).")
	m.loginThrottles = counter("mcpauth_login_throttled_total", "Login attempts refused by the throttle.")
	m.clientAuthFailures = counter("mcpauth_client_auth_failures_total", "Failed client authentications (invalid_client).")
	m.revocations = counter("mcpauth_revocations_total", "Tokens revoked at the revocation endpoint (RFC 7009).")
	m.storageErrors = counter("mcpauth_storage_errors_total", "Storage failures (backend unreachable) reported by the server.")
	m.grantRevocations = counter("mcpauth_grant_revocations_total", "Revocations of grants as a whole (a consent revoked, an admin's grants revoke).")
	m.adminActions = counter("mcpauth_admin_actions_total", "Changes made through the admin API.")
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Registry is the registry the metrics live in.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Request counts one answered request and its latency.
func (m *Metrics) Request(e Endpoint, status int, d time.Duration) {
	if m == nil {
		return
	}
	if e >= numEndpoints {
		e = Other
	}
	m.durations[e].Observe(d.Seconds())
	if status < 100 || status > 599 {
		status = 599
	}
	slot := &m.requests[e][status-100]
	c := slot.Load()
	if c == nil {
		m.requestsMu.Lock()
		if c = slot.Load(); c == nil {
			cc := m.requestsVec.WithLabelValues(e.String(), statusText(status))
			c = &cc
			slot.Store(c)
		}
		m.requestsMu.Unlock()
	}
	(*c).Inc()
}

func statusText(s int) string {
	return string([]byte{byte('0' + s/100), byte('0' + s/10%10), byte('0' + s%10)})
}

// OAuthError counts one error response with the given error code.
func (m *Metrics) OAuthError(e Endpoint, code string) {
	if m == nil || code == "" {
		return
	}
	if e >= numEndpoints {
		e = Other
	}
	m.errs[e][m.errIndex[code]].Inc() // unknown codes index 0, "other"
}

// CIMDFetched counts one Client ID Metadata Document fetch; err is its
// outcome.
func (m *Metrics) CIMDFetched(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.cimdFailed.Inc()
		return
	}
	m.cimdOK.Inc()
}

// CIMDCacheHit counts one document answered from the cache.
func (m *Metrics) CIMDCacheHit() {
	if m != nil {
		m.cimdHits.Inc()
	}
}

// AuditDropped counts n audit events that were not kept in storage:
// because the buffer in front of it was full (failed false), or because
// storage refused them (failed true).
func (m *Metrics) AuditDropped(n int, failed bool) {
	if m == nil || n <= 0 {
		return
	}
	m.auditDropped[btoi(failed)].Add(float64(n))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// StorageError counts one storage failure not otherwise logged.
func (m *Metrics) StorageError() {
	if m != nil {
		m.storageErrors.Inc()
	}
}

// AuditHandler returns a slog.Handler that passes every record to next (as
// far as next is enabled for it) and counts the audit events and storage
// errors among them, whatever level next logs at.
func (m *Metrics) AuditHandler(next slog.Handler) slog.Handler {
	if m == nil {
		return next
	}
	return &auditHandler{m: m, next: next}
}

type auditHandler struct {
	m    *Metrics
	next slog.Handler
}

func (h *auditHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.next.Enabled(ctx, l)
}

func (h *auditHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "audit" {
		h.countAudit(r)
	} else if r.Level >= slog.LevelWarn {
		h.countStorageError(r)
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h *auditHandler) countAudit(r slog.Record) {
	var event, grant string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "event":
			event = a.Value.String()
		case "grant_type":
			grant = a.Value.String()
		}
		return event == "" || (event == "token.issued" && grant == "")
	})
	m := h.m
	switch event {
	case "token.issued":
		m.tokens[m.grantIndex[grant]].Inc()
	case "refresh.reused":
		m.refreshReplays.Inc()
	case "code.replayed":
		m.codeReplays.Inc()
	case "client.registered":
		m.registrations.Inc()
	case "client.registration_limited":
		m.registrationsLimited.Inc()
	case "login.failed":
		m.loginFailures.Inc()
	case "login.throttled":
		m.loginThrottles.Inc()
	case "client.auth_failed":
		m.clientAuthFailures.Inc()
	case "token.revoked":
		m.revocations.Inc()
	case "grants.revoked":
		m.grantRevocations.Inc()
	default:
		if len(event) > 6 && event[:6] == "admin." {
			m.adminActions.Inc()
		}
	}
}

func (h *auditHandler) countStorageError(r slog.Record) {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Value.Kind() == slog.KindAny && errors.Is(err, storage.ErrUnavailable) {
			found = true
		}
		return !found
	})
	if found {
		h.m.storageErrors.Inc()
	}
}

func (h *auditHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &auditHandler{m: h.m, next: h.next.WithAttrs(as)}
}

func (h *auditHandler) WithGroup(name string) slog.Handler {
	return &auditHandler{m: h.m, next: h.next.WithGroup(name)}
}
