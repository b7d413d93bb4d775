package rsmiddleware

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcpauth/mcpauth/toolpolicy"
)

// ErrCodeApprovalUnavailable is the JSON-RPC error of a tools/call that
// needs a person's approval when the authorization server could not be
// asked, or did not answer (JSON-RPC 2.0 §5.1, implementation-defined
// range): the call is not forwarded (fail closed).
const ErrCodeApprovalUnavailable = -32034

// Results of tools/call requests held for a person's approval
// (AuditEvent.Result); AuditEvent.ApprovalID names the approval.
const (
	// AuditApprovalPending: answered with the approval page's URL
	// (WriteURLRequired); not forwarded.
	AuditApprovalPending = "approval_pending"
	// AuditApprovalDenied: the person denied the call on the page; answered
	// with a tool result isError, not forwarded.
	AuditApprovalDenied = "approval_denied"
	// AuditApprovalUnavailable: the AS could not be asked or refused the
	// question; answered ErrCodeApprovalUnavailable, not forwarded.
	AuditApprovalUnavailable = "approval_unavailable"
)

// MaxApprovalRequestBytes is the most the question to the AS may hold
// (the approval protocol's limit): a call whose arguments make it larger
// cannot be approved and is refused.
const MaxApprovalRequestBytes = 64 << 10

// MaxApprovalTTL is the longest approval.ttl: the AS keeps an approval at
// most this long.
const MaxApprovalTTL = time.Hour

// DefaultApprovalTTL is the ttl of ApprovalConfig's zero value.
const DefaultApprovalTTL = 5 * time.Minute

// ApprovalConfig configures an Approval.
type ApprovalConfig struct {
	// Tools are globs over tool names (toolpolicy.Glob: * stands for any
	// run of characters): a tools/call of a matching tool runs only once a
	// person approved it, with exactly its arguments. Required.
	Tools []string
	// TTL is how long a pending or approved call stays usable at the AS,
	// whole seconds, at most MaxApprovalTTL. Zero value: DefaultApprovalTTL.
	TTL time.Duration
	// Endpoint is the AS's approvals endpoint, {issuer}/approvals.
	// Required.
	Endpoint string
	// ClientID and ClientSecret authenticate the question
	// (client_secret_basic, RFC 6749 §2.3.1): a confidential client of the
	// AS listed in approval_clients of the resource. Required.
	ClientID, ClientSecret string
	// HTTPClient asks the AS; it does not follow redirects. Zero value: a
	// client with a 10 s timeout.
	HTTPClient *http.Client
}

// Approval holds the tools/call requests of the tools it names until a
// person approves each, on the authorization server's page
// ({issuer}/approve/{id}), with exactly its arguments. For each such call
// MCPFilter asks the AS (POST {issuer}/approvals, authenticated as the
// configured client, with the call's access token, tool, arguments and
// ttl); the AS binds the approval to the token's subject, client and
// audience, the tool and the SHA-256 of the arguments' RFC 8785 canonical
// form, and answers approved (the approval is used now, once), pending
// (with the page's URL) or denied. It is safe for concurrent use.
type Approval struct {
	tools    []string
	ttl      int64
	endpoint string
	cred     ClientCredentials
	client   *http.Client
}

// NewApproval checks cfg and returns its Approval.
func NewApproval(cfg ApprovalConfig) (*Approval, error) {
	if len(cfg.Tools) == 0 {
		return nil, errors.New("approval.tools: at least one glob is required")
	}
	for i, g := range cfg.Tools {
		if g == "" {
			return nil, fmt.Errorf("approval.tools[%d]: an empty glob", i)
		}
	}
	ttl := cfg.TTL
	if ttl == 0 {
		ttl = DefaultApprovalTTL
	}
	if ttl < time.Second || ttl > MaxApprovalTTL || ttl%time.Second != 0 {
		return nil, fmt.Errorf("approval.ttl: %v must be whole seconds from 1s to %v", cfg.TTL, MaxApprovalTTL)
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return nil, fmt.Errorf("approval: endpoint %q must be an http(s) URL without credentials or fragment", cfg.Endpoint)
	}
	if cfg.ClientID == "" || cfg.ClientSecret == "" {
		return nil, errors.New("approval: client_id and client_secret are required")
	}
	return &Approval{tools: cfg.Tools, ttl: int64(ttl / time.Second), endpoint: cfg.Endpoint,
		cred: ClientCredentials{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret}, client: noRedirects(cfg.HTTPClient)}, nil
}

