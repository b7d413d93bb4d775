// Package admin is the authorization server's admin HTTP API: REST and JSON
// under /admin/v1/ (clients, consents, grants, keys, users, approvals,
// audit), on a listener
// of its own.
//
// It is a resource server of the authorization server it manages: every
// request carries a Bearer access token (RFC 6750 §2.1) that the server
// issued by client credentials to one of admin.clients, for the admin
// resource ({issuer}/admin, RFC 8707) with scope "admin". The token check
// is rsmiddleware's, as for any MCP server; this package adds the check that
// the token's client is an admin client, and writes an audit event naming
// that client for every change.
package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/ops"
	"github.com/mcpauth/mcpauth/internal/accesslog"
	"github.com/mcpauth/mcpauth/rsmiddleware"
	"github.com/mcpauth/mcpauth/storage"
)

// Prefix is the path every endpoint lives under.
const Prefix = "/admin/v1/"

// Config configures New.
type Config struct {
	// Guard checks the Bearer token: audience the admin resource, scope
	// admin (an rsmiddleware.Middleware). Required.
	Guard *rsmiddleware.Middleware
	// Ops returns the operations of the current configuration (it changes
	// on reload). Required.
	Ops func() *ops.Ops
	// IsAdminClient reports whether a client id is one of admin.clients,
	// in the current configuration. Required.
	IsAdminClient func(clientID string) bool
	// Logger receives internal errors. Nil: slog.Default().
	Logger *slog.Logger
}

// maxBody caps request bodies.
const maxBody = 64 << 10

type api struct {
	cfg Config
	log *slog.Logger
}

// New returns the handler of every endpoint under Prefix.
func New(cfg Config) (http.Handler, error) {
	if cfg.Guard == nil || cfg.Ops == nil || cfg.IsAdminClient == nil {
		return nil, errors.New("admin: Guard, Ops and IsAdminClient are required")
	}
	a := &api{cfg: cfg, log: cfg.Logger}
	if a.log == nil {
		a.log = slog.Default()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix+"clients", a.listClients)
	mux.HandleFunc("POST "+Prefix+"clients", a.createClient)
	mux.HandleFunc("GET "+Prefix+"clients/{id...}", a.showClient)
	mux.HandleFunc("DELETE "+Prefix+"clients/{id...}", a.deleteClient)
	mux.HandleFunc("GET "+Prefix+"consents", a.listConsents)
	mux.HandleFunc("DELETE "+Prefix+"consents", a.revokeConsents)
	mux.HandleFunc("GET "+Prefix+"grants", a.listGrants)
	mux.HandleFunc("DELETE "+Prefix+"grants", a.revokeGrants)
	mux.HandleFunc("DELETE "+Prefix+"grants/{id}", a.revokeGrant)
	mux.HandleFunc("GET "+Prefix+"users", a.listUsers)
	mux.HandleFunc("GET "+Prefix+"users/{subject}", a.showUser)
	mux.HandleFunc("POST "+Prefix+"users/{subject}/disable", a.disableUser)
	mux.HandleFunc("POST "+Prefix+"users/{subject}/enable", a.enableUser)
	mux.HandleFunc("GET "+Prefix+"approvals", a.listApprovals)
	mux.HandleFunc("DELETE "+Prefix+"approvals/{id}", a.revokeApproval)
	mux.HandleFunc("GET "+Prefix+"audit", a.listAudit)
	mux.HandleFunc("GET "+Prefix+"keys", a.listKeys)
	mux.HandleFunc("POST "+Prefix+"keys", a.rotateKey)
	mux.HandleFunc("POST "+Prefix+"keys/prune", a.pruneKeys)
	mux.HandleFunc("POST "+Prefix+"keys/{kid}/retire", a.retireKey)
	mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such admin endpoint")
	})
	return cfg.Guard.Wrap(a.requireAdminClient(mux)), nil
}

// requireAdminClient refuses tokens of clients that are not (or no longer)
// in admin.clients, whatever their audience and scope say.
func (a *api) requireAdminClient(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := rsmiddleware.PrincipalFromContext(r.Context())
		if !ok || p.ClientID == "" {
			writeError(w, http.StatusForbidden, "access_denied", "the token names no client")
			return
		}
		accesslog.SetClientID(r.Context(), p.ClientID)
		if !a.cfg.IsAdminClient(p.ClientID) {
			writeError(w, http.StatusForbidden, "access_denied", "the token's client is not one of admin.clients")
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func actor(r *http.Request) string {
	p, _ := rsmiddleware.PrincipalFromContext(r.Context())
	return p.ClientID
}

func (a *api) listClients(w http.ResponseWriter, r *http.Request) {
	cs, err := a.cfg.Ops().ListClients(r.Context())
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"clients": cs})
}

