package rsmiddleware

import (
	"slices"
	"strings"
)

// Scopes maps MCP requests to the OAuth scopes they need. A request needs the
// union of Base, Methods[its JSON-RPC method] and, for tools/call,
// Tools[params.name], for prompts/get, Prompts[params.name], for
// resources/read and resources/subscribe, Resources of params.uri, for
// completion/complete those of the prompt or template its params.ref
// names; a batch
// needs the union over its messages. MCPFilter shows a list entry only to a caller holding what a
// request for it needs, so that a hidden entry and a forbidden one are one
// rule.
type Scopes struct {
	Base    []string            // needed by every request
	Methods map[string][]string // JSON-RPC method -> scopes
	Tools   map[string][]string // tool name (tools/call) -> scopes
	// Prompts maps a prompt name (prompts/get params.name, prompts/list
	// entry name) to scopes.
	Prompts map[string][]string
	// Resources maps a resource URI (resources/read params.uri,
	// resources/list entry uri) or an RFC 6570 URI template
	// (resources/templates/list entry uriTemplate) to scopes. A
	// resources/read of a URI needs the scopes of that URI and of every
	// template key it may be an expansion of: each {expression} of a
	// template is taken to stand for any text, so a URI matches more
	// templates than RFC 6570 would expand to it, never fewer. The URI is
	// matched as sent and as a WHATWG URL parser serialises it (the
	// TypeScript MCP SDK looks resources up by new URL(uri).toString(), so
	// "CONFIG://secrets" is config://secrets); a URI whose serialisation
	// could differ otherwise (dot segments, tabs, backslashes, numeric
	// hosts, ...) is refused as unreadable.
	Resources map[string][]string
}

func (s Scopes) needsBody() bool {
	return len(s.Methods) > 0 || len(s.Tools) > 0 || len(s.Prompts) > 0 || len(s.Resources) > 0
}

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
		switch c.Method {
		case "tools/call":
			add(s.Tools[c.Tool])
		case "prompts/get":
			add(s.Prompts[c.Name])
		case "resources/read", "resources/subscribe":
			s.forURI(c.Name, add)
		case "completion/complete":
			// Completing a prompt's or a resource template's arguments
			// needs what getting the prompt, or reading a resource of the
			// template, needs (the ref names the template as listed).
			switch c.Ref {
			case "ref/prompt":
				add(s.Methods["prompts/get"])
				add(s.Prompts[c.Name])
			case "ref/resource":
				add(s.Methods["resources/read"])
				s.forURI(c.Name, add)
			}
		}
	}
	return out
}

// forURI calls add with the scopes of the Resources keys uri matches: the
// URI itself and the templates it may expand, in each of the spellings the
// server may read it as (resourceURIForms; peekJSONRPC refuses a URI it
// cannot spell).
func (s Scopes) forURI(uri string, add func([]string)) {
	forms, ok := resourceURIForms(uri)
	if !ok {
		forms = []string{uri}
	}
	var templates []string
	for _, u := range forms {
		add(s.Resources[u])
		for k := range s.Resources {
			if k != u && strings.IndexByte(k, '{') >= 0 && !slices.Contains(templates, k) && templateMatches(k, u) {
				templates = append(templates, k)
			}
		}
	}
	slices.Sort(templates) // the challenge lists the scopes in one order
	for _, k := range templates {
		add(s.Resources[k])
	}
}

// ForTool returns the scopes a tools/call of tool needs (base included).
func (s Scopes) ForTool(tool string) []string {
	return s.required([]rpcCall{{Method: "tools/call", Tool: tool}})
}

// ForPrompt returns the scopes a prompts/get of the prompt name needs (base
// included).
func (s Scopes) ForPrompt(name string) []string {
	return s.required([]rpcCall{{Method: "prompts/get", Name: name}})
}

// ForResource returns the scopes a resources/read of uri needs (base
// included).
func (s Scopes) ForResource(uri string) []string {
	return s.required([]rpcCall{{Method: "resources/read", Name: uri}})
}

// ForResourceTemplate returns the scopes under which the template is shown
// in resources/templates/list: those of resources/read and of the
// Resources key equal to the template.
func (s Scopes) ForResourceTemplate(template string) []string {
	out := s.required([]rpcCall{{Method: "resources/read"}})
	for _, sc := range s.Resources[template] {
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out
}

// templateMatches reports whether uri may be an expansion of the RFC 6570
// template t, reading each {expression} as any text (an unclosed "{" is
// literal). Literal text matches itself.
func templateMatches(t, uri string) bool {
	var lits []string
	for {
		i := strings.IndexByte(t, '{')
		j := -1
		if i >= 0 {
			j = strings.IndexByte(t[i:], '}')
		}
		if i < 0 || j < 0 {
			lits = append(lits, t)
			break
		}
		lits = append(lits, t[:i])
		t = t[i+j+1:]
	}
	// A glob of literals joined by "any text": the first is a prefix, the
	// last a suffix, the others found in order, each as early as it can be.
	first, last := lits[0], lits[len(lits)-1]
	if len(lits) == 1 {
		return uri == first
	}
	if len(uri) < len(first)+len(last) || !strings.HasPrefix(uri, first) || !strings.HasSuffix(uri, last) {
		return false
	}
	mid := uri[len(first) : len(uri)-len(last)]
	for _, l := range lits[1 : len(lits)-1] {
		k := strings.Index(mid, l)
		if k < 0 {
			return false
		}
		mid = mid[k+len(l):]
	}
	return true
}
