package rsmiddleware

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpauth/mcpauth/internal/tracing"
	"github.com/mcpauth/mcpauth/toolpolicy"
)

// MCPFilterConfig configures an MCPFilter.
type MCPFilterConfig struct {
	// Scopes are the Middleware's scopes. They decide what list answers
	// show: a tools/list entry is kept when the caller holds
	// Scopes.ForTool(name), the scopes a tools/call of it needs; a
	// prompts/list entry when it holds Scopes.ForPrompt(name); a
	// resources/list entry when it holds Scopes.ForResource(uri); a
	// resources/templates/list entry when it holds
	// Scopes.ForResourceTemplate(uriTemplate). A list whose entries need
	// no scopes beyond the base is not touched.
	Scopes Scopes
	// Audit receives one AuditEvent per JSON-RPC request. Nil: no audit.
	Audit AuditFunc
	// TenantClaim names the access token claim copied into
	// AuditEvent.Tenant: a claim of the verified JWT, or a member of the
	// RFC 7662 §2.2 introspection answer of an introspected token.
	// Empty: no tenant.
	TenantClaim string
	// MaxBodyBytes bounds the request body. Larger bodies get 413.
	// Zero value: 4 MiB.
	MaxBodyBytes int64
	// MaxResponseBytes bounds what is held at once to be filtered: a whole
	// application/json answer, or one event of a text/event-stream answer.
	// A larger JSON answer is replaced by a JSON-RPC error (502); a larger
	// event ends the stream. Zero value: 16 MiB.
	MaxResponseBytes int64
	// Now: zero value time.Now.
	Now func() time.Time
	// Logger receives filtering failures. Zero value: slog.Default().
	Logger *slog.Logger
	// TracerProvider starts the OpenTelemetry span of the policy's
	// decision and receives the MCP attributes of a request on the
	// request's span: mcp.method.name, gen_ai.tool.name, jsonrpc.request.id,
	// oauth.client_id and mcp.arguments.sha256 (never an argument's value).
	// Nil: the global provider (otel.GetTracerProvider), which records
	// nothing until a program sets one.
	TracerProvider trace.TracerProvider
	// Policy, when set, decides each JSON-RPC request by its rules and
	// sets the arguments it injects (toolpolicy; docs/POLICY.md): a
	// denied request is answered with a JSON-RPC error carrying the
	// rule's message (ErrCodeDeniedByPolicy) and audited
	// AuditDeniedByPolicy; list answers leave out the entries no
	// arguments could make callable. Nil: no rules.
	Policy *toolpolicy.Engine
	// RateLimits, when set, takes a token per matching request: a body
	// with a request over a limit is answered 429 with Retry-After and a
	// JSON-RPC error (ErrCodeRateLimited), audited AuditRateLimited.
	RateLimits *toolpolicy.Limiter
	// Pins, when set, offers only tools whose definitions are the approved
	// ones of its file (docs/TOOLS.md): tools/list answers leave out the
	// others (audited EventToolUnpinned or EventToolDefinitionChanged),
	// and their calls are answered with ErrCodeToolAwaitsApproval,
	// audited AuditAwaitingApproval, without reaching the handler.
	Pins *ToolPins
	// Screening, when set, matches the texts of listed tool definitions
	// against instruction patterns (docs/TOOLS.md): a match is audited
	// EventToolSuspicious and, with ScreenHide, the tool is left out of
	// tools/list and its calls answered with ErrCodeToolWithheld.
	Screening *Screening
	// Approval, when set, holds the tools/call requests of the tools it
	// names until a person approves each on the authorization server's
	// page, with exactly its arguments (docs/TOOLS.md): a call not yet
	// approved is answered with the page's URL (WriteURLRequired, audited
	// AuditApprovalPending), a denied one with a tool result isError
	// (AuditApprovalDenied), and when the AS cannot be asked the call is
	// refused (ErrCodeApprovalUnavailable, AuditApprovalUnavailable); none
	// of them reaches the handler. An approved call is forwarded once, its
	// audit event naming the approval (AuditEvent.ApprovalID). The calls of
	// a batch are decided each on its own: the others go on. Approval is
	// asked last, after Pins, Screening, RateLimits and Policy, so the
	// arguments approved are the ones forwarded.
	Approval *Approval
}

// MCPFilter applies two things to the MCP Streamable HTTP exchanges of a
// handler, inside Middleware.Wrap (it reads the Principal from the context):
//
//   - List answers (tools/list, resources/list, resources/templates/list,
//     prompts/list) carry only the entries the caller's scopes allow, in
//     application/json answers and in text/event-stream events alike, on
//     POST answers and on GET streams (where a resumed stream may replay an
//     earlier answer; an answer whose request is unknown is recognised by
//     its "tools", "resources", "resourceTemplates" or "prompts" member).
//     A tools/call of a hidden tool, a prompts/get of a hidden prompt and
//     a resources/read of a hidden resource never reach the handler: the
//     Middleware answers them with the 403 insufficient_scope challenge
//     naming the scopes they need, so a hidden entry and a forbidden one
//     are one rule (Scopes).
//   - One AuditEvent per JSON-RPC request message: method, tool, subject,
//     client, tenant, the SHA-256 of the canonical arguments (never the
//     arguments), the outcome and the latency.
//   - With a Policy or RateLimits (toolpolicy, docs/POLICY.md): requests
//     over a rate limit are answered 429, arguments the policy injects are
//     set, requests a rule denies never reach the handler, and list
//     answers leave out the entries no arguments could make callable. The
//     rules read the requests as parsed here, after the refusals above,
//     and a stateless request's Mcp-Method and Mcp-Name must mirror its
//     body.
//   - URL-mode elicitation: what the client declared, in the initialize
//     of its MCP session (capabilities.elicitation.url; the session id of
//     the answer is kept, at most 100000) or in the request's own _meta
//     (MetaClientCapabilities, MCP 2026-07-28), is in the context of every
//     request it passes on (URLElicitationDeclared), for WriteURLRequired.
//
// A list answer it would filter that is content-coded (gzip and the like:
// a compressing handler inside Wrap) cannot be read, and is replaced by a
// JSON-RPC error (502) rather than passed on whole; compress outside Wrap.
// So is a 2xx answer with a body of another media type than
// application/json and text/event-stream (text/plain,
// application/json-seq, none) to a request
// whose answer it would trim: to a list request whose entries the caller
// may not all see, or to a GET stream. Other answers pass untouched.
// Interim answers (1xx but 101, RFC 9110 §15.2) go on as they come, and
// the final answer after them is filtered as any other.
//
// It is safe for concurrent use.
type MCPFilter struct {
	scopes      Scopes
	audit       AuditFunc
	tenantClaim string
	maxBody     int64
	maxResp     int64
	now         func() time.Time
	log         *slog.Logger
	policy      *toolpolicy.Engine
	limits      *toolpolicy.Limiter
	// guard: Pins and Screening; nil without either.
	guard    *toolGuard
	approval *Approval
	traces   traces
	// toolScopes lists every scope some tool needs beyond the base: a
	// caller holding them all sees every tool, and tools/list answers are
	// not parsed. resourceScopes and promptScopes are the same for
	// resources (and their templates) and prompts.
	toolScopes, resourceScopes, promptScopes []string
	// urlSessions: the MCP sessions whose initialize declared URL-mode
	// elicitation (URLElicitationDeclared).
	urlSessions urlSessions
}

