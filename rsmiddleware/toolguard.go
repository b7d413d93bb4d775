package rsmiddleware

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// JSON-RPC error codes of tools/call requests MCPFilter refuses for the
// tool's definition (JSON-RPC 2.0 §5.1, implementation-defined range).
const (
	// ErrCodeToolAwaitsApproval: the tool's definition is not the pinned
	// one (ToolPins), or could not be checked.
	ErrCodeToolAwaitsApproval = -32032
	// ErrCodeToolWithheld: the tool's definition matched a screening
	// pattern and Screening hides such tools.
	ErrCodeToolWithheld = -32033
)

// Events of tool definitions MCPFilter records (AuditEvent.Event), one per
// tools/list entry it decides on; Method is "tools/list".
const (
	// EventToolUnpinned: a definition of a tool the pins file does not
	// name; ToolSHA256 is its digest.
	EventToolUnpinned = "tool.unpinned"
	// EventToolDefinitionChanged: a definition whose digest (ToolSHA256)
	// differs from the pinned one (PinnedSHA256).
	EventToolDefinitionChanged = "tool.definition_changed"
	// EventToolSuspicious: a definition a screening pattern matched;
	// Pattern names the pattern, never the text.
	EventToolSuspicious = "tool.suspicious"
)

// Results of tool definitions and of calls refused for them.
const (
	// AuditHidden: the tools/list entry was left out.
	AuditHidden = "hidden"
	// AuditAwaitingApproval: a tools/call refused because the tool's
	// definition is not approved (ErrCodeToolAwaitsApproval).
	AuditAwaitingApproval = "awaiting_approval"
	// AuditWithheld: a tools/call refused because screening hides the tool
	// (ErrCodeToolWithheld).
	AuditWithheld = "withheld"
)

// toolGuard holds, per tool name, the last definition seen in a tools/list
// answer, for deciding its calls.
type toolGuard struct {
	pins   *ToolPins
	screen *Screening
	seen   sync.Map // name -> *seenTool
	// seenCount counts the names in seen, at most maxSeen.
	seenCount atomic.Int64
	// fetchMu makes the calls of unseen tools wait for one tools/list of
	// the filter's own; lastFetch is when it last began (unix
	// nanoseconds).
	fetchMu   sync.Mutex
	lastFetch atomic.Int64

	mu       sync.Mutex
	verdicts map[[sha256.Size]byte]seenTool
}

// forget drops every definition seen: the server said its tool list
// changed (notifications/tools/list_changed), so the next call of each tool
// is decided on a new listing.
func (g *toolGuard) forget() {
	g.seen.Clear()
	g.seenCount.Store(0)
	g.lastFetch.Store(0)
}

type seenTool struct {
	sha     string
	pattern string // the screening pattern it matched, "" for none
}

// maxSeen bounds the tool names whose definitions are kept.
const maxSeen = 10000

// maxVerdicts bounds the definitions whose digest and screening verdict
// are kept; beyond, the cache starts again empty.
const maxVerdicts = 4096

// verdict is the digest and the screening pattern of one tools/list entry
// as sent, by the SHA-256 of its bytes: both are functions of them, and a
// server lists the same entries again and again.
func (g *toolGuard) verdict(raw []byte, fields map[string]json.RawMessage) (seenTool, bool) {
	key := sha256.Sum256(raw)
	g.mu.Lock()
	v, ok := g.verdicts[key]
	g.mu.Unlock()
	if ok {
		return v, true
	}
	_, sha, err := ToolDefinition(fields)
	if err != nil {
		return seenTool{}, false
	}
	v = seenTool{sha: sha}
	if g.screen != nil {
		v.pattern = g.screen.Match(fields)
	}
	g.mu.Lock()
	if len(g.verdicts) >= maxVerdicts {
		clear(g.verdicts)
	}
	g.verdicts[key] = v
	g.mu.Unlock()
	return v, true
}

