package rsmiddleware

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
)

// URLRequired is a page the person must open before a request can succeed:
// MCP 2025-11-25 URL-mode elicitation (error -32042, URLElicitationRequiredError;
// client/elicitation, "URL Elicitation Required Error").
type URLRequired struct {
	URL           string // absolute https/http URL of the page
	ElicitationID string // stable id of what is awaited (the approval id, the connection id + person)
	Message       string // one sentence for the person
}

// ErrCodeURLElicitationRequired is the JSON-RPC error code of MCP 2025-11-25
// (client/elicitation, "URL Elicitation Required Error").
const ErrCodeURLElicitationRequired = -32042

// MetaClientCapabilities is the params._meta member in which a request of
// MCP 2026-07-28 carries its client's capabilities (declared per request
// rather than once at initialization).
const MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"

// urlElicitKey is the context key of URLElicitationDeclared.
type urlElicitKey struct{}

// URLElicitationDeclared reports whether the client of the request in ctx declared
// URL-mode elicitation: in its initialize request (capabilities.elicitation.url, for the
// MCP session of the request), or in the request's own _meta (the per-request client
// capabilities of the 2026-07-28 revision, MetaClientCapabilities). MCPFilter records
// this for every request it passes on; unknown is false.
func URLElicitationDeclared(ctx context.Context) bool {
	v, _ := ctx.Value(urlElicitKey{}).(bool)
	return v
}

// withURLElicitation returns ctx recording that its request's client
// declared URL-mode elicitation.
func withURLElicitation(ctx context.Context) context.Context {
	return context.WithValue(ctx, urlElicitKey{}, true)
}

// WriteURLRequired answers the JSON-RPC request whose id is id (raw JSON) with u:
// a JSON-RPC error -32042 {data: {elicitations: [{mode:"url", elicitationId, url,
// message}]}} when URLElicitationDeclared(r.Context()), otherwise, for tools/call
// (method given), a CallToolResult {isError: true, content:[{type:"text", text: message +
// " Open " + URL + " and then try again."}]} (MCP 2025-11-25 server/tools, "Error
// Handling": an error the model and the person can read), and for other methods the
// -32042 error. The answer is one application/json JSON-RPC Response, 200, as
// rsmiddleware's other JSON-RPC answers are (a Streamable HTTP client accepts both
// application/json and text/event-stream). An id that is not JSON is answered as id null.
func WriteURLRequired(w http.ResponseWriter, r *http.Request, method string, id json.RawMessage, u URLRequired) {
	writeRPCAnswer(w, http.StatusOK, urlRequiredBody(r.Context(), method, string(id), u))
}

// urlRequiredBody is the JSON-RPC Response WriteURLRequired writes.
func urlRequiredBody(ctx context.Context, method, id string, u URLRequired) []byte {
	if id == "" || !json.Valid([]byte(id)) {
		id = "null"
	}
	type textContent struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if method == "tools/call" && !URLElicitationDeclared(ctx) {
		body, _ := json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  struct {
				Content []textContent `json:"content"`
				IsError bool          `json:"isError"`
			} `json:"result"`
		}{JSONRPC: "2.0", ID: json.RawMessage(id), Result: struct {
			Content []textContent `json:"content"`
			IsError bool          `json:"isError"`
		}{[]textContent{{"text", urlRequiredText(u)}}, true}})
		return body
	}
	type elicitation struct {
		Mode          string `json:"mode"`
		ElicitationID string `json:"elicitationId"`
		URL           string `json:"url"`
		Message       string `json:"message"`
	}
	type errData struct {
		Elicitations []elicitation `json:"elicitations"`
	}
	type rpcErr struct {
		Code    int     `json:"code"`
		Message string  `json:"message"`
		Data    errData `json:"data"`
	}
	// A client without URL elicitation (answered with the error for a
	// method other than tools/call, such as initialize) shows only the
	// message: it names the URL, so the person still learns where to go.
	msg := u.Message
	if !URLElicitationDeclared(ctx) {
		msg = urlRequiredText(u)
	} else if msg == "" {
		msg = "URL elicitation required"
	}
	body, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcErr          `json:"error"`
	}{"2.0", json.RawMessage(id), rpcErr{ErrCodeURLElicitationRequired, msg,
		errData{[]elicitation{{"url", u.ElicitationID, u.URL, u.Message}}}}})
	return body
}

// urlRequiredText is the text of the tool result for a client without URL
// elicitation.
func urlRequiredText(u URLRequired) string {
	t := u.Message
	if t != "" {
		t += " "
	}
	return t + "Open " + u.URL + " and then try again."
}

// declaresURLElicitation reports whether the JSON-RPC request msg declares
// URL-mode elicitation: an initialize whose params.capabilities.elicitation
// has a url object (MCP 2025-11-25 basic/lifecycle; an empty elicitation
// object means form mode only), or a request whose params._meta carries
// MetaClientCapabilities with one (MCP 2026-07-28).
func declaresURLElicitation(method string, msg []byte) bool {
	initialize := method == "initialize"
	if !initialize && !bytes.Contains(msg, []byte(MetaClientCapabilities)) {
		return false
	}
	type caps struct {
		Elicitation struct {
			URL json.RawMessage `json:"url"`
		} `json:"elicitation"`
	}
	var m struct {
		Params struct {
			Capabilities caps                       `json:"capabilities"`
			Meta         map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &m) != nil {
		return false
	}
	isObject := func(raw json.RawMessage) bool {
		b := trimJSONSpace(raw)
		return len(b) > 0 && b[0] == '{'
	}
	if initialize && isObject(m.Params.Capabilities.Elicitation.URL) {
		return true
	}
	raw, ok := m.Params.Meta[MetaClientCapabilities]
	if !ok {
		return false
	}
	var c caps
	return json.Unmarshal(raw, &c) == nil && isObject(c.Elicitation.URL)
}

// maxURLSessions bounds the MCP sessions whose URL elicitation declaration
// MCPFilter keeps; beyond, the oldest is forgotten (its requests then read
// as undeclared, and get the text answer).
const maxURLSessions = 100000

// urlSessions is the set of MCP session ids whose initialize declared URL
// elicitation, at most maxURLSessions, the oldest forgotten first.
type urlSessions struct {
	mu    sync.RWMutex
	ids   map[string]struct{}
	order []string // ring of the ids in ids, oldest at next
	next  int
}

func (s *urlSessions) has(id string) bool {
	if id == "" {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.ids[id]
	return ok
}

func (s *urlSessions) add(id string) {
	if id == "" || len(id) > 1024 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids = map[string]struct{}{}
	}
	if _, ok := s.ids[id]; ok {
		return
	}
	if len(s.order) < maxURLSessions {
		s.order = append(s.order, id)
	} else {
		delete(s.ids, s.order[s.next])
		s.order[s.next] = id
		s.next = (s.next + 1) % maxURLSessions
	}
	s.ids[id] = struct{}{}
}

// remove forgets id (the client ended its session with DELETE); its slot in
// the ring is reused when it comes round.
func (s *urlSessions) remove(id string) {
	if id == "" {
		return
	}
	s.mu.Lock()
	delete(s.ids, id)
	s.mu.Unlock()
}
