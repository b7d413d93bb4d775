package main

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// MaxToolLabels is the most distinct values the "tool" label of
// mcpgateway_requests_total takes. Tool and prompt names come from
// clients and the upstream, so they are bounded: a name becomes a label
// value when scopes.tools or scopes.prompts names it, or when a call of it
// was answered by the upstream (result ok or tool_error), until this many
// are known; every other name counts as "other".
const MaxToolLabels = 100

// metricMethods are the values of the "method" label: the MCP methods a
// client sends (MCP 2025-06-18), "response" for a JSON-RPC response the
// client sends, rsmiddleware's batch and unknown; anything else is
// "other".
var metricMethods = []string{
	"other", "response", rsmiddleware.MethodBatch, rsmiddleware.MethodUnknown,
	"initialize", "ping", "tools/list", "tools/call", "prompts/list", "prompts/get",
	"resources/list", "resources/templates/list", "resources/read", "resources/subscribe",
	"resources/unsubscribe", "completion/complete", "logging/setLevel",
	"notifications/initialized", "notifications/cancelled", "notifications/progress",
	"notifications/roots/list_changed", "elicitation/create", "sampling/createMessage", "server/discover",
}

// metricResults are the values of the "result" label: the audit's results.
var metricResults = []string{
	"other", rsmiddleware.AuditOK, rsmiddleware.AuditToolError, rsmiddleware.AuditRPCError,
	rsmiddleware.AuditAccepted, rsmiddleware.AuditHTTPError, rsmiddleware.AuditNoResponse,
	rsmiddleware.AuditDenied, rsmiddleware.AuditUnauthorized, rsmiddleware.AuditUnavailable,
	rsmiddleware.AuditInvalid, rsmiddleware.AuditDeniedByPolicy, rsmiddleware.AuditRateLimited,
	rsmiddleware.AuditApprovalPending, rsmiddleware.AuditApprovalDenied, rsmiddleware.AuditApprovalUnavailable,
}

// Reasons of mcpgateway_token_refusals_total.
const (
	refusalMissing           = "missing_token"      // no Authorization header: 401
	refusalInvalid           = "invalid_token"      // a token (or DPoP proof) that did not verify: 401
	refusalMalformed         = "invalid_request"    // a malformed Authorization header: 400
	refusalInsufficientScope = "insufficient_scope" // 403, a step-up challenge
	refusalUnavailable       = "unavailable"        // the token could not be checked: 503
)

// Reasons of mcpgateway_upstream_errors_total.
const (
	upstreamUnreachable = "unreachable" // no answer: connection refused, reset, closed
	upstreamTimeout     = "timeout"     // limits.upstream_header_timeout or the dial timeout
	upstreamRefused     = "refused"     // 401/403 to the gateway's own credentials
	upstreamBadStatus   = "bad_status"  // a status outside 100-599, or 101
	upstreamToken       = "token"       // no token for the upstream could be obtained
)

// gwMetrics is the gateway's Prometheus metrics (prefix mcpgateway_),
// served on metrics.listen. The request counters, the latency of whole
// requests, policy denials and rate limits are fed by the audit events
// MCPFilter writes, so the audit and the metrics agree; every label value
// is bounded (metricMethods, metricResults, MaxToolLabels, the indexes
// of the configured rules).
type gwMetrics struct {
	reg *prometheus.Registry

	requests    *prometheus.CounterVec
	reqChildren sync.Map // requestKey -> prometheus.Counter
	durations   *prometheus.HistogramVec
	durChildren []atomic.Pointer[prometheus.Observer] // by method index
	methodIndex map[string]int
	resultIndex map[string]int

	toolsMu sync.RWMutex
	tools   map[string]bool // the names the tool label takes

	denials     *prometheus.CounterVec
	rateLimited *prometheus.CounterVec
	refusals    map[string]prometheus.Counter
	upErrors    map[string]prometheus.Counter
	upstream    prometheus.Observer
	exchangeOK  prometheus.Observer
	exchangeErr prometheus.Observer
}