// Requires reports whether a tools/call of tool needs a person's approval.
func (a *Approval) Requires(tool string) bool {
	for _, g := range a.tools {
		if toolpolicy.Glob(g, tool) {
			return true
		}
	}
	return false
}

// Approval statuses of the AS's answer.
const (
	approvalApproved = "approved"
	approvalPending  = "pending"
	approvalDenied   = "denied"
)

// approvalAnswer is the AS's answer to one question.
type approvalAnswer struct {
	Status      string `json:"status"`
	ApprovalID  string `json:"approval_id"`
	ApprovalURI string `json:"approval_uri"`
	ExpiresIn   int64  `json:"expires_in"`
}

// approvalError is a failure to get an answer: Reason is said to the
// client, the error is logged.
type approvalError struct {
	Reason string
	Err    error
}

func (e *approvalError) Error() string {
	return "rsmiddleware: approval: " + e.Reason + ": " + e.Err.Error()
}

// ask asks the AS about a call of tool with the canonical arguments args,
// made with token.
func (a *Approval) ask(ctx context.Context, token, tool string, args []byte) (approvalAnswer, error) {
	body, _ := json.Marshal(struct {
		Token     string          `json:"token"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
		TTL       int64           `json:"ttl"`
	}{token, tool, args, a.ttl})
	if len(body) > MaxApprovalRequestBytes {
		return approvalAnswer{}, &approvalError{"its arguments are too large to be shown for approval (at most " + strconv.Itoa(MaxApprovalRequestBytes>>10) + " KiB)", errors.New("request too large")}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.endpoint, bytes.NewReader(body))
	if err != nil {
		return approvalAnswer{}, &approvalError{"the authorization server could not be asked", err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(a.cred.ClientID), url.QueryEscape(a.cred.ClientSecret))
	resp, err := a.client.Do(req)
	if err != nil {
		return approvalAnswer{}, &approvalError{"the authorization server could not be reached", err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxApprovalRequestBytes+1))
	if err != nil || len(raw) > MaxApprovalRequestBytes {
		return approvalAnswer{}, &approvalError{"the authorization server's answer could not be read", fmt.Errorf("status %d: %v", resp.StatusCode, err)}
	}
	if resp.StatusCode != http.StatusOK {
		var oe struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		_ = json.Unmarshal(raw, &oe)
		reason := "the authorization server refused the question (HTTP " + strconv.Itoa(resp.StatusCode) + ")"
		switch oe.Error {
		case "invalid_token":
			reason = "the authorization server does not take the access token for approvals (it is no longer active, or names no person to ask)"
		case "invalid_client", "unauthorized_client":
			reason = "the gateway is not allowed to ask the authorization server for approvals (" + oe.Error + ")"
		case "invalid_request":
			reason = "the authorization server refused the question (invalid_request)"
		}
		return approvalAnswer{}, &approvalError{reason, fmt.Errorf("status %d: %s: %s", resp.StatusCode, oe.Error, oe.Description)}
	}
	var ans approvalAnswer
	if err := json.Unmarshal(raw, &ans); err != nil {
		return approvalAnswer{}, &approvalError{"the authorization server's answer could not be read", err}
	}
	bad := ans.ApprovalID == ""
	switch ans.Status {
	case approvalApproved, approvalDenied:
	case approvalPending:
		u, err := url.Parse(ans.ApprovalURI)
		bad = bad || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil
	default:
		bad = true
	}
	if bad {
		return approvalAnswer{}, &approvalError{"the authorization server's answer could not be read", fmt.Errorf("answer %q", raw)}
	}
	return ans, nil
}

// approvalArgsProblem says why a call's arguments cannot be approved, ""
// when they can: the arguments the person sees (the AS renders their
// canonical form) must be the ones the MCP server reads, so members named
// twice (one parser keeps the first, another the last), invalid UTF-8 and
// unpaired UTF-16 surrogate escapes (decoders replace them differently)
// are refused, and arguments must be an object.
func approvalArgsProblem(args []byte) string {
	t := trimJSONSpace(args)
	if len(t) == 0 || string(t) == "null" {
		return ""
	}
	if t[0] != '{' {
		return "its arguments are not a JSON object"
	}
	if !utf8.Valid(t) {
		return "its arguments are not valid UTF-8"
	}
	if loneSurrogate(t) {
		return "its arguments hold an unpaired UTF-16 surrogate escape"
	}
	if duplicateKeys(t) {
		return "its arguments name a member twice in one object"
	}
	return ""
}

// loneSurrogate reports whether a string of the valid JSON text v holds a
// \uD800-\uDFFF escape that is not a high surrogate followed by a low one.
func loneSurrogate(v []byte) bool {
	hex4 := func(i int) (int, bool) {
		if i+6 > len(v) || v[i] != '\\' || v[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(v[i+2:i+6]), 16, 16)
		return int(n), err == nil
	}
	in := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			in = !in
		case in && c == '\\':
			n, ok := hex4(i)
			if !ok {
				i++ // a two-character escape
				continue
			}
			switch {
			case n >= 0xD800 && n < 0xDC00:
				lo, ok := hex4(i + 6)
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return true
				}
				i += 11
			case n >= 0xDC00 && n <= 0xDFFF:
				return true
			default:
				i += 5
			}
		}
	}
	return false
}

// duplicateKeys reports whether an object of the valid JSON text v, at
// any depth, names a member twice (names compared decoded).
func duplicateKeys(v []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	type frame struct {
		keys   map[string]bool
		object bool
		key    bool // the next string token is a name
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false // the end (v is valid JSON)
		}
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.object && top.key {
				if d, ok := tok.(json.Delim); ok && d == '}' {
					stack = stack[:len(stack)-1]
					continue
				}
				k, _ := tok.(string)
				if top.keys[k] {
					return true
				}
				top.keys[k] = true
				top.key = false
				continue
			}
			if top.object {
				top.key = true // this token is the member's value
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{keys: map[string]bool{}, object: true, key: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// heldCall is MCPFilter's answer to a tools/call it does not forward
// (yet): answer is the JSON-RPC Response (nil for a notification).
type heldCall struct {
	answer   []byte
	result   string
	code     int
	isError  bool
	approval string
}

// approveCalls asks the AS about each tools/call of reqs that needs a
// person's approval, one at a time, each on its own. The calls it may
// forward (approved: the approval is now used) are marked with their
// approval; the others are returned with their answers.
func (f *MCPFilter) approveCalls(r *http.Request, reqs []*rpcRequest) map[*rpcRequest]*heldCall {
	var held map[*rpcRequest]*heldCall
	hold := func(q *rpcRequest, h *heldCall) {
		if held == nil {
			held = map[*rpcRequest]*heldCall{}
		}
		if q.key == "" {
			h.answer = nil
		}
		held[q] = h
	}
	token := inboundToken(r.Context())
	for _, q := range reqs {
		if q.response || q.method != "tools/call" || !f.approval.Requires(q.tool) {
			continue
		}
		name := strconv.Quote(q.tool)
		if q.key == "" {
			// A tools/call without an id (a notification) could never be
			// answered with the page: not asked about, not run.
			hold(q, &heldCall{result: AuditInvalid})
			continue
		}
		if why := approvalArgsProblem(q.rawArgs); why != "" {
			hold(q, &heldCall{answer: rpcErrorBody(q.id, codeInvalidParams, "Invalid params: the call of tool "+name+" needs a person's approval, and "+why+"."),
				result: AuditInvalid, code: codeInvalidParams})
			continue
		}
		args := []byte("{}")
		if t := trimJSONSpace(q.rawArgs); len(t) > 0 && string(t) != "null" {
			var err error
			if args, err = CanonicalJSON(t); err != nil {
				hold(q, &heldCall{answer: rpcErrorBody(q.id, codeInvalidParams, "Invalid params: arguments without a canonical JSON form (RFC 8785)"),
					result: AuditInvalid, code: codeInvalidParams})
				continue
			}
		}
		ans, err := f.approval.ask(r.Context(), token, q.tool, args)
		if err != nil {
			reason := "the authorization server could not be asked"
			var ae *approvalError
			if errors.As(err, &ae) {
				reason = ae.Reason
			}
			f.log.Warn("rsmiddleware: approval could not be asked; call refused", "tool", q.tool, "error", err)
			hold(q, &heldCall{answer: rpcErrorBody(q.id, ErrCodeApprovalUnavailable, "The call of tool "+name+" needs a person's approval, which could not be obtained: "+reason+". It was not run."),
				result: AuditApprovalUnavailable, code: ErrCodeApprovalUnavailable})
			continue
		}
		switch ans.Status {
		case approvalApproved:
			q.approval = ans.ApprovalID
		case approvalPending:
			u := URLRequired{URL: ans.ApprovalURI, ElicitationID: ans.ApprovalID,
				Message: "The call of tool " + name + " needs your approval."}
			hold(q, &heldCall{answer: urlRequiredBody(r.Context(), "tools/call", q.id, u), result: AuditApprovalPending, approval: ans.ApprovalID})
		case approvalDenied:
			hold(q, &heldCall{answer: toolErrorBody(q.id, "A person denied this call of tool "+name+" on the approval page. It was not run."),
				result: AuditApprovalDenied, isError: true, approval: ans.ApprovalID})
		}
	}
	return held
}

// toolErrorBody is a JSON-RPC Response holding a CallToolResult with
// isError and one text (MCP server/tools, "Error Handling").
func toolErrorBody(id, text string) []byte {
	if id == "" {
		id = "null"
	}
	type textContent struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type result struct {
		Content []textContent `json:"content"`
		IsError bool          `json:"isError"`
	}
	body, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  result          `json:"result"`
	}{"2.0", json.RawMessage(id), result{[]textContent{{"text", text}}, true}})
	return body
}

// holdCalls applies the Approval to the requests of body: it reports the
// requests that go on (all of reqs when none is held) and, when some are
// held, their answers in order, having audited them. When nothing goes on
// the answer is written and ok is false. Otherwise, when some were held,
// r's body becomes the batch of the others.
func (f *MCPFilter) holdCalls(w http.ResponseWriter, r *http.Request, p *Principal, start time.Time, body []byte, reqs []*rpcRequest) (rest []*rpcRequest, answers [][]byte, ok bool) {
	held := f.approveCalls(r, reqs)
	if len(held) == 0 {
		return reqs, nil, true
	}
	var fw *filterWriter
	if f.audit != nil {
		fw = &filterWriter{f: f, start: start, base: f.baseEvent(r, p, inboundToken(r.Context()), start)}
	}
	for _, q := range reqs {
		h, isHeld := held[q]
		if !isHeld {
			rest = append(rest, q)
			continue
		}
		if h.answer != nil {
			answers = append(answers, h.answer)
		}
		if fw != nil {
			q.approval = h.approval
			fw.emit(q, h.result, h.code, h.isError, http.StatusOK)
		}
	}
	if len(rest) == 0 {
		var out []byte
		switch {
		case len(answers) == 0:
			// Only notifications: nothing to answer them with (JSON-RPC
			// 2.0 §4.1), and they were not run.
			w.WriteHeader(http.StatusAccepted)
			return nil, nil, false
		case isBatch(body):
			out = joinAnswers(answers)
		default:
			out = answers[0]
		}
		writeRPCAnswer(w, http.StatusOK, out)
		return nil, nil, false
	}
	msgs := make([][]byte, len(rest))
	for i, q := range rest {
		msgs[i] = q.msg
	}
	nb := joinAnswers(msgs)
	r.Body = newBufferedBody(nb, false, r.Body)
	r.ContentLength = int64(len(nb))
	r.Header.Del("Content-Length")
	return rest, answers, true
}

// joinAnswers is the JSON array of msgs.
func joinAnswers(msgs [][]byte) []byte {
	var b strings.Builder
	b.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m)
	}
	b.WriteByte(']')
	return []byte(b.String())
}
