// Package toolpolicy decides who may make which MCP request with which
// arguments: rules written in the Common Expression Language (CEL), values
// set into a call's arguments from the caller's identity, and token-bucket
// rate limits. The gateway (cmd/mcpgateway) and rsmiddleware's MCPFilter use
// this one implementation, so a rule holds the same in front of any MCP
// server and inside a Go one.
//
// # Why CEL, and why github.com/google/cel-go
//
// A rule has to read the caller's claims and a call's arguments, be checked
// when the configuration is loaded (an unknown variable, a syntax error or a
// non-boolean result is refused at start, not at the first call), run in
// bounded time on input an attacker chooses, and be evaluable with the
// arguments unknown so that a tools/list answer hides exactly the tools no
// arguments could make callable. CEL has all four by design (type checking,
// a runtime cost limit, partial evaluation over unknown attributes), and
// cel-go is the implementation Kubernetes, Envoy and agentgateway use for
// the same kind of rule, so operators can bring what they know. The library
// was added for these reasons; it is imported by this package only.
//
// # Variables of a rule
//
//   - claims: the access token's claims (a verified JWT's payload, or the
//     RFC 7662 §2.2 introspection answer), a map.
//   - args: the arguments of a tools/call or prompts/get (params.arguments),
//     a map; empty for other requests. Arguments with a member named twice
//     at any depth are refused before any rule reads them (JSON parsers
//     differ on which one counts, RFC 8259 §4).
//   - method: the JSON-RPC method; name: the tool or prompt name, or the
//     resource URI of resources/read and resources/subscribe.
//   - client_id: the token's client_id; scopes: its scopes, a list.
//
// # Matching
//
// A rule or a rate limit matches a request when one of its globs does:
// methods over the JSON-RPC method, tools over the tool name of a
// tools/call, prompts over the prompt name of a prompts/get, resources
// over the URI of a resources/read or resources/subscribe. In a glob, *
// stands for any run of characters ('/' included) and every other
// character for itself.
//
// Every rule that matches a request must allow it: its expression must
// evaluate to true. false, an evaluation error (a claim the token lacks),
// a result past the cost limit (CostLimit) all deny.
package toolpolicy