// NewMCPFilter returns an MCPFilter for cfg.
func NewMCPFilter(cfg MCPFilterConfig) *MCPFilter {
	f := &MCPFilter{scopes: cfg.Scopes, audit: cfg.Audit, tenantClaim: cfg.TenantClaim,
		maxBody: cfg.MaxBodyBytes, maxResp: cfg.MaxResponseBytes, now: cfg.Now, log: cfg.Logger,
		policy: cfg.Policy, limits: cfg.RateLimits, approval: cfg.Approval}
	if cfg.Pins != nil || cfg.Screening != nil {
		f.guard = &toolGuard{pins: cfg.Pins, screen: cfg.Screening, verdicts: map[[32]byte]seenTool{}}
	}
	f.traces = newTraces(cfg.TracerProvider)
	if f.maxBody <= 0 {
		f.maxBody = 4 << 20
	}
	if f.maxResp <= 0 {
		f.maxResp = 16 << 20
	}
	if f.now == nil {
		f.now = time.Now
	}
	if f.log == nil {
		f.log = slog.Default()
	}
	union := func(method string, per map[string][]string) []string {
		var out []string
		add := func(list []string) {
			for _, s := range list {
				if !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
		}
		add(cfg.Scopes.Methods[method])
		for _, sc := range per {
			add(sc)
		}
		return out
	}
	f.toolScopes = union("tools/call", cfg.Scopes.Tools)
	f.resourceScopes = union("resources/read", cfg.Scopes.Resources)
	f.promptScopes = union("prompts/get", cfg.Scopes.Prompts)
	return f
}

// rpcRequest is one JSON-RPC message of a request body, with what the
// audit and the answer's filter need.
type rpcRequest struct {
	key    string // canonical JSON of the id; "" for a notification
	id     string // the id as sent
	method string
	tool   string
	args   string // ArgumentsDigest, tools/call and prompts/get only
	// name is what a policy rule matches: the tool or prompt name, or the
	// uri of resources/read and resources/subscribe.
	name string
	// msg is the message's JSON text; rawArgs its params.arguments.
	msg, rawArgs []byte
	// approval is the id of the person's approval a held or approved
	// tools/call has (Approval).
	approval string
	// response: a JSON-RPC response of the client (no method; id is the
	// id of the server's request it answers, key is empty).
	response bool
	done     bool
}

// MaxBatchRequests is the most messages a JSON-RPC batch (JSON-RPC 2.0 §6)
// may hold for MCPFilter: each request of a batch is one audit event, so an
// unbounded batch would let one request body write tens of thousands of
// lines. A longer batch is refused as a whole, 400 with the JSON-RPC error
// -32600 Invalid Request, id null, and audited as one event (method
// "batch").
// Batches exist only in MCP 2025-03-26 (2025-06-18 removed them), so no
// MCP client sends one this long. A batch holding two requests under one
// id is refused the same way, each request answered under its id: their
// answers could not be told apart.
const MaxBatchRequests = 100

// BatchesVersion is the first MCP revision without JSON-RPC batches
// (MCP 2025-06-18 changelog: "Remove support for JSON-RPC batching").
const BatchesVersion = "2025-06-18"

// errBatchTooLong: a batch of more than MaxBatchRequests messages.
var errBatchTooLong = errors.New("rsmiddleware: JSON-RPC batch too long")

// batchesRefused reports whether r speaks an MCP revision without JSON-RPC
// batches, BatchesVersion or later, as its MCP-Protocol-Version header says.
// A request without the header is of 2025-03-26 (MCP 2025-06-18
// basic/transports, "Protocol Version Header"), which has batches.
func batchesRefused(r *http.Request) bool {
	v := r.Header.Get(ProtocolVersionHeader)
	return len(v) == len(BatchesVersion) && v[4] == '-' && v[7] == '-' && v >= BatchesVersion
}

// isBatch reports whether the JSON body is an array, a JSON-RPC batch.
func isBatch(body []byte) bool {
	b := trimJSONSpace(body)
	return len(b) > 0 && b[0] == '['
}

// parseRequests decodes the JSON-RPC messages of body (single or batch).
// A batch of more than MaxBatchRequests messages is errBatchTooLong.
// Members are matched by their exact names, as the MCP server (whatever its
// language) reads them; peekJSONRPC refuses duplicate and case-folded
// method, params and name members first.
//
// peeked says body has passed peekJSONRPC already.
func parseRequests(body []byte, peeked bool) ([]*rpcRequest, error) {
	if !peeked {
		if _, err := peekJSONRPC(body); err != nil {
			return nil, err
		}
	}
	var out []*rpcRequest
	n := 0
	err := forEachMessage(trimJSONSpace(body), func(m []byte) error {
		if n++; n > MaxBatchRequests {
			return errBatchTooLong
		}
		var rawID, rawMethod, rawParams []byte
		if err := objectFields(m, func(key, val []byte) error {
			switch string(key) {
			case "id":
				rawID = val
			case "method":
				rawMethod = val
			case "params":
				rawParams = val
			}
			return nil
		}); err != nil {
			return err
		}
		var err error
		if rawMethod == nil {
			// A response to a request of the server (JSON-RPC 2.0 §5, as
			// an elicitation/create answer): one event, with the id it
			// answers, never matched with the server's answer.
			req := &rpcRequest{response: true, msg: m}
			if rawID != nil && string(rawID) != "null" {
				if req.id, err = idKey(rawID); err != nil {
					return errIDKey
				}
			}
			out = append(out, req)
			return nil
		}
		req := &rpcRequest{msg: m}
		if req.method, err = jsonString(rawMethod); err != nil {
			return errPeek
		}
		if rawID != nil && string(rawID) != "null" {
			if req.key, err = idKey(rawID); err != nil {
				return errIDKey
			}
			req.id = req.key
		}
		if req.method == "tools/call" || req.method == "prompts/get" {
			var name, args []byte
			if rawParams != nil && objectFields(rawParams, func(key, val []byte) error {
				switch string(key) {
				case "name":
					name = val
				case "arguments":
					args = val
				}
				return nil
			}) == nil {
				req.tool, _ = jsonString(name)
				req.name, req.rawArgs = req.tool, args
				if req.args, err = ArgumentsDigest(args); err != nil {
					return errArguments
				}
			}
		}
		if req.method == "resources/read" || req.method == "resources/subscribe" {
			var uri []byte
			if rawParams != nil && objectFields(rawParams, func(key, val []byte) error {
				if string(key) == "uri" {
					uri = val
				}
				return nil
			}) == nil && uri != nil {
				req.name, _ = jsonString(uri)
			}
		}
		out = append(out, req)
		return nil
	})
	if err != nil {
		var im *invalidMessage
		if errors.Is(err, errBatchTooLong) || errors.As(err, &im) {
			return nil, err
		}
		return nil, errPeek
	}
	return out, nil
}

// Messages peekJSONRPC passes that parseRequests cannot read.
var (
	errIDKey     = &invalidMessage{codeInvalidRequest, "Invalid Request: an id without a canonical JSON form (RFC 8785)"}
	errArguments = &invalidMessage{codeInvalidParams, "Invalid params: arguments without a canonical JSON form (RFC 8785), as nesting deeper than 1000"}
)

// sharedID reports whether two of reqs are requests under one id (ids
// compared in canonical form, so 1 and 1.0 are one id, as they are to a
// JavaScript server).
func sharedID(reqs []*rpcRequest) bool {
	if len(reqs) < 2 {
		return false
	}
	seen := make(map[string]bool, len(reqs))
	for _, q := range reqs {
		if q.key == "" {
			continue
		}
		if seen[q.key] {
			return true
		}
		seen[q.key] = true
	}
	return false
}

// forEachMessage calls fn with each message of the valid JSON-RPC body v,
// an object or an array of them.
func forEachMessage(v []byte, fn func([]byte) error) error {
	if len(v) == 0 {
		return errPeek
	}
	if v[0] != '[' {
		return fn(v)
	}
	i := skipWS(v, 1)
	for i < len(v) && v[i] != ']' {
		end := skipValue(v, i)
		if err := fn(v[i:end]); err != nil {
			return err
		}
		i = skipWS(v, end)
		if i < len(v) && v[i] == ',' {
			i = skipWS(v, i+1)
		}
	}
	return nil
}

// jsonString decodes a JSON string value; plain ones (no escape, valid
// UTF-8, which the decoder would replace by U+FFFD) without a copy of the
// decoder's.
func jsonString(raw []byte) (string, error) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// idKey is the canonical JSON (RFC 8785) of a JSON-RPC id, so that an
// answer's id matches its request's however either is spelt. Small
// integers and strings without escapes are their own canonical form.
func idKey(raw []byte) (string, error) {
	plain := len(raw) > 0 && len(raw) <= 15
	for i, c := range raw {
		if !plain {
			break
		}
		plain = c >= '0' && c <= '9' || c == '-' && i == 0 && len(raw) > 1
	}
	if plain && (raw[0] != '0' || len(raw) == 1) && (raw[0] != '-' || raw[1] != '0') {
		return string(raw), nil
	}
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' && !bytes.ContainsAny(raw[1:len(raw)-1], "\\\"") &&
		!bytes.ContainsFunc(raw, func(r rune) bool { return r < 0x20 || r == utf8.RuneError }) {
		return string(raw), nil
	}
	k, err := CanonicalJSON(raw)
	return string(k), err
}

// Wrap returns next with list answers filtered and requests audited.
func (f *MCPFilter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := PrincipalFromContext(r.Context())
		if !ok && IsPreflight(r) {
			next.ServeHTTP(w, r) // no JSON-RPC to audit or filter
			return
		}
		if !ok {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		start := f.now()
		var reqs []*rpcRequest
		var caller *toolpolicy.Caller
		var extra [][]byte // answers of held calls (Approval)
		sid := r.Header.Get(SessionHeader)
		if r.Method == http.MethodDelete {
			f.urlSessions.remove(sid)
		}
		urlDeclared, initURL := f.urlSessions.has(sid), false
		if urlDeclared {
			r = r.WithContext(withURLElicitation(r.Context()))
		}
		if r.Method == http.MethodPost && r.Body != nil && r.Body != http.NoBody {
			var body []byte
			peeked := false
			if bb, ok := unreadBody(r); ok {
				// Read and checked by the Middleware.
				body, peeked = bb.b, bb.peeked
			} else {
				var err error
				if body, err = readBody(r, f.maxBody); err != nil {
					bodyError(w, err)
					return
				}
				r.Body = newBufferedBody(body, false, r.Body)
			}
			if int64(len(body)) > f.maxBody {
				WriteBodyTooLarge(w)
				return
			}
			var err error
			switch reqs, err = parseRequests(body, peeked); {
			case errors.Is(err, errBatchTooLong):
				// Id null: the messages past MaxBatchRequests are not read.
				f.refuseBatch(w, r, p, start, rpcErrorBody("null", codeInvalidRequest, batchTooLongText))
				return
			case err != nil:
				// JSON-RPC 2.0 §5.1: -32700 for a body that is not JSON,
				// -32600 or -32602 with the request's id for one that is
				// JSON but no JSON-RPC message MCPFilter passes on
				// (errorAnswer). It is audited as the Middleware's refusal
				// of such a body is (AuditRefused).
				f.auditAlone(r, p, start, &rpcRequest{method: MethodUnknown}, AuditInvalid, 0, http.StatusBadRequest)
				code, text := 0, ""
				if im := (*invalidMessage)(nil); errors.As(err, &im) {
					code, text = im.code, im.text
				}
				writeRPCAnswer(w, http.StatusBadRequest, errorAnswer(body, code, text))
				return
			case batchesRefused(r) && isBatch(body):
				f.refuseBatch(w, r, p, start, rpcErrorBody("null", codeInvalidRequest, noBatchesText))
				return
			case sharedID(reqs):
				// Answers are matched to requests by id (JSON-RPC 2.0 §6):
				// of two requests under one id, a tools/list answer could
				// pass as the other's and go out untrimmed. Each request
				// gets its error under its id.
				f.refuseBatch(w, r, p, start, errorAnswer(body, codeInvalidRequest, "Invalid Request: two requests of the batch have one id"))
				return
			}
			if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
				spanAttributes(span, p, reqs)
			}
			for _, q := range reqs {
				if !q.response && declaresURLElicitation(q.method, q.msg) {
					if !urlDeclared {
						urlDeclared = true
						r = r.WithContext(withURLElicitation(r.Context()))
					}
					initURL = initURL || q.method == "initialize"
				}
			}
			if f.policy != nil && Stateless(r) && !mirrorsBody(r, body) {
				// The rules read the body; the headers must say the same,
				// whatever the Middleware's scopes needed to read
				// (MCP Streamable HTTP, "Server Validation").
				f.refuseMismatch(w, r, p, start, body, reqs)
				return
			}
			if f.guard != nil && !f.guardCalls(w, r, p, start, body, reqs, next) {
				return
			}
			if (f.policy != nil || f.limits != nil) && len(reqs) > 0 {
				caller = f.caller(r, p)
				_, span := f.traces.start(r.Context(), "policy")
				allowed := f.applyPolicy(w, r, p, caller, start, body, reqs)
				if !allowed && span.IsRecording() {
					span.SetStatus(codes.Error, "denied")
				}
				span.End()
				if !allowed {
					return
				}
			}
			if f.approval != nil && len(reqs) > 0 {
				var ok bool
				if reqs, extra, ok = f.holdCalls(w, r, p, start, body, reqs); !ok {
					return
				}
			}
		}
		if caller == nil && f.policy != nil {
			caller = f.caller(r, p)
		}
		fw := &filterWriter{w: w, f: f, p: p, c: caller, reqs: reqs, start: start, byID: map[string]*rpcRequest{}, initURL: initURL, extra: extra}
		for _, q := range reqs {
			if q.key != "" {
				fw.byID[q.key] = q
			}
		}
		if f.audit != nil && (len(reqs) > 0 || f.guard != nil) {
			fw.base = f.baseEvent(r, p, inboundToken(r.Context()), start)
		}
		fw.trim = f.trimsAnswer(r, reqs, p, caller)
		fw.inspect = len(fw.byID) > 0 && f.audit != nil || f.trims(p) || len(extra) > 0
		returned := false
		defer func() {
			if !returned {
				// next panicked (http.ErrAbortHandler: a proxy aborting a
				// broken answer); the panic goes on, the audit still gets
				// every request.
				fw.abandon()
			}
		}()
		next.ServeHTTP(fw, r)
		returned = true
		fw.finish()
	})
}