func (a *api) showClient(w http.ResponseWriter, r *http.Request) {
	c, err := a.cfg.Ops().GetClient(r.Context(), r.PathValue("id"))
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (a *api) createClient(w http.ResponseWriter, r *http.Request) {
	var nc ops.NewClient
	if !readJSON(w, r, &nc) {
		return
	}
	c, err := a.cfg.Ops().CreateClient(r.Context(), actor(r), nc)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, c)
}

func (a *api) deleteClient(w http.ResponseWriter, r *http.Request) {
	if err := a.cfg.Ops().DeleteClient(r.Context(), actor(r), r.PathValue("id")); err != nil {
		a.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *api) listConsents(w http.ResponseWriter, r *http.Request) {
	cs, err := a.cfg.Ops().ListConsents(r.Context(), r.URL.Query().Get("user"))
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"consents": cs})
}

func (a *api) revokeConsents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if err := a.cfg.Ops().RevokeConsents(r.Context(), actor(r), q.Get("user"), q.Get("client")); err != nil {
		a.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *api) listGrants(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	gs, err := a.cfg.Ops().ListGrants(r.Context(), q.Get("user"), q.Get("client"))
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"grants": gs})
}

func (a *api) revokeGrants(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.revoke(w, r, as.GrantFilter{User: q.Get("user"), Client: q.Get("client")})
}

func (a *api) revokeGrant(w http.ResponseWriter, r *http.Request) {
	a.revoke(w, r, as.GrantFilter{GrantID: r.PathValue("id")})
}

func (a *api) revoke(w http.ResponseWriter, r *http.Request, f as.GrantFilter) {
	gs, err := a.cfg.Ops().RevokeGrants(r.Context(), actor(r), f)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"revoked": gs})
}

// listUsers pages through the people (ops.ListUsers): ?limit= (1 to
// ops.MaxUserPage, default 100) and ?after= the next_after of the previous
// page, which is absent on the last one.
func (a *api) listUsers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := defaultUserPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > ops.MaxUserPage {
			writeError(w, http.StatusBadRequest, "invalid_request", "limit must be a number from 1 to "+strconv.Itoa(ops.MaxUserPage))
			return
		}
		limit = n
	}
	after := q.Get("after")
	if !utf8.ValidString(after) || strings.IndexByte(after, 0) >= 0 {
		writeError(w, http.StatusBadRequest, "invalid_request", "after must be a subject from next_after")
		return
	}
	us, next, err := a.cfg.Ops().ListUsers(r.Context(), after, limit)
	if err != nil {
		a.fail(w, err)
		return
	}
	body := map[string]any{"users": us}
	if next != "" {
		body["next_after"] = next
	}
	writeJSON(w, http.StatusOK, body)
}

// listApprovals pages through the approvals of held tool calls
// (ops.ListApprovals): ?user= only that person's, ?limit= (1 to
// ops.MaxApprovalPage, default 100) and ?after= the next_after of the
// previous page, which is absent on the last one.
func (a *api) listApprovals(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := defaultUserPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > ops.MaxApprovalPage {
			writeError(w, http.StatusBadRequest, "invalid_request", "limit must be a number from 1 to "+strconv.Itoa(ops.MaxApprovalPage))
			return
		}
		limit = n
	}
	list, next, err := a.cfg.Ops().ListApprovals(r.Context(), q.Get("user"), q.Get("after"), limit)
	if err != nil {
		a.fail(w, err)
		return
	}
	body := map[string]any{"approvals": list}
	if next != "" {
		body["next_after"] = next
	}
	writeJSON(w, http.StatusOK, body)
}

// revokeApproval deletes one approval (ops.RevokeApproval).
func (a *api) revokeApproval(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := a.cfg.Ops().RevokeApproval(r.Context(), actor(r), id); err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"revoked": id})
}

// listAudit pages through the audit events kept in storage
// (ops.ListAudit), newest first: ?user=, ?client=, ?event= (a trailing "."
// matches a prefix), ?limit= (1 to ops.MaxAuditPage, default
// ops.DefaultAuditPage) and ?before= the next_before of the previous
// page, which is absent on the last one.
func (a *api) listAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	aq := ops.AuditQuery{User: q.Get("user"), Client: q.Get("client"), Event: q.Get("event")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > ops.MaxAuditPage {
			writeError(w, http.StatusBadRequest, "invalid_request", "limit must be a number from 1 to "+strconv.Itoa(ops.MaxAuditPage))
			return
		}
		aq.Limit = n
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "invalid_request", "before must be the next_before of a previous page")
			return
		}
		aq.Before = n
	}
	page, err := a.cfg.Ops().ListAudit(r.Context(), aq)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// defaultUserPage is the page size of GET users without ?limit.
const defaultUserPage = 100

// The {subject} path segment is percent-decoded by the router, so a
// subject holding "/" (or any byte) is sent escaped: users/corp:a%2Fb.

