// Package authflow is the authorization request (RFC 6749 §4.1.1) as one
// explicit transaction: what the authorization endpoint validated, once,
// and what each page the person answered recorded in it since, sealed
// (AES-256-GCM, internal/seal) and carried by the browser between steps.
// No step reads the request's parameters again.
//
// One function, Next, decides what comes next from the transaction, the
// browser session, the person's scope cap and the remembered consent. It
// is the only place that decides it:
//
//	/authorize ──validate once──▶ Transaction ──▶ Next ─┬─ SignIn ──────▶ login page ─POST /authorize/login──┐
//	                                                     ├─ SignInAt ────▶ provider ─/upstream/{id}/callback─┤
//	                                                     ├─ Consent ─────▶ consent page ─POST /authorize/consent┤
//	                                                     ├─ Confirm ─────▶ continue page ─POST /authorize/consent┤
//	                                                     ├─ NotPermitted ▶ our page, link back with access_denied
//	                                                     ├─ Deny ────────▶ redirect with access_denied
//	                                                     └─ Issue ───────▶ redirect with the code (RFC 6749 §4.1.2)
//	                                                                                                          │
//	      GET /authorize/continue?txn=… ◀── each step records its outcome in the transaction and returns ◀──┘
//
// A sealed transaction is bound to one browser session and usable once
// per step: every step that opens it (a form post, the return to
// /authorize/continue) spends that copy's one-time id, and seals the next
// step's copy anew; a sign-in at a provider carries it inside the sealed
// state, which its callback spends.
package authflow
