// Package policy decides what a grant may hold and who may hold it, for
// every grant the authorization server issues: authorization code, refresh
// (RFC 6749 §6), client credentials (§4.4), token exchange (RFC 8693), the
// jwt-bearer grant (RFC 7523: ID-JAGs and workload tokens) and the scope a
// client registers with (RFC 7591 §2).
//
// It speaks no wire format and imports neither fosite nor net/http: its
// functions take scope lists and records and return scope lists and typed
// errors, which the handlers in as/ turn into RFC error codes, and the login
// pages (as/loginui) into pages.
//
// Two decisions live here and nowhere else:
//
//   - the person's cap, Cap: someone who signed in through an upstream
//     provider with a claim mapping (claim_scopes) is never granted a scope
//     their claims do not allow, at consent, refresh or token exchange;
//   - whether a person is active, (*People).Active: who may sign in,
//     consent, and keep using what they granted.
package policy