// batchTooLongText is the error text of a batch of more than
// MaxBatchRequests messages.
var batchTooLongText = "Invalid Request: a batch holds at most " + strconv.Itoa(MaxBatchRequests) + " messages"

// noBatchesText is the error text of a batch of an MCP revision without
// batches (batchesRefused): the body is no message of that revision.
const noBatchesText = "Invalid Request: MCP " + BatchesVersion + " and later have no JSON-RPC batches"

// refuseBatch answers a batch MCPFilter does not pass on (too long, of an
// MCP revision without batches, two requests under one id) with 400 and
// answer, JSON-RPC errors -32600 Invalid Request (JSON-RPC 2.0 §5.1), and
// audits it as one event, method "batch", whatever the number of its
// messages.
func (f *MCPFilter) refuseBatch(w http.ResponseWriter, r *http.Request, p *Principal, start time.Time, answer []byte) {
	f.auditAlone(r, p, start, &rpcRequest{method: MethodBatch}, AuditRPCError, codeInvalidRequest, http.StatusBadRequest)
	writeRPCAnswer(w, http.StatusBadRequest, answer)
}

// Methods of audit events that stand for more or less than one request.
const (
	// MethodBatch: a JSON-RPC batch refused as a whole.
	MethodBatch = "batch"
	// MethodUnknown: a body whose messages could not be read (not
	// JSON-RPC, or too large to be read for a refused request).
	MethodUnknown = "unknown"
)

