package rsmiddleware

import "slices"

// Scopes maps MCP requests to the OAuth scopes they need. A request needs the
// union of Base, Methods[its JSON-RPC method] and, for tools/call,
// Tools[params.name]; a batch needs the union over its messages.
type Scopes struct {
	Base    []string            // needed by every request
	Methods map[string][]string // JSON-RPC method -> scopes
	Tools   map[string][]string // tool name (tools/call) -> scopes
}

func (s Scopes) needsBody() bool { return len(s.Methods) > 0 || len(s.Tools) > 0 }

// required returns the ordered, duplicate-free scopes that calls need.
func (s Scopes) required(calls []rpcCall) []string {
	out := slices.Clone(s.Base)
	add := func(list []string) {
		for _, sc := range list {
			if !slices.Contains(out, sc) {
				out = append(out, sc)
			}
		}
	}
	for _, c := range calls {
		add(s.Methods[c.Method])
		if c.Method == "tools/call" {
			add(s.Tools[c.Tool])
		}
	}
	return out
}

// ForTool returns the scopes a tools/call of tool needs (base included).
func (s Scopes) ForTool(tool string) []string {
	return s.required([]rpcCall{{Method: "tools/call", Tool: tool}})
}
