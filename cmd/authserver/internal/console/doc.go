// Package console is the operator console: server-rendered pages under
// /console/ on the admin listener, where a person signs in as themselves
// and manages clients, people, grants, approvals of held tool calls,
// connected accounts and signing keys, and reads the
// audit events and statistics the server keeps.
//
// Sign-in: the console is a confidential client of the authorization
// server it serves beside. It runs the authorization code flow with PKCE
// (RFC 6749 §4.1, RFC 7636 S256) through the server's normal login (local
// accounts and upstream providers), for the admin resource (RFC 8707) with
// scope admin, which package policy reserves to admin.people and
// admin.groups. The callback checks state and iss (RFC 9207), redeems the
// code, and introspects the access token (RFC 7662) for its subject.
//
// Session: a cookie of its own (gorilla/securecookie, encrypted and
// authenticated with keys derived from the server's secret; HttpOnly,
// SameSite=Lax, Secure over https) holds the person, their tokens and the
// id of their sign-in session at the server. On every request the console
// ends the session when console_session_ttl has passed since the sign-in,
// when the server's session is gone, when introspection says the access
// token is no longer active (grant revoked, person disabled) or a refresh
// fails, and when the person is no longer one the reservation names.
//
// Every action calls the same operation as the CLI and the admin API
// (package ops), with the console's client as admin_client and the
// signed-in person as admin_subject in its audit event.
//
// Every page carries a strict Content-Security-Policy without scripts,
// X-Frame-Options DENY and frame-ancestors 'none', Cache-Control no-store;
// every form carries a CSRF token bound to the session, checked in
// constant time.
package console