// baseEvent is what every event of r has: its arrival, session and
// principal (nil: none was verified). token is the verified access token.
func (f *MCPFilter) baseEvent(r *http.Request, p *Principal, token string, start time.Time) AuditEvent {
	e := AuditEvent{Time: start, Session: r.Header.Get(SessionHeader)}
	e.TraceID, e.SpanID = tracing.IDs(r.Context())
	if p == nil {
		return e
	}
	e.Subject, e.ClientID = p.Subject, p.ClientID
	if f.tenantClaim != "" {
		if p.introspected != nil {
			e.Tenant = claimIn(p.introspected, f.tenantClaim)
		} else {
			e.Tenant = claimOf(token, f.tenantClaim)
		}
	}
	return e
}

// auditAlone audits one event of a request answered without its messages
// reaching the handler.
func (f *MCPFilter) auditAlone(r *http.Request, p *Principal, start time.Time, q *rpcRequest, result string, code, status int) {
	if f.audit == nil {
		return
	}
	fw := &filterWriter{f: f, start: start, base: f.baseEvent(r, p, inboundToken(r.Context()), start)}
	fw.emit(q, result, code, false, status)
}

// abandon audits the requests of an answer that was not completed as
// AuditNoResponse, writing nothing to the client.
func (fw *filterWriter) abandon() {
	for _, q := range fw.reqs {
		if !q.done {
			fw.emit(q, AuditNoResponse, 0, false, fw.status)
		}
	}
}

