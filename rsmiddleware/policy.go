package rsmiddleware

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/toolpolicy"
)

// JSON-RPC error codes of requests refused by MCPFilter's Policy and
// RateLimits, in the range JSON-RPC 2.0 §5.1 leaves to implementations
// (-32000 to -32099).
const (
	// ErrCodeDeniedByPolicy: a rule of the policy denied the request; the
	// message is the rule's.
	ErrCodeDeniedByPolicy = -32030
	// ErrCodeRateLimited: a rate limit refused the request (HTTP 429).
	ErrCodeRateLimited = -32031
)

// Results of requests refused by MCPFilter's Policy and RateLimits.
const (
	// AuditDeniedByPolicy: a policy rule denied the request;
	// AuditEvent.Rule is its index in policy.rules (-1: an injected
	// argument had no value for the caller).
	AuditDeniedByPolicy = "denied_by_policy"
	// AuditRateLimited: refused with 429; AuditEvent.Rule is the index of
	// the limit in rate_limits.
	AuditRateLimited = "rate_limited"
)

// notRunText answers the other requests of a batch refused as a whole.
const notRunText = "Not run: another request of this batch was refused."

// policyLists reports whether the policy may hide list entries.
func (f *MCPFilter) policyLists() bool {
	return f.policy.ListsFiltered("tools/call") || f.policy.ListsFiltered("prompts/get") || f.policy.ListsFiltered("resources/read")
}

// caller is the policy's view of p: its claims are the introspection
// answer p was made from, or the payload of the verified JWT of r's
// context, decoded when a rule first reads them and kept with p for the
// token's later requests.
func (f *MCPFilter) caller(r *http.Request, p *Principal) *toolpolicy.Caller {
	c := &toolpolicy.Caller{Subject: p.Subject, ClientID: p.ClientID, Scopes: p.Scopes}
	tok := ""
	if r != nil {
		tok = inboundToken(r.Context())
	}
	c.LoadClaims = func() (map[string]any, int) {
		if pc := p.policyClaims.Load(); pc != nil {
			return pc.claims, pc.size
		}
		raw := p.introspected
		if raw == nil {
			if raw = jwtPayload(tok); raw == nil {
				return map[string]any{}, 0 // no token to read: not kept
			}
		}
		pc := &decodedClaims{toolpolicy.DecodeClaims(raw), len(raw)}
		p.policyClaims.Store(pc)
		return pc.claims, pc.size
	}
	return c
}

// decodedClaims are a token's claims decoded for the policy, and the size
// of their JSON.
type decodedClaims struct {
	claims map[string]any
	size   int
}

// jwtPayload is the decoded claims segment of a compact JWS the Verifier
// has verified; nil when it has none.
func jwtPayload(token string) []byte {
	_, rest, ok := strings.Cut(token, ".")
	seg, _, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return nil
	}
	return b
}

// applyPolicy applies the rate limits, the injections and the rules to the
// requests of body, in that order (so the rules read the arguments as they
// are forwarded). It reports whether the request goes on; when not, the
// answer is written and every request audited. With injected arguments,
// r.Body becomes the rewritten body.
func (f *MCPFilter) applyPolicy(w http.ResponseWriter, r *http.Request, p *Principal, c *toolpolicy.Caller, start time.Time, body []byte, reqs []*rpcRequest) bool {
	if f.limits != nil {
		keys := toolpolicy.Keys{Subject: p.Subject, Client: p.ClientID}
		if f.tenantClaim != "" {
			keys.Tenant = c.Claim(f.tenantClaim)
		} else {
			keys.Tenant = c.Claim("tenant")
		}
		for _, q := range reqs {
			if q.response {
				continue
			}
			if ref := f.limits.Take(keys, q.method, q.name); ref != nil {
				secs := int64(math.Ceil(ref.RetryAfter.Seconds()))
				w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
				msg := "Too many requests: retry after " + strconv.FormatInt(max(secs, 1), 10) + " s."
				f.refusePolicy(w, r, p, start, body, reqs, http.StatusTooManyRequests, ErrCodeRateLimited, AuditRateLimited,
					map[*rpcRequest]string{q: msg}, map[*rpcRequest]int{q: ref.Limit}, ref.Limit)
				return false
			}
		}
	}
	if f.policy == nil {
		return true
	}
	changed := false
	for _, q := range reqs {
		if q.method != "tools/call" || !f.policy.Injects(q.tool) {
			continue
		}
		vals, err := f.policy.Injected(c, q.tool)
		var msg, args []byte
		if err == nil {
			msg, args, err = injectArguments(q.msg, vals)
		}
		if err != nil {
			f.log.Info("rsmiddleware: policy injection failed; call refused", "tool", q.tool, "error", err)
			f.refusePolicy(w, r, p, start, body, reqs, http.StatusOK, ErrCodeDeniedByPolicy, AuditDeniedByPolicy,
				map[*rpcRequest]string{q: "The server's policy could not set this call's arguments for this caller."}, map[*rpcRequest]int{q: -1}, -1)
			return false
		}
		q.msg, q.rawArgs, changed = msg, args, true
		if q.args, err = ArgumentsDigest(args); err != nil {
			f.refusePolicy(w, r, p, start, body, reqs, http.StatusOK, ErrCodeDeniedByPolicy, AuditDeniedByPolicy,
				map[*rpcRequest]string{q: toolpolicy.DefaultMessage}, map[*rpcRequest]int{q: -1}, -1)
			return false
		}
	}
	var denied map[*rpcRequest]string
	var rules map[*rpcRequest]int
	first := -1
	for _, q := range reqs {
		if q.response || !f.policy.HasRules() {
			continue
		}
		d := f.policy.Check(c, q.method, q.name, q.rawArgs)
		if d.Allowed {
			continue
		}
		if d.Err != nil {
			f.log.Info("rsmiddleware: policy rule did not evaluate to true", "rule", d.Rule, "method", q.method, "error", d.Err)
		}
		if denied == nil {
			denied, rules, first = map[*rpcRequest]string{}, map[*rpcRequest]int{}, d.Rule
		}
		denied[q], rules[q] = d.Message, d.Rule
	}
	if denied != nil {
		f.refusePolicy(w, r, p, start, body, reqs, http.StatusOK, ErrCodeDeniedByPolicy, AuditDeniedByPolicy, denied, rules, first)
		return false
	}
	if changed {
		nb := reqs[0].msg
		if isBatch(body) {
			parts := make([]json.RawMessage, len(reqs))
			for i, q := range reqs {
				parts[i] = q.msg
			}
			nb, _ = json.Marshal(parts)
		}
		r.Body = newBufferedBody(nb, false, r.Body)
		r.ContentLength = int64(len(nb))
		r.Header.Del("Content-Length")
	}
	return true
}