func (a *api) showUser(w http.ResponseWriter, r *http.Request) {
	u, err := a.cfg.Ops().GetUser(r.Context(), r.PathValue("subject"))
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, u)
}

func (a *api) disableUser(w http.ResponseWriter, r *http.Request) {
	c, err := a.cfg.Ops().DisableUser(r.Context(), actor(r), r.PathValue("subject"))
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (a *api) enableUser(w http.ResponseWriter, r *http.Request) {
	u, err := a.cfg.Ops().EnableUser(r.Context(), actor(r), r.PathValue("subject"))
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, u)
}

func (a *api) listKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := a.cfg.Ops().ListKeys(r.Context())
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": ks})
}

func (a *api) rotateKey(w http.ResponseWriter, r *http.Request) {
	kid, err := a.cfg.Ops().RotateKey(r.Context(), actor(r))
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"signing_kid": kid})
}

func (a *api) retireKey(w http.ResponseWriter, r *http.Request) {
	kid, err := a.cfg.Ops().RetireKey(r.Context(), actor(r), r.PathValue("kid"))
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"retired_kid": r.PathValue("kid"), "signing_kid": kid})
}

func (a *api) pruneKeys(w http.ResponseWriter, r *http.Request) {
	unloadable := false
	if v := r.URL.Query().Get("unloadable"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", "unloadable must be true or false")
			return
		}
		unloadable = b
	}
	deleted, err := a.cfg.Ops().PruneKeys(r.Context(), actor(r), unloadable)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": deleted})
}

// unsealableKeysDescription is the answer to a key operation refused because
// this server's secret unseals none of the stored keys. It names the remedy
// in the API's terms; the kids and the library's wording stay in the log.
const unsealableKeysDescription = "no stored signing key can be unsealed with this server's secret, so nothing was changed; " +
	"serve with the secret the other instances use, then POST " + Prefix + "keys/prune?unloadable=true to delete the keys no instance can load"

// fail maps an operation's error to its answer; internal causes are logged,
// never sent.
func (a *api) fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ops.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, ops.ErrConfigured), errors.Is(err, ops.ErrDisabledInConfig):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, as.ErrEmptyFilter):
		writeError(w, http.StatusBadRequest, "invalid_request", "name a user, a client or a grant")
	case errors.Is(err, ops.ErrInvalid):
		writeError(w, http.StatusBadRequest, "invalid_request", strings.TrimPrefix(err.Error(), ops.ErrInvalid.Error()+": "))
	case errors.Is(err, as.ErrUnsealableKeys):
		a.log.Warn("admin: stored keys unsealable with this secret", "err", err)
		writeError(w, http.StatusConflict, "conflict", unsealableKeysDescription)
	case errors.Is(err, storage.ErrUnavailable):
		a.log.Error("admin: storage unavailable", "err", err)
		writeError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "storage is unavailable; try again later")
	default:
		a.log.Error("admin: internal error", "err", err)
		writeError(w, http.StatusInternalServerError, "server_error", "the server encountered an unexpected condition")
	}
}

// readJSON decodes the body, one JSON object of v's fields, into v. A body
// that is not one is refused with 415, 413 or 400 and a description of the
// client's mistake in JSON terms (never the decoder's Go type names).
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "invalid_request", "send application/json")
		return false
	}
	body := http.MaxBytesReader(w, r.Body, maxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// Exactly one value: anything but white space after it, even a
		// stray "}", is an error.
		var rest []byte
		if rest, err = io.ReadAll(io.MultiReader(dec.Buffered(), body)); err == nil {
			if len(bytes.TrimLeft(rest, " \t\r\n")) == 0 {
				return true
			}
			err = errTrailing
		}
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		writeError(w, http.StatusRequestEntityTooLarge, "invalid_request", "the body is larger than 64 KiB")
		return false
	}
	writeError(w, http.StatusBadRequest, "invalid_request", describeJSONError(err))
	return false
}

var errTrailing = errors.New("one JSON object expected, without anything after it")

// describeJSONError says what is wrong with a request body in JSON terms.
func describeJSONError(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, errTrailing):
		return err.Error()
	case errors.As(err, &typ) && typ.Field != "":
		return fmt.Sprintf("field %s: expected %s, got a JSON %s", typ.Field, jsonKind(typ.Type), typ.Value)
	case errors.As(err, &typ):
		return fmt.Sprintf("expected a JSON object, got a JSON %s", typ.Value)
	case errors.As(err, &syntax):
		return fmt.Sprintf("not JSON (at byte %d)", syntax.Offset)
	case errors.Is(err, io.EOF):
		return "the body is empty; send a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends before the object does"
	}
	// The decoder's text for an unknown field is `json: unknown field "x"`.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return "unknown field " + name
	}
	return "the body is not the expected JSON object"
}

// jsonKind names the JSON value a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another type"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}