// AuditDenied writes the audit events of a request the Middleware refuses
// for missing scopes (a call of a hidden or forbidden tool): set it as
// MiddlewareConfig.OnInsufficientScope. Each JSON-RPC request of body gets
// an event with Result AuditDenied and Status 403.
func (f *MCPFilter) AuditDenied(r *http.Request, p *Principal, body []byte) {
	if f.audit == nil {
		return
	}
	tok := ""
	if _, t, err := ParseAuthorizationScheme(r.Header.Get("Authorization")); err == nil {
		tok = t
	}
	f.auditRequests(r, p, tok, body, AuditDenied, http.StatusForbidden)
}

// auditRequests writes one event per message of body with result and
// status; a body that cannot be read is one event of MethodUnknown, a
// batch too long one of MethodBatch.
func (f *MCPFilter) auditRequests(r *http.Request, p *Principal, token string, body []byte, result string, status int) {
	reqs, err := parseRequests(body, false)
	code := 0
	if errors.Is(err, errBatchTooLong) {
		reqs = []*rpcRequest{{method: MethodBatch}}
		if result == AuditInvalid {
			// Refused for its length with a verified token: audited as
			// refuseBatch audits it, with the -32600 of the answer.
			result, code = AuditRPCError, codeInvalidRequest
		}
	} else if err != nil || len(reqs) == 0 {
		reqs = []*rpcRequest{{method: MethodUnknown}}
	}
	start := f.now()
	fw := &filterWriter{f: f, base: f.baseEvent(r, p, token, start), start: start}
	for _, q := range reqs {
		fw.emit(q, result, code, false, status)
	}
}

// MaxRefusedPeekBytes is the most of a refused request's body AuditRefused
// reads to name its messages; a longer body is audited as one event of
// MethodUnknown. Refused requests need no token, so what each may cost
// the audit is bounded: this many bytes read, at most MaxBatchRequests
// events, each of names cut to MaxAuditNameBytes.
const MaxRefusedPeekBytes = 64 << 10

// AuditRefused writes the audit events of a request the Middleware refuses
// otherwise than for missing scopes: set it as MiddlewareConfig.OnRefused.
// Each JSON-RPC message of a POST body gets an event with the status of
// the answer and Result AuditUnauthorized (no verified token: 401, or
// 400 for a malformed Authorization header), AuditUnavailable (503: the
// token could not be checked) or AuditInvalid (a verified token, a body
// refused for its form); the subject, client and tenant only when p is
// not nil. Other methods carry no JSON-RPC message and get no event.
func (f *MCPFilter) AuditRefused(r *http.Request, p *Principal, status int) {
	if f.audit == nil || r.Method != http.MethodPost {
		return
	}
	var body []byte
	if bb, ok := unreadBody(r); ok {
		body = bb.b
	} else if r.Body != nil && r.Body != http.NoBody && r.ContentLength <= MaxRefusedPeekBytes {
		// The request is refused: its body is read for the audit only.
		b, err := io.ReadAll(io.LimitReader(r.Body, MaxRefusedPeekBytes+1))
		if err == nil && len(b) <= MaxRefusedPeekBytes {
			body = b
		}
	}
	result := AuditInvalid
	switch {
	case status == http.StatusServiceUnavailable:
		result = AuditUnavailable
	case p == nil:
		result = AuditUnauthorized
	}
	tok := ""
	if p != nil {
		if _, t, err := ParseAuthorizationScheme(r.Header.Get("Authorization")); err == nil {
			tok = t
		}
	}
	f.auditRequests(r, p, tok, body, result, status)
}

// trimsAnswer reports whether the answer to r, whose JSON-RPC messages are
// reqs, may hold a list entry p must not see: p lacks a scope some entry
// needs (trims) and r is a GET stream (its answers' requests are unknown,
// so every list is cut) or reqs holds a request of a list method whose
// entries p may not all see.
func (f *MCPFilter) trimsAnswer(r *http.Request, reqs []*rpcRequest, p *Principal, c *toolpolicy.Caller) bool {
	if !f.trims(p) {
		return false
	}
	if r.Method == http.MethodGet {
		return true
	}
	for _, q := range reqs {
		if q.key == "" || q.response {
			continue
		}
		for _, lm := range listMembers {
			if lm.method == q.method && f.visible(lm.member, p, c) != nil {
				return true
			}
		}
	}
	return false
}

// trims reports whether some list answer may have to be cut for p: p
// lacks a scope some entry needs, or a policy rule may hide entries.
func (f *MCPFilter) trims(p *Principal) bool {
	return f.guard != nil || f.policyLists() || len(p.MissingScopes(f.toolScopes)) > 0 ||
		len(p.MissingScopes(f.resourceScopes)) > 0 ||
		len(p.MissingScopes(f.promptScopes)) > 0
}

// claimOf reads a claim of a JWT the Verifier has already verified.
func claimOf(token, claim string) string {
	_, rest, ok := strings.Cut(token, ".")
	seg, sig, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || strings.Contains(sig, ".") {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return ""
	}
	return claimIn(payload, claim)
}