// refusePolicy answers a body the policy or a rate limit refuses: each
// request with an id gets a JSON-RPC error (code), with its own message
// when msgs has one, notRunText otherwise; a body without such a request
// gets one error with id null and status 403 when it was 200 (MCP
// Streamable HTTP: a notification or response that is not accepted gets
// an HTTP error status). Every message is audited with result and its
// rule (or the first one's).
func (f *MCPFilter) refusePolicy(w http.ResponseWriter, r *http.Request, p *Principal, start time.Time, body []byte,
	reqs []*rpcRequest, status, code int, result string, msgs map[*rpcRequest]string, rules map[*rpcRequest]int, first int) {
	var answers []json.RawMessage
	firstMsg := notRunText
	for _, q := range reqs {
		if m, ok := msgs[q]; ok && firstMsg == notRunText {
			firstMsg = m
		}
		if q.key == "" || q.response {
			continue
		}
		m, ok := msgs[q]
		if !ok {
			m = notRunText
		}
		answers = append(answers, rpcErrorBody(q.id, code, m))
	}
	var out []byte
	switch {
	case len(answers) == 0:
		if status == http.StatusOK {
			status = http.StatusForbidden
		}
		out = rpcErrorBody("null", code, firstMsg)
	case isBatch(body):
		out, _ = json.Marshal(answers)
	default:
		out = answers[0]
	}
	if f.audit != nil {
		base := f.baseEvent(r, p, inboundToken(r.Context()), start)
		fw := &filterWriter{f: f, start: start, base: base}
		for _, q := range reqs {
			rule, ok := rules[q]
			if !ok {
				rule = first
			}
			fw.base.Rule = rule
			fw.emit(q, result, code, false, status)
		}
	}
	writeRPCAnswer(w, status, out)
}

// injectArguments returns the JSON-RPC message msg (a tools/call) with the
// members of vals set in params.arguments, replacing what was sent, and
// the new arguments. A member the client named twice is one after it, the
// one set.
func injectArguments(msg []byte, vals map[string]any) (newMsg, args []byte, err error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		return nil, nil, err
	}
	var params map[string]json.RawMessage
	if err := json.Unmarshal(m["params"], &params); err != nil {
		return nil, nil, err
	}
	a := map[string]json.RawMessage{}
	if raw := params["arguments"]; len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, nil, err
		}
	}
	for k, v := range vals {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, nil, err
		}
		a[k] = b
	}
	if args, err = json.Marshal(a); err != nil {
		return nil, nil, err
	}
	params["arguments"] = args
	if m["params"], err = json.Marshal(params); err != nil {
		return nil, nil, err
	}
	newMsg, err = json.Marshal(m)
	return newMsg, args, err
}

// mirrorsBody reports whether the Mcp-Method and Mcp-Name headers of a
// stateless POST match its body (checkMirroredHeaders).
func mirrorsBody(r *http.Request, body []byte) bool {
	calls, err := peekJSONRPC(body)
	return err == nil && checkMirroredHeaders(r, body, calls)
}

// refuseMismatch answers a stateless request whose mirrored headers differ
// from its body as the Middleware does (400, ErrCodeHeaderMismatch with the
// request's id), each message audited AuditInvalid.
func (f *MCPFilter) refuseMismatch(w http.ResponseWriter, r *http.Request, p *Principal, start time.Time, body []byte, reqs []*rpcRequest) {
	if f.audit != nil {
		fw := &filterWriter{f: f, start: start, base: f.baseEvent(r, p, inboundToken(r.Context()), start)}
		for _, q := range reqs {
			fw.emit(q, AuditInvalid, 0, false, http.StatusBadRequest)
		}
	}
	writeRPCAnswer(w, http.StatusBadRequest, errorAnswer(body, ErrCodeHeaderMismatch, "Header mismatch: Mcp-Method and Mcp-Name must mirror the request body"))
}