type requestKey struct {
	method, result int
	tool           string
}

// newMetrics registers the gateway's metrics, with the Go runtime and
// process collectors, on a registry of their own. tools are the names
// the tool label knows from the start (the configured ones).
func newMetrics(tools []string) *gwMetrics {
	m := &gwMetrics{reg: prometheus.NewRegistry(), methodIndex: map[string]int{}, resultIndex: map[string]int{},
		tools: map[string]bool{}, refusals: map[string]prometheus.Counter{}, upErrors: map[string]prometheus.Counter{}}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	buckets := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgateway_requests_total", Help: "JSON-RPC messages by method, tool (tools/call, prompts/get) and audit result.",
	}, []string{"method", "tool", "result"})
	m.durations = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "mcpgateway_request_duration_seconds", Help: "Latency of JSON-RPC requests, from their arrival to their answer, by method.",
		Buckets: buckets,
	}, []string{"method"})
	upstream := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "mcpgateway_upstream_duration_seconds", Help: "Upstream hop: from sending a request to the MCP server to its answer's headers.",
		Buckets: buckets,
	})
	upErrors := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgateway_upstream_errors_total", Help: "Requests the upstream did not answer usefully, by reason (the client got 502 or 504).",
	}, []string{"reason"})
	refusals := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgateway_token_refusals_total", Help: "HTTP requests refused for their token (RFC 6750 §3.1), by reason.",
	}, []string{"reason"})
	m.denials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgateway_policy_denials_total", Help: "JSON-RPC requests denied by a policy rule, by the rule's index in policy.rules.",
	}, []string{"rule"})
	m.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgateway_rate_limited_total", Help: "JSON-RPC requests refused with 429, by the index of the limit in rate_limits.",
	}, []string{"rate_limit"})
	exchange := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "mcpgateway_exchange_duration_seconds", Help: "RFC 8693 token exchanges at the AS (upstream_auth.exchange), by result.",
		Buckets: buckets,
	}, []string{"result"})
	m.reg.MustRegister(m.requests, m.durations, upstream, upErrors, refusals, m.denials, m.rateLimited, exchange)
	for i, s := range metricMethods {
		m.methodIndex[s] = i
	}
	for i, s := range metricResults {
		m.resultIndex[s] = i
	}
	m.durChildren = make([]atomic.Pointer[prometheus.Observer], len(metricMethods))
	for _, r := range []string{refusalMissing, refusalInvalid, refusalMalformed, refusalInsufficientScope, refusalUnavailable} {
		m.refusals[r] = refusals.WithLabelValues(r)
	}
	for _, r := range []string{upstreamUnreachable, upstreamTimeout, upstreamRefused, upstreamBadStatus, upstreamToken} {
		m.upErrors[r] = upErrors.WithLabelValues(r)
	}
	m.upstream = upstream
	m.exchangeOK, m.exchangeErr = exchange.WithLabelValues("ok"), exchange.WithLabelValues("error")
	for _, t := range tools {
		if len(m.tools) < MaxToolLabels {
			m.tools[t] = true
		}
	}
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *gwMetrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// toolLabel is the tool label of an event: its name when known or
// learnable (see MaxToolLabels), "other" otherwise.
func (m *gwMetrics) toolLabel(e *rsmiddleware.AuditEvent) string {
	if e.Tool == "" {
		return ""
	}
	m.toolsMu.RLock()
	known, full := m.tools[e.Tool], len(m.tools) >= MaxToolLabels
	m.toolsMu.RUnlock()
	if known {
		return e.Tool
	}
	if full || (e.Result != rsmiddleware.AuditOK && e.Result != rsmiddleware.AuditToolError) {
		return "other"
	}
	m.toolsMu.Lock()
	defer m.toolsMu.Unlock()
	if len(m.tools) >= MaxToolLabels && !m.tools[e.Tool] {
		return "other"
	}
	m.tools[e.Tool] = true
	return e.Tool
}