// guardEntry decides a tools/list entry (raw, decoded as fields) by its
// definition: it reports whether the entry may be listed, and records the
// definition for the tool's calls and its events in the audit (fw may be
// nil).
func (f *MCPFilter) guardEntry(raw []byte, fields map[string]json.RawMessage, fw *filterWriter) bool {
	g := f.guard
	var name string
	if json.Unmarshal(fields["name"], &name) != nil || name == "" {
		return false
	}
	v, ok := g.verdict(raw, fields)
	if !ok {
		g.seen.Delete(name)
		return false
	}
	st := &v
	sha := st.sha
	if _, had := g.seen.Swap(name, st); !had && g.seenCount.Add(1) > maxSeen {
		// A server listing ever new names: start again, as after
		// list_changed, rather than grow without bound.
		g.forget()
	}
	if st.pattern != "" {
		res := AuditOK
		if g.screen.Hides() {
			res = AuditHidden
		}
		fw.emitTool(EventToolSuspicious, name, res, sha, "", st.pattern)
		if g.screen.Hides() {
			return false // neither learnt nor recorded as pending
		}
	}
	if g.pins == nil {
		return true
	}
	if g.pins.Pinned(name) == sha {
		return true
	}
	canonical, _, err := ToolDefinition(fields)
	if err != nil {
		return false
	}
	ok, pinned := g.pins.Listed(name, sha, canonical)
	if ok {
		return true
	}
	ev := EventToolUnpinned
	if pinned != "" {
		ev = EventToolDefinitionChanged
	}
	fw.emitTool(ev, name, AuditHidden, sha, pinned, "")
	return false
}

// emitTool records an event of a tool definition.
func (fw *filterWriter) emitTool(event, tool, result, sha, pinned, pattern string) {
	if fw == nil || fw.f.audit == nil {
		return
	}
	e := fw.base
	e.Event, e.Method, e.Tool, e.Result, e.Status = event, "tools/list", tool, result, fw.status
	if e.Status == 0 {
		e.Status = http.StatusOK
	}
	e.ToolSHA256, e.PinnedSHA256, e.Pattern = sha, pinned, pattern
	e.bound()
	e.Latency = fw.f.now().Sub(fw.start)
	fw.f.audit(e)
}

// refetchInterval is the least time between two tools/list requests the
// filter makes itself for calls of tools it has not seen listed.
const refetchInterval = time.Second

// guardCalls decides the tools/call requests of reqs by their tools'
// definitions. A tool not yet seen in a tools/list answer is looked up by
// a tools/list of the filter's own, sent through next in the caller's
// session (at most once per refetchInterval); a tool still unseen, whose
// definition is not the pinned one, or that screening hides, is refused:
// the call is never forwarded. It reports whether the request goes on;
// when not, the answer is written and every request audited.
func (f *MCPFilter) guardCalls(w http.ResponseWriter, r *http.Request, p *Principal, start time.Time, body []byte, reqs []*rpcRequest, next http.Handler) bool {
	var msgs map[*rpcRequest]string
	code, result := 0, ""
	fetched := false
	for _, q := range reqs {
		if q.method != "tools/call" || q.response {
			continue
		}
		v, ok := f.guard.seen.Load(q.tool)
		if !ok && !fetched {
			fetched = true
			g := f.guard
			g.fetchMu.Lock()
			// A listing that ended while this call waited may have the tool.
			if v, ok = g.seen.Load(q.tool); !ok {
				if now := f.now().UnixNano(); now-g.lastFetch.Load() >= int64(refetchInterval) {
					g.lastFetch.Store(now)
					f.fetchTools(r, p, start, next)
					v, ok = g.seen.Load(q.tool)
				}
			}
			g.fetchMu.Unlock()
		}
		var c int
		var m, res string
		switch st, _ := v.(*seenTool); {
		case !ok:
			c, res = ErrCodeToolAwaitsApproval, AuditAwaitingApproval
			m = "Tool " + strconv.Quote(q.tool) + " is not offered: its definition is not in the server's tool list, so it cannot be checked against the approved ones."
		case st.pattern != "" && f.guard.screen.Hides():
			c, res = ErrCodeToolWithheld, AuditWithheld
			m = "Tool " + strconv.Quote(q.tool) + " is withheld: its definition matched the gateway's screening for instructions to the model."
		case f.guard.pins != nil && f.guard.pins.Pinned(q.tool) != st.sha:
			c, res = ErrCodeToolAwaitsApproval, AuditAwaitingApproval
			m = "Tool " + strconv.Quote(q.tool) + " awaits approval: its definition is not the approved one (changed, or never approved)."
		default:
			continue
		}
		if msgs == nil {
			msgs, code, result = map[*rpcRequest]string{}, c, res
		}
		msgs[q] = m
	}
	if msgs == nil {
		return true
	}
	f.refusePolicy(w, r, p, start, body, reqs, http.StatusOK, code, result, msgs, nil, 0)
	return false
}

