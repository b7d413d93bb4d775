package rsmiddleware

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// rpcCall is what the scope check needs from one JSON-RPC request.
type rpcCall struct {
	Method string
	Tool   string // params.name of a tools/call
	// Name is what the Mcp-Name header mirrors: params.name of tools/call
	// and prompts/get, params.uri of resources/read; and params.uri of
	// resources/subscribe, which Mcp-Name does not mirror but whose scopes
	// are those of the resource; "" otherwise.
	Name string
	// Ref is params.ref.type of a completion/complete ("ref/prompt" or
	// "ref/resource"), whose params.ref.name or params.ref.uri is Name:
	// completing a prompt's or a template's arguments needs its scopes.
	Ref string
}

// namedParam is the params member Mcp-Name mirrors, by method
// (MCP 2026-07-28 Streamable HTTP, standard request headers).
var namedParam = map[string]string{"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

// scopedParam is the params member whose value decides a request's scopes
// (Scopes), by method: namedParam's, and the uri of resources/subscribe
// (MCP server/resources, "Subscriptions"), so that a resource hidden from
// resources/list cannot be watched either.
var scopedParam = map[string]string{"tools/call": "name", "prompts/get": "name", "resources/read": "uri", "resources/subscribe": "uri"}

var errPeek = errors.New("rsmiddleware: unreadable JSON-RPC message")

// JSON-RPC 2.0 §5.1 error codes of bodies refused for their form.
const (
	// codeParseError: the body is not valid JSON.
	codeParseError = -32700
	// codeInvalidRequest: valid JSON that is not a JSON-RPC message (§4,
	// §5), or an empty batch (§6).
	codeInvalidRequest = -32600
	// codeInvalidParams: a request whose params do not name what its
	// method needs, or name it ambiguously.
	codeInvalidParams = -32602
)

// invalidMessage is a body, or one message of a batch, refused for its
// form, with the JSON-RPC 2.0 §5.1 code and text of the answer. It is
// errPeek to errors.Is.
type invalidMessage struct {
	code int
	text string
}

func (e *invalidMessage) Error() string        { return "rsmiddleware: " + e.text }
func (e *invalidMessage) Is(target error) bool { return target == errPeek }

var (
	errParse      = &invalidMessage{codeParseError, "Parse error"}
	errNoMessage  = &invalidMessage{codeInvalidRequest, "Invalid Request: the body is neither a JSON-RPC message nor a batch"}
	errEmptyBatch = &invalidMessage{codeInvalidRequest, "Invalid Request: an empty batch"}
)

// peekJSONRPC reads the method (and, for tools/call, the tool name) of every
// message of a JSON-RPC 2.0 body, single or batch. It refuses what another
// JSON parser might read differently from encoding/json: duplicate keys and
// keys that differ from "method", "params" or "name" only by case (Unicode
// simple folding, as encoding/json matches field names). Responses without
// a method yield a call with an empty Method.
//
// Every message must be a Request object (JSON-RPC 2.0 §4: "jsonrpc" of
// "2.0", a string method, params an object or an array, null read as
// absent, an id a string, a number or null) or a Response object (§5:
// "jsonrpc" of "2.0", an id, one of result and error). The error is an
// *invalidMessage: -32700 for a body that is not JSON, -32600 for one that
// is no such message or an empty batch, -32602 for a request whose params
// are refused. A batch of more than MaxBatchRequests messages is
// errBatchTooLong, told at its first message past the bound: the messages
// after it are not read, so what a long batch costs is bounded by that
// number, not by its length.
//
// The body is validated with json.Valid first; the scanner below then walks
// known-valid JSON without decoding values it does not need.
func peekJSONRPC(body []byte) ([]rpcCall, error) {
	body = trimJSONSpace(body)
	if len(body) == 0 || !json.Valid(body) {
		return nil, errParse
	}
	var calls []rpcCall
	switch body[0] {
	case '{':
		c, err := peekMessage(body)
		if err != nil {
			return nil, err
		}
		calls = []rpcCall{c}
	case '[':
		i := skipWS(body, 1)
		if body[i] == ']' {
			return nil, errEmptyBatch
		}
		for body[i] != ']' {
			if len(calls) == MaxBatchRequests {
				return nil, errBatchTooLong
			}
			end := skipValue(body, i)
			c, err := peekMessage(body[i:end])
			if err != nil {
				return nil, err
			}
			calls = append(calls, c)
			i = skipWS(body, end)
			if body[i] == ',' {
				i = skipWS(body, i+1)
			}
		}
	default:
		return nil, errNoMessage
	}
	return calls, nil
}

// isIDValue reports whether the valid JSON value v may be a JSON-RPC id:
// a string, a number or null (JSON-RPC 2.0 §4).
func isIDValue(v []byte) bool {
	return len(v) > 0 && (v[0] == '"' || v[0] == '-' || v[0] >= '0' && v[0] <= '9' || string(v) == "null")
}

// isString reports whether the valid JSON value v is a string.
func isString(v []byte) bool { return len(v) > 0 && v[0] == '"' }

// peekMessage reads one message of a body that json.Valid accepted; its
// error is an *invalidMessage.
func peekMessage(msg []byte) (rpcCall, error) {
	var c rpcCall
	var method, params, version, id []byte
	ids, versions := 0, 0
	twice, result, errorMember := false, false, false
	err := objectFields(msg, func(key, val []byte) error {
		switch {
		case string(key) == "method":
			twice = twice || method != nil
			method = val
		case string(key) == "params":
			twice = twice || params != nil
			params = val
		case string(key) == "jsonrpc":
			versions++
			version = val
		case string(key) == "id":
			ids++
			id = val
		case string(key) == "result":
			result = true
		case string(key) == "error":
			errorMember = true
		case bytes.EqualFold(key, []byte("method")) || bytes.EqualFold(key, []byte("params")):
			twice = true
		}
		return nil
	})
	if err != nil {
		return c, &invalidMessage{codeInvalidRequest, "Invalid Request: a JSON-RPC message is a JSON object"}
	}
	switch {
	case ids > 1:
		return c, &invalidMessage{codeInvalidRequest, "Invalid Request: more than one id"}
	case ids == 1 && !isIDValue(id):
		return c, &invalidMessage{codeInvalidRequest, "Invalid Request: an id is a string, a number or null"}
	case versions != 1 || !isString(version):
		return c, &invalidMessage{codeInvalidRequest, `Invalid Request: jsonrpc must be "2.0"`}
	case twice:
		return c, &invalidMessage{codeInvalidRequest, "Invalid Request: method or params given twice"}
	}
	if string(version) != `"2.0"` {
		// Spelt with escapes, or another version.
		if v, err := jsonString(version); err != nil || v != "2.0" {
			return c, &invalidMessage{codeInvalidRequest, `Invalid Request: jsonrpc must be "2.0"`}
		}
	}
	if method == nil {
		if ids != 1 || result == errorMember {
			return c, &invalidMessage{codeInvalidRequest, "Invalid Request: neither a request (no method) nor a response (an id and one of result and error)"}
		}
		return c, nil
	}
	if !isString(method) {
		return c, &invalidMessage{codeInvalidRequest, "Invalid Request: the method is not a string"}
	}
	if c.Method, err = jsonString(method); err != nil {
		return c, &invalidMessage{codeInvalidRequest, "Invalid Request: the method is not a string"}
	}
	if string(params) == "null" {
		// Read as absent, as encoding/json and the MCP SDKs' decoders do.
		params = nil
	}
	if params != nil && params[0] != '{' && params[0] != '[' {
		return c, &invalidMessage{codeInvalidRequest, "Invalid Request: params is neither an object nor an array"}
	}
	if c.Method == "completion/complete" && params != nil {
		if err := peekCompletionRef(&c, params); err != nil {
			return c, &invalidMessage{codeInvalidParams, "Invalid params: params.ref of completion/complete is no object, or names its members twice"}
		}
		return c, nil
	}
	member, named := scopedParam[c.Method]
	if !named {
		return c, nil
	}
	if params == nil {
		if c.Method == "tools/call" {
			return c, &invalidMessage{codeInvalidParams, "Invalid params: tools/call names its tool in params.name"}
		}
		return c, nil
	}
	var name []byte
	twice = false
	err = objectFields(params, func(key, val []byte) error {
		switch {
		case string(key) == member:
			twice = twice || name != nil
			name = val
		case bytes.EqualFold(key, []byte(member)):
			twice = true
		}
		return nil
	})
	switch {
	case err != nil:
		return c, &invalidMessage{codeInvalidParams, "Invalid params: params of " + c.Method + " is an object"}
	case twice:
		return c, &invalidMessage{codeInvalidParams, "Invalid params: params." + member + " given twice"}
	case name != nil && !isString(name):
		return c, &invalidMessage{codeInvalidParams, "Invalid params: params." + member + " is not a string"}
	}
	if name != nil {
		if c.Name, err = jsonString(name); err != nil {
			return c, &invalidMessage{codeInvalidParams, "Invalid params: params." + member + " is not a string"}
		}
	}
	if c.Method == "tools/call" {
		if c.Name == "" {
			return c, &invalidMessage{codeInvalidParams, "Invalid params: tools/call names its tool in params.name"}
		}
		c.Tool = c.Name
	}
	if member == "uri" && c.Name != "" {
		// The server may read the URI in another spelling (a WHATWG URL
		// parser's); one whose spelling cannot be told is refused.
		if _, ok := resourceURIForms(c.Name); !ok {
			return c, &invalidMessage{codeInvalidParams, "Invalid params: a resource URI whose spelling a server could read otherwise"}
		}
	}
	return c, nil
}

// peekCompletionRef reads params.ref of a completion/complete (MCP
// server/utilities/completion): its type, and its name (ref/prompt) or uri
// (ref/resource) into c.Name; the same members twice, or in another case,
// are refused as in peekMessage.
func peekCompletionRef(c *rpcCall, params []byte) error {
	one := func(v []byte, names ...string) (map[string][]byte, error) {
		got := map[string][]byte{}
		err := objectFields(v, func(key, val []byte) error {
			for _, n := range names {
				switch {
				case string(key) == n:
					if got[n] != nil {
						return errPeek
					}
					got[n] = val
				case bytes.EqualFold(key, []byte(n)):
					return errPeek
				}
			}
			return nil
		})
		return got, err
	}
	p, err := one(params, "ref")
	if err != nil {
		return errPeek
	}
	if p["ref"] == nil {
		return nil
	}
	ref, err := one(p["ref"], "type", "name", "uri")
	if err != nil {
		return errPeek
	}
	str := func(raw []byte) (string, error) {
		if raw == nil {
			return "", nil
		}
		return jsonString(raw)
	}
	if c.Ref, err = str(ref["type"]); err != nil {
		return errPeek
	}
	switch c.Ref {
	case "ref/prompt":
		c.Name, err = str(ref["name"])
	case "ref/resource":
		c.Name, err = str(ref["uri"])
	}
	if err != nil {
		return errPeek
	}
	return nil
}

// objectFields calls fn for every member of the valid JSON value v, which
// must be an object; keys are decoded, values passed raw. A key without
// escapes is a slice of v, valid only during the call.
func objectFields(v []byte, fn func(key, val []byte) error) error {
	i := skipWS(v, 0)
	if i >= len(v) || v[i] != '{' {
		return errPeek
	}
	i = skipWS(v, i+1)
	for v[i] != '}' {
		kEnd := skipValue(v, i) // v[i] == '"'
		raw := v[i:kEnd]
		key := raw[1 : len(raw)-1]
		if bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(key) {
			// Decoded as encoding/json does: escapes, and U+FFFD for
			// invalid UTF-8.
			var k string
			if err := json.Unmarshal(raw, &k); err != nil {
				return errPeek
			}
			key = []byte(k)
		}
		i = skipWS(v, kEnd)
		i = skipWS(v, i+1) // ':'
		vEnd := skipValue(v, i)
		if err := fn(key, v[i:vEnd]); err != nil {
			return err
		}
		i = skipWS(v, vEnd)
		if v[i] == ',' {
			i = skipWS(v, i+1)
		}
	}
	return nil
}

func skipWS(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the valid JSON value starting at i.
func skipValue(v []byte, i int) int {
	switch v[i] {
	case '"':
		for i++; i < len(v); i++ {
			switch v[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
		return len(v)
	case '{', '[':
		depth := 0
		for ; i < len(v); i++ {
			switch v[i] {
			case '"':
				i = skipValue(v, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(v)
	default:
		for ; i < len(v); i++ {
			switch v[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
		}
		return len(v)
	}
}

// trimJSONSpace cuts the whitespace JSON allows around a value (RFC 8259
// §2: space, tab, line feed, carriage return) from v, and no other: a body
// led by another space (U+0085, U+00A0) is not JSON to the server.
func trimJSONSpace(v []byte) []byte {
	i, j := 0, len(v)
	for i < j && isJSONSpace(v[i]) {
		i++
	}
	for j > i && isJSONSpace(v[j-1]) {
		j--
	}
	return v[i:j]
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