// audit counts one audit event.
func (m *gwMetrics) audit(e rsmiddleware.AuditEvent) {
	method := e.Method
	if e.Event == rsmiddleware.EventResponse {
		method = "response"
	}
	mi := m.methodIndex[method] // unknown methods: 0, "other"
	key := requestKey{method: mi, result: m.resultIndex[e.Result], tool: m.toolLabel(&e)}
	c, ok := m.reqChildren.Load(key)
	if !ok {
		c, _ = m.reqChildren.LoadOrStore(key, m.requests.WithLabelValues(metricMethods[key.method], key.tool, metricResults[key.result]))
	}
	c.(prometheus.Counter).Inc()
	slot := &m.durChildren[mi]
	o := slot.Load()
	if o == nil {
		obs := m.durations.WithLabelValues(metricMethods[mi])
		slot.CompareAndSwap(nil, &obs)
		o = slot.Load()
	}
	(*o).Observe(e.Latency.Seconds())
	switch e.Result {
	case rsmiddleware.AuditDeniedByPolicy:
		m.denials.WithLabelValues(strconv.Itoa(e.Rule)).Inc()
	case rsmiddleware.AuditRateLimited:
		m.rateLimited.WithLabelValues(strconv.Itoa(e.Rule)).Inc()
	}
}

// refused counts a request the Middleware refused before the MCPFilter:
// a token refusal when no verified token was involved or it could not be
// checked (a verified token with a body refused for its form is not one).
func (m *gwMetrics) refused(r *http.Request, p *rsmiddleware.Principal, status int) {
	switch {
	case status == http.StatusServiceUnavailable:
		m.refusals[refusalUnavailable].Inc()
	case p != nil:
	case r.Header.Get("Authorization") == "":
		m.refusals[refusalMissing].Inc()
	case status == http.StatusBadRequest:
		m.refusals[refusalMalformed].Inc()
	default:
		m.refusals[refusalInvalid].Inc()
	}
}

// insufficientScope counts a 403 insufficient_scope refusal.
func (m *gwMetrics) insufficientScope() { m.refusals[refusalInsufficientScope].Inc() }

// upstreamError counts one failed upstream request.
func (m *gwMetrics) upstreamError(reason string) {
	if c, ok := m.upErrors[reason]; ok {
		c.Inc()
	}
}

// timedUpstream observes the upstream hop of every request sent through
// base: the time to the answer's headers (or the failure).
type timedUpstream struct {
	base http.RoundTripper
	obs  prometheus.Observer
}

func (t timedUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.base.RoundTrip(r)
	t.obs.Observe(time.Since(start).Seconds())
	return resp, err
}

// timedExchange observes the token requests (POSTs) the Exchanger sends
// to the AS; its metadata fetches (GETs) pass untimed.
type timedExchange struct {
	base    http.RoundTripper
	ok, bad prometheus.Observer
}

func (t timedExchange) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost {
		return t.base.RoundTrip(r)
	}
	start := time.Now()
	resp, err := t.base.RoundTrip(r)
	d := time.Since(start).Seconds()
	if err == nil && resp.StatusCode == http.StatusOK {
		t.ok.Observe(d)
	} else {
		t.bad.Observe(d)
	}
	return resp, err
}

// exchangeClient returns c (nil: a client with a 10 s timeout, the
// Exchanger's default) with its token requests timed.
func (m *gwMetrics) exchangeClient(c *http.Client) *http.Client {
	out := &http.Client{Timeout: 10 * time.Second}
	base := http.DefaultTransport
	if c != nil {
		*out = *c
		if c.Transport != nil {
			base = c.Transport
		}
	}
	out.Transport = timedExchange{base: base, ok: m.exchangeOK, bad: m.exchangeErr}
	return out
}