// claimIn reads the member claim of the JSON object payload (a JWT's
// claims set or an introspection answer) as a string: a string as it is,
// another value as its JSON text.
func claimIn(payload []byte, claim string) string {
	// The Verifier has parsed this payload: it is one valid JSON object. A
	// scan of its members finds the claim without decoding the others; of
	// repeated members the last counts, as in a map decode.
	if !json.Valid(payload) {
		return ""
	}
	var raw []byte
	if objectFields(payload, func(key, val []byte) error {
		if string(key) == claim {
			raw = val
		}
		return nil
	}) != nil || raw == nil {
		return ""
	}
	if s, err := jsonString(raw); err == nil && len(raw) > 0 && raw[0] == '"' {
		return s
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// Response modes of filterWriter.
const (
	modeUndecided = iota
	modePass      // written through untouched
	modeJSON      // held whole, filtered at the end
	modeSSE       // filtered event by event
	modeRefused   // an answer to be filtered that cannot be read: refused
	modeUnread    // to be filtered, of a media type not read: held until a byte comes
	modeExtras    // 202 to the forwarded part of a batch: replaced by the held calls' answers
)

// contentCoded reports whether h names a content coding other than
// identity (RFC 9110 §8.4).
func contentCoded(h http.Header) bool {
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return true
			}
		}
	}
	return false
}

var errTooLarge = errors.New("rsmiddleware: response event larger than MaxResponseBytes")

// filterWriter filters the answer of one request.
type filterWriter struct {
	w       http.ResponseWriter
	f       *MCPFilter
	p       *Principal
	c       *toolpolicy.Caller // for the policy's list rules; nil without
	reqs    []*rpcRequest
	byID    map[string]*rpcRequest
	base    AuditEvent
	start   time.Time
	inspect bool
	// trim: the answer may hold a list entry p must not see (trimsAnswer),
	// so an answer the filter cannot read is refused, not passed on.
	trim bool

	mode   int
	status int
	buf    []byte // modeJSON: the body; modeSSE: the incomplete event
	scan   sseScanner
	over   bool // modeJSON: the body exceeded maxResp
	broken bool // modeSSE: the stream was cut
	// refusal is the JSON-RPC error message of a modeRefused answer.
	refusal string
	// extra are the answers to held requests of a batch (Approval), added
	// to the handler's answer to the others.
	extra [][]byte
	// initURL: the request is an initialize declaring URL elicitation; the
	// session id of its answer is recorded (URLElicitationDeclared).
	initURL bool
}

// recordSession records the session id of the answer to an initialize that
// declared URL elicitation, as the handler set it (before any outer layer
// such as SessionBinding rewrites it), when the answer is a success.
func (fw *filterWriter) recordSession(code int) {
	if !fw.initURL {
		return
	}
	fw.initURL = false
	if code/100 == 2 {
		fw.f.urlSessions.add(fw.w.Header().Get(SessionHeader))
	}
}

func (fw *filterWriter) Header() http.Header { return fw.w.Header() }

func (fw *filterWriter) WriteHeader(code int) {
	if fw.mode != modeUndecided {
		return
	}
	if interim(code) {
		// An interim answer (103 Early Hints and the like) carries no
		// body: it goes on, and the final answer after it is filtered.
		fw.w.WriteHeader(code)
		return
	}
	fw.status = code
	fw.recordSession(code)
	mt, _, _ := mime.ParseMediaType(fw.w.Header().Get("Content-Type"))
	switch {
	case len(fw.extra) > 0 && code == http.StatusAccepted:
		// The forwarded messages were notifications or responses; the
		// held calls' answers are the answer.
		fw.mode = modeExtras
		return
	case !fw.inspect || code/100 != 2:
		fw.mode = modePass
	case (mt == "text/event-stream" || mt == "application/json") && contentCoded(fw.w.Header()):
		// Compressed bytes cannot be filtered, and passed on they would
		// show the client every entry: refused whole (fail closed).
		fw.f.log.Warn("rsmiddleware: content-coded answer cannot be filtered; put compression outside MCPFilter", "content_encoding", fw.w.Header().Get("Content-Encoding"))
		fw.refuse("the MCP server's answer is content-coded; the filter reads only identity answers")
		return
	case mt == "text/event-stream":
		fw.mode = modeSSE
		fw.w.Header().Del("Content-Length")
	case mt == "application/json":
		fw.mode = modeJSON
		return // the header is sent with the filtered body
	case fw.trim:
		// A media type the filter does not read (text/plain,
		// application/json-seq, none) may still carry the list to a
		// client that does not look at it: refused whole at its first
		// byte (fail closed). An answer without a body (202 to a batch,
		// 200 to a GET) shows nothing and goes out as it is, at finish.
		fw.mode = modeUnread
		return
	default:
		fw.mode = modePass
	}
	fw.w.WriteHeader(code)
}