// maxFetchPages bounds the pages of the filter's own tools/list.
const maxFetchPages = 20

// fetchTools sends tools/list requests through next, as r's session,
// following nextCursor, and decides every entry (guardEntry).
func (f *MCPFilter) fetchTools(r *http.Request, p *Principal, start time.Time, next http.Handler) {
	fw := &filterWriter{f: f, p: p, start: start}
	if f.audit != nil {
		fw.base = f.baseEvent(r, p, inboundToken(r.Context()), start)
	}
	cursor := json.RawMessage(nil)
	for page := 0; page < maxFetchPages; page++ {
		params := map[string]json.RawMessage{}
		if cursor != nil {
			params["cursor"] = cursor
		}
		pb, _ := json.Marshal(params)
		body := []byte(`{"jsonrpc":"2.0","id":"mcpauth-tools-list","method":"tools/list","params":` + string(pb) + `}`)
		req := r.Clone(r.Context())
		req.Body = newBufferedBody(body, false, http.NoBody)
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Length", strconv.Itoa(len(body)))
		req.Header.Del("Idempotency-Key")
		if req.Header.Get(MethodHeader) != "" {
			req.Header.Set(MethodHeader, "tools/list")
		}
		req.Header.Del(NameHeader)
		rec := &recorder{h: http.Header{}, max: f.maxResp}
		next.ServeHTTP(rec, req)
		result := rec.result(`"mcpauth-tools-list"`)
		if result == nil {
			f.log.Warn("rsmiddleware: the tools/list made to check a call's tool got no result", "status", rec.status)
			return
		}
		var res struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor json.RawMessage   `json:"nextCursor"`
		}
		if json.Unmarshal(result, &res) != nil {
			return
		}
		fw.status = http.StatusOK
		for _, e := range res.Tools {
			var fields map[string]json.RawMessage
			if json.Unmarshal(e, &fields) == nil {
				f.guardEntry(e, fields, fw)
			}
		}
		if len(res.NextCursor) == 0 || string(res.NextCursor) == "null" {
			return
		}
		cursor = res.NextCursor
	}
}

// recorder keeps the answer of the filter's own request, up to max bytes.
type recorder struct {
	h      http.Header
	status int
	body   []byte
	max    int64
	over   bool
}

func (rc *recorder) Header() http.Header { return rc.h }
func (rc *recorder) WriteHeader(code int) {
	if rc.status == 0 && code >= 200 {
		rc.status = code
	}
}
func (rc *recorder) Write(b []byte) (int, error) {
	if rc.status == 0 {
		rc.status = http.StatusOK
	}
	if int64(len(rc.body)+len(b)) > rc.max {
		rc.over = true
		return 0, errTooLarge
	}
	rc.body = append(rc.body, b...)
	return len(b), nil
}
func (rc *recorder) Flush() {}

// result returns the result member of the JSON-RPC response with id in
// the answer (application/json, or the data of a text/event-stream
// event), or nil.
func (rc *recorder) result(id string) json.RawMessage {
	if rc.over || rc.status/100 != 2 {
		return nil
	}
	mt, _, _ := mime.ParseMediaType(rc.h.Get("Content-Type"))
	var msgs [][]byte
	switch mt {
	case "application/json":
		msgs = append(msgs, rc.body)
	case "text/event-stream":
		b := rc.body
		var sc sseScanner
		for {
			end := sc.eventEnd(b)
			if end < 0 {
				break
			}
			var data [][]byte
			forEachLine(b[:end], func(line []byte) {
				field, value, _ := bytes.Cut(line, []byte(":"))
				if string(field) == "data" {
					value, _ = bytes.CutPrefix(value, []byte(" "))
					data = append(data, value)
				}
			})
			msgs = append(msgs, bytes.Join(data, []byte("\n")))
			b, sc = b[end:], sseScanner{}
		}
	}
	for _, m := range msgs {
		var resp struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(m, &resp) == nil && string(resp.ID) == id && resp.Result != nil {
			return resp.Result
		}
	}
	return nil
}
