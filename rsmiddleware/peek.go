package rsmiddleware

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// rpcCall is what the scope check needs from one JSON-RPC request.
type rpcCall struct {
	Method string
	Tool   string // params.name of a tools/call
}

var errPeek = errors.New("rsmiddleware: unreadable JSON-RPC message")

// peekJSONRPC reads the method (and, for tools/call, the tool name) of every
// message of a JSON-RPC 2.0 body, single or batch. It refuses what another
// JSON parser might read differently from encoding/json: duplicate keys and
// keys that differ from "method", "params" or "name" only by case.
// Responses and notifications without a method yield a call with an empty
// Method.
func peekJSONRPC(body []byte) ([]rpcCall, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, errPeek
	}
	var msgs []json.RawMessage
	switch body[0] {
	case '[':
		if err := json.Unmarshal(body, &msgs); err != nil {
			return nil, errPeek
		}
	case '{':
		if !json.Valid(body) {
			return nil, errPeek
		}
		msgs = []json.RawMessage{body}
	default:
		return nil, errPeek
	}
	calls := make([]rpcCall, 0, len(msgs))
	for _, raw := range msgs {
		fields, err := objectFields(raw, "method", "params")
		if err != nil {
			return nil, err
		}
		var c rpcCall
		if m, ok := fields["method"]; ok {
			if err := json.Unmarshal(m, &c.Method); err != nil {
				return nil, errPeek
			}
		}
		if c.Method == "tools/call" {
			p, ok := fields["params"]
			if !ok {
				return nil, errPeek
			}
			pf, err := objectFields(p, "name")
			if err != nil {
				return nil, err
			}
			if err := json.Unmarshal(pf["name"], &c.Tool); err != nil || c.Tool == "" {
				return nil, errPeek
			}
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// objectFields returns the raw values of the wanted keys of the JSON object
// raw. A duplicate wanted key, or a key equal to a wanted one but for case,
// is an error.
func objectFields(raw json.RawMessage, want ...string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	t, err := dec.Token()
	if err != nil || t != json.Delim('{') {
		return nil, errPeek
	}
	out := make(map[string]json.RawMessage, len(want))
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, errPeek
		}
		key, _ := kt.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, errPeek
		}
		for _, w := range want {
			if !strings.EqualFold(key, w) {
				continue
			}
			if key != w {
				return nil, errPeek
			}
			if _, dup := out[w]; dup {
				return nil, errPeek
			}
			out[w] = val
		}
	}
	return out, nil
}