func (fw *filterWriter) Write(b []byte) (int, error) {
	if fw.mode == modeUndecided {
		fw.WriteHeader(http.StatusOK)
	}
	switch fw.mode {
	case modeUnread:
		if len(b) == 0 {
			return 0, nil
		}
		fw.f.log.Warn("rsmiddleware: answer of a media type the filter cannot read; it reads application/json and text/event-stream", "content_type", fw.w.Header().Get("Content-Type"))
		fw.refuse("the MCP server's answer could not be checked: its media type is neither application/json nor text/event-stream")
		return len(b), nil
	case modeRefused, modeExtras:
		return len(b), nil
	case modeJSON:
		if !fw.over && int64(len(fw.buf)+len(b)) <= fw.f.maxResp {
			fw.buf = append(fw.buf, b...)
		} else {
			fw.over, fw.buf = true, nil
		}
		return len(b), nil
	case modeSSE:
		if fw.broken {
			return 0, errTooLarge
		}
		if err := fw.feedSSE(b); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return fw.w.Write(b)
}

// Flush sends what is complete: for event streams, every whole event.
func (fw *filterWriter) Flush() {
	if fw.mode == modeJSON || fw.mode == modeRefused || fw.mode == modeUnread || fw.mode == modeExtras {
		return // nothing is sent before finish
	}
	if fl, ok := fw.w.(http.Flusher); ok {
		fl.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (fw *filterWriter) Unwrap() http.ResponseWriter { return fw.w }

func (fw *filterWriter) finish() {
	if fw.mode == modeUndecided {
		fw.recordSession(http.StatusOK) // net/http sends 200 with the header
		if len(fw.extra) > 0 {
			fw.mode = modeExtras
		}
	}
	switch fw.mode {
	case modeExtras:
		fw.status = http.StatusOK
		fw.w.Header().Del("Content-Encoding")
		writeRPCAnswer(fw.w, http.StatusOK, joinAnswers(fw.extra))
	case modePass:
		if len(fw.extra) > 0 {
			// An HTTP error (or an answer of another media type) to the
			// forwarded part of a batch: the held calls' answers cannot be
			// added; they were not run, and are asked again when retried.
			fw.f.log.Warn("rsmiddleware: the answers of calls held for approval were dropped: the batch's answer cannot hold them", "status", fw.status)
		}
	case modeUnread:
		fw.w.WriteHeader(fw.status)
	case modeRefused:
		fw.w.Header().Del("Content-Encoding")
		fw.status = http.StatusBadGateway
		writeRPCError(fw.w, http.StatusBadGateway, fw.singleID(), -32603, fw.refusal)
	case modeJSON:
		if fw.over {
			fw.f.log.Warn("rsmiddleware: JSON answer too large to filter", "limit", fw.f.maxResp)
			fw.status = http.StatusBadGateway
			writeRPCError(fw.w, http.StatusBadGateway, fw.singleID(), -32603, "the MCP server's answer is larger than the filter accepts")
			break
		}
		out := fw.buf
		if nb, changed := fw.filterMessages(fw.buf); changed {
			out = nb
		}
		if len(fw.extra) > 0 {
			out = withAnswers(out, fw.extra)
		}
		fw.w.Header().Set("Content-Length", strconv.Itoa(len(out)))
		fw.w.WriteHeader(fw.status)
		_, _ = fw.w.Write(out)
	case modeSSE:
		// An event cut off by the end of the stream is not dispatched by an
		// EventSource (WHATWG HTML §9.2.6), so it is dropped, not forwarded.
		fw.buf = nil
		if len(fw.extra) > 0 && !fw.broken {
			// The held calls' answers end the stream, one event each.
			for _, a := range fw.extra {
				_, _ = fw.w.Write([]byte("event: message\ndata: " + string(a) + "\n\n"))
			}
			if fl, ok := fw.w.(http.Flusher); ok {
				fl.Flush()
			}
		}
	}
	if fw.f.audit == nil {
		return
	}
	status := fw.status
	if status == 0 {
		status = http.StatusOK
	}
	for _, q := range fw.reqs {
		if q.done {
			continue
		}
		res := AuditNoResponse
		switch {
		case status >= 400:
			res = AuditHTTPError
		case q.key == "" && status == http.StatusAccepted:
			res = AuditAccepted
		case q.key == "":
			res = AuditOK
		}
		fw.emit(q, res, 0, false, status)
	}
}

// withAnswers adds answers to the JSON-RPC answer body out (a Response, a
// batch of them, or nothing): one batch holding all.
func withAnswers(out []byte, answers [][]byte) []byte {
	t := trimJSONSpace(out)
	var msgs [][]byte
	switch {
	case len(t) == 0:
	case !json.Valid(t):
		return out // not JSON: passed on as it is
	case t[0] == '[':
		_ = forEachMessage(t, func(m []byte) error {
			msgs = append(msgs, m)
			return nil
		})
	default:
		msgs = append(msgs, t)
	}
	return joinAnswers(append(msgs, answers...))
}

// refuse replaces the answer by a JSON-RPC error -32603 with message msg
// (502, JSON-RPC 2.0 §5.1), written by finish: its bytes are dropped.
func (fw *filterWriter) refuse(msg string) {
	fw.mode, fw.refusal = modeRefused, msg
}

// singleID is the id of the only request, for a JSON-RPC error answer.
func (fw *filterWriter) singleID() string {
	if len(fw.reqs) == 1 && fw.reqs[0].id != "" {
		return fw.reqs[0].id
	}
	return "null"
}

func (fw *filterWriter) emit(q *rpcRequest, result string, code int, isError bool, status int) {
	q.done = true
	if fw.f.audit == nil {
		return
	}
	e := fw.base
	e.Event = q.method
	switch {
	case q.response:
		e.Event = EventResponse
	case q.method == "tools/call":
		e.Event = "tool.call"
	}
	e.Method, e.Tool, e.RequestID, e.ArgsSHA256, e.ApprovalID = q.method, q.tool, q.id, q.args, q.approval
	e.Result, e.ErrorCode, e.IsError, e.Status = result, code, isError, status
	e.bound()
	e.Latency = fw.f.now().Sub(fw.start)
	fw.f.audit(e)
}

// feedSSE forwards every complete event of the stream, filtered.
func (fw *filterWriter) feedSSE(b []byte) error {
	fw.buf = append(fw.buf, b...)
	for {
		end := fw.scan.eventEnd(fw.buf)
		if end < 0 {
			break
		}
		out := fw.filterEvent(fw.buf[:end])
		if _, err := fw.w.Write(out); err != nil {
			return err
		}
		fw.buf = fw.buf[end:]
		fw.scan = sseScanner{}
	}
	if int64(len(fw.buf)) > fw.f.maxResp {
		fw.f.log.Warn("rsmiddleware: event stream event too large to filter; stream cut", "limit", fw.f.maxResp)
		fw.broken, fw.buf = true, nil
		return errTooLarge
	}
	if len(fw.buf) == 0 {
		fw.buf = nil // let a large event's buffer go
	}
	return nil
}

// sseScanner finds the end of an event in a growing buffer without
// rescanning what it has seen.
type sseScanner struct {
	pos       int // next byte to examine
	lineStart int // start of the current line
}

// eventEnd returns the index just past the blank line that ends the first
// event of b (lines end in CRLF, LF or CR: WHATWG HTML §9.2.5), or -1 when
// b holds no complete event yet.
func (s *sseScanner) eventEnd(b []byte) int {
	for i := s.pos; i < len(b); i++ {
		c := b[i]
		if c != '\n' && c != '\r' {
			continue
		}
		next := i + 1
		if c == '\r' {
			if next == len(b) {
				s.pos = i // a CRLF may be split across writes
				return -1
			}
			if b[next] == '\n' {
				next++
			}
		}
		if i == s.lineStart {
			return next
		}
		s.lineStart = next
		i = next - 1
	}
	s.pos = len(b)
	return -1
}

// filterEvent returns ev (one event, with its terminating blank line) with
// the JSON-RPC answers in its data filtered, or ev itself when nothing
// changed.
func (fw *filterWriter) filterEvent(ev []byte) []byte {
	var data [][]byte
	forEachLine(ev, func(line []byte) {
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) == "data" {
			value, _ = bytes.CutPrefix(value, []byte(" "))
			data = append(data, value)
		}
	})
	if len(data) == 0 {
		return ev
	}
	nd, changed := fw.filterMessages(bytes.Join(data, []byte("\n")))
	if !changed {
		return ev
	}
	var out bytes.Buffer
	wroteData := false
	forEachLine(ev, func(line []byte) {
		if len(line) == 0 {
			return
		}
		field, _, _ := bytes.Cut(line, []byte(":"))
		if string(field) == "data" {
			if !wroteData {
				out.WriteString("data: ")
				out.Write(nd) // compact JSON: no line breaks
				out.WriteByte('\n')
				wroteData = true
			}
			return
		}
		out.Write(line)
		out.WriteByte('\n')
	})
	out.WriteByte('\n')
	return out.Bytes()
}

func forEachLine(b []byte, fn func([]byte)) {
	for len(b) > 0 {
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			fn(b)
			return
		}
		fn(b[:i])
		if b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n' {
			i++
		}
		b = b[i+1:]
	}
}

