package rsmiddleware

import (
	"encoding/json"

	"github.com/mcpauth/mcpauth/toolpolicy"
)

// listMembers are the result members of the MCP list methods (MCP
// specification, server features): the member that holds the entries, per
// method.
var listMembers = []struct{ method, member string }{
	{"tools/list", "tools"},
	{"resources/list", "resources"},
	{"resources/templates/list", "resourceTemplates"},
	{"prompts/list", "prompts"},
}

// visible returns the rule deciding which entries of a list member p may
// see, or nil when p sees them all: an entry is shown when p holds the
// scopes a request for it needs (tools/call of its name, prompts/get of its
// name, resources/read of its uri; a template, those of resources/read and
// of its uriTemplate) and, with a Policy, some arguments make that request
// allowed for c (toolpolicy.Engine.Listable; templates are not decided by
// rules). An entry without that member cannot be checked and is hidden.
func (f *MCPFilter) visible(member string, p *Principal, c *toolpolicy.Caller) func(entry map[string]json.RawMessage) bool {
	var union []string
	var key, call string
	var need func(string) []string
	switch member {
	case "tools":
		union, key, need, call = f.toolScopes, "name", f.scopes.ForTool, "tools/call"
	case "resources":
		union, key, need, call = f.resourceScopes, "uri", f.scopes.ForResource, "resources/read"
	case "resourceTemplates":
		union, key, need = f.resourceScopes, "uriTemplate", f.scopes.ForResourceTemplate
	case "prompts":
		union, key, need, call = f.promptScopes, "name", f.scopes.ForPrompt, "prompts/get"
	default:
		return nil
	}
	byScope := len(p.MissingScopes(union)) > 0
	byPolicy := call != "" && f.policy.ListsFiltered(call)
	if member == "tools" && f.guard != nil && !byScope && !byPolicy {
		// Pins and Screening decide each entry (trimResultFor).
		return func(map[string]json.RawMessage) bool { return true }
	}
	if !byScope && !byPolicy {
		return nil
	}
	if byPolicy && c == nil {
		c = f.caller(nil, p)
	}
	return func(e map[string]json.RawMessage) bool {
		var name string
		if json.Unmarshal(e[key], &name) != nil || name == "" {
			return false
		}
		if byScope && len(p.MissingScopes(need(name))) > 0 {
			return false
		}
		return !byPolicy || f.policy.Listable(c, call, name)
	}
}

// trimResult cuts the list result of method to the entries p may see. With
// method unknown (an answer whose request this filter did not see, as on a
// resumed stream) every list member present is cut. It reports whether the
// result changed; a result it cannot read is left for the client to refuse.
func (f *MCPFilter) trimResult(method string, result json.RawMessage, p *Principal) (json.RawMessage, bool) {
	return f.trimResultFor(method, result, p, nil, nil)
}

// trimResultFor is trimResult with the policy's caller c (nil: made from p)
// and the answer's writer fw, which audits the definitions Pins and
// Screening decide (nil: not audited).
func (f *MCPFilter) trimResultFor(method string, result json.RawMessage, p *Principal, c *toolpolicy.Caller, fw *filterWriter) (json.RawMessage, bool) {
	var rules []struct {
		member string
		keep   func(map[string]json.RawMessage) bool
	}
	for _, lm := range listMembers {
		if method != "" && method != lm.method {
			continue
		}
		if keep := f.visible(lm.member, p, c); keep != nil {
			rules = append(rules, struct {
				member string
				keep   func(map[string]json.RawMessage) bool
			}{lm.member, keep})
		}
	}
	if len(rules) == 0 {
		return result, false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(result, &obj) != nil {
		return result, false
	}
	changed := false
	for _, r := range rules {
		raw, ok := obj[r.member]
		if !ok {
			continue
		}
		var entries []json.RawMessage
		if json.Unmarshal(raw, &entries) != nil {
			// Not a list: nothing the caller may see can be told apart.
			obj[r.member] = json.RawMessage("[]")
			changed = true
			continue
		}
		// same: every entry is kept, and none names a member twice (its
		// decoded members are as many as its raw ones), so the list goes
		// on as sent; the result and the message around it are still
		// re-encoded from their decoded members (changed), which collapses
		// a repeated "tools" or "result" to the one checked.
		same := true
		keptFields := make([]map[string]json.RawMessage, 0, len(entries))
		for _, e := range entries {
			var fields map[string]json.RawMessage
			if json.Unmarshal(e, &fields) != nil || !r.keep(fields) {
				same = false
				continue
			}
			if r.member == "tools" && f.guard != nil && !f.guardEntry(e, fields, fw) {
				same = false
				continue
			}
			if same {
				n := 0
				if objectFields(e, func(_, _ []byte) error { n++; return nil }) != nil || n != len(fields) {
					same = false
				}
			}
			keptFields = append(keptFields, fields)
		}
		if same {
			changed = true
			continue
		}
		kept := make([]json.RawMessage, 0, len(keptFields))
		for _, fields := range keptFields {
			// Re-encoded from the map: duplicate members collapse to the one
			// the rule read, so the client cannot read another name.
			ne, err := json.Marshal(fields)
			if err != nil {
				continue
			}
			kept = append(kept, ne)
		}
		nl, err := json.Marshal(kept)
		if err != nil {
			return result, false
		}
		obj[r.member] = nl
		changed = true
	}
	if !changed {
		return result, false
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return result, false
	}
	return out, true
}
