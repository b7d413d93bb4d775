package rsmiddleware

import (
	"encoding/base64"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Headers of the MCP Streamable HTTP transport (MCP 2026-07-28,
// basic/transports/streamable-http, "Standard Request Headers").
const (
	ProtocolVersionHeader = "MCP-Protocol-Version"
	// MethodHeader mirrors the JSON-RPC method of a POST.
	MethodHeader = "Mcp-Method"
	// NameHeader mirrors params.name of tools/call and prompts/get and
	// params.uri of resources/read.
	NameHeader = "Mcp-Name"
)

// StatelessVersion is the first MCP revision without sessions: no
// initialize, no Mcp-Session-Id, every request authenticated on its own,
// and POSTs that mirror their method and name in headers the server must
// check against the body.
const StatelessVersion = "2026-07-28"

// ErrCodeHeaderMismatch is the JSON-RPC error of a request whose Mcp-Method
// or Mcp-Name header is missing or does not match its body.
const ErrCodeHeaderMismatch = -32020

// Stateless reports whether r speaks an MCP revision without sessions
// (StatelessVersion or later), as its MCP-Protocol-Version header says.
// Revisions are dates (YYYY-MM-DD), so later ones sort after it.
func Stateless(r *http.Request) bool {
	v := r.Header.Get(ProtocolVersionHeader)
	return len(v) == len(StatelessVersion) && v[4] == '-' && v[7] == '-' && v >= StatelessVersion
}

// decodeHeaderValue reads a mirrored header value: plain visible ASCII as
// it is, or the "=?base64?{standard base64 of UTF-8}?=" form of any other
// value. ok is false for a malformed value.
func decodeHeaderValue(v string) (string, bool) {
	if enc, found := strings.CutPrefix(v, "=?base64?"); found {
		enc, found = strings.CutSuffix(enc, "?=")
		if !found {
			return "", false
		}
		b, err := base64.StdEncoding.Strict().DecodeString(enc)
		if err != nil || !utf8.Valid(b) {
			return "", false
		}
		return string(b), true
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
			return "", false
		}
	}
	return v, true
}

// checkMirroredHeaders reports whether the Mcp-Method and Mcp-Name
// headers of a stateless POST match its body: exactly one header of each
// that applies, decoded, equal to the body's value. A body that is not one
// JSON-RPC request (a batch, a response) has nothing to mirror and fails.
func checkMirroredHeaders(r *http.Request, body []byte, calls []rpcCall) bool {
	if b := trimJSONSpace(body); len(b) > 0 && b[0] == '[' {
		return false
	}
	if len(calls) != 1 || calls[0].Method == "" {
		return len(calls) == 1 && calls[0].Method == "" && len(r.Header.Values(MethodHeader)) == 0
	}
	c := calls[0]
	methods := r.Header.Values(MethodHeader)
	if len(methods) != 1 {
		return false
	}
	if m, ok := decodeHeaderValue(methods[0]); !ok || m != c.Method {
		return false
	}
	names := r.Header.Values(NameHeader)
	if _, named := namedParam[c.Method]; !named {
		return len(names) == 0
	}
	if len(names) != 1 {
		return false
	}
	n, ok := decodeHeaderValue(names[0])
	return ok && n == c.Name
}