// filterMessages audits and filters the JSON-RPC message or batch in data.
func (fw *filterWriter) filterMessages(data []byte) ([]byte, bool) {
	t := bytes.TrimSpace(data)
	if len(t) == 0 {
		return data, false
	}
	if t[0] != '[' {
		return fw.filterMessage(t)
	}
	var msgs []json.RawMessage
	if json.Unmarshal(t, &msgs) != nil {
		return data, false
	}
	changed := false
	for i, m := range msgs {
		if nm, ok := fw.filterMessage(m); ok {
			msgs[i], changed = nm, true
		}
	}
	if !changed {
		return data, false
	}
	out, err := json.Marshal(msgs)
	if err != nil {
		return data, false
	}
	return out, true
}

// filterMessage handles one JSON-RPC message: an answer to an audited
// request is recorded, and a list answer is cut to what the caller may see.
func (fw *filterWriter) filterMessage(m []byte) ([]byte, bool) {
	if !json.Valid(m) {
		return m, false
	}
	var rawID, result, rpcErr []byte
	isRequest := false
	if objectFields(m, func(key, val []byte) error {
		switch string(key) {
		case "method":
			isRequest = true
			if fw.f.guard != nil && string(val) == `"notifications/tools/list_changed"` {
				fw.f.guard.forget()
			}
		case "id":
			rawID = val
		case "result":
			result = val
		case "error":
			rpcErr = val
		}
		return nil
	}) != nil || isRequest || rawID == nil || result == nil && rpcErr == nil {
		return m, false
	}
	var q *rpcRequest
	if key, err := idKey(rawID); err == nil {
		q = fw.byID[key]
	}
	if q != nil && !q.done {
		status := fw.status
		switch {
		case rpcErr != nil:
			var e struct {
				Code int `json:"code"`
			}
			_ = json.Unmarshal(rpcErr, &e)
			fw.emit(q, AuditRPCError, e.Code, false, status)
		case q.method == "tools/call":
			isError := false
			_ = objectFields(result, func(key, val []byte) error {
				if string(key) == "isError" {
					isError = string(val) == "true"
				}
				return nil
			})
			res := AuditOK
			if isError {
				res = AuditToolError
			}
			fw.emit(q, res, 0, isError, status)
		default:
			fw.emit(q, AuditOK, 0, false, status)
		}
	}
	if result == nil {
		return m, false
	}
	method := ""
	if q != nil {
		method = q.method
	}
	nr, changed := fw.f.trimResultFor(method, result, fw.p, fw.c, fw)
	if !changed {
		return m, false
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(m, &fields) != nil {
		return m, false
	}
	fields["result"] = nr
	out, err := json.Marshal(fields)
	if err != nil {
		return m, false
	}
	return out, true
}

// spanAttributes sets the MCP attributes of the OpenTelemetry semantic
// conventions (mcp.method.name, gen_ai.tool.name, jsonrpc.request.id) of a
// single request, and the caller's client_id, on span; for a batch the
// method and tool of its first request and the batch's size.
func spanAttributes(span trace.Span, p *Principal, reqs []*rpcRequest) {
	attrs := make([]attribute.KeyValue, 0, 6)
	if p != nil && p.ClientID != "" {
		attrs = append(attrs, attribute.String("oauth.client_id", p.ClientID))
	}
	if len(reqs) > 1 {
		attrs = append(attrs, attribute.Int("jsonrpc.batch.size", len(reqs)))
	}
	if len(reqs) > 0 {
		q := reqs[0]
		attrs = append(attrs, attribute.String("mcp.method.name", q.method))
		switch {
		case q.tool == "":
		case q.method == "tools/call":
			attrs = append(attrs, attribute.String("gen_ai.tool.name", q.tool))
		case q.method == "prompts/get":
			attrs = append(attrs, attribute.String("gen_ai.prompt.name", q.tool))
		}
		if q.id != "" {
			attrs = append(attrs, attribute.String("jsonrpc.request.id", q.id))
		}
		if q.args != "" {
			attrs = append(attrs, attribute.String("mcp.arguments.sha256", q.args))
		}
	}
	span.SetAttributes(attrs...)
}
