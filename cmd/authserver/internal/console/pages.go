package console

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/ops"
	"github.com/mcpauth/mcpauth/storage"
)

// pageSize is how many rows a list page shows.
const pageSize = 50

// view is what every template receives.
type view struct {
	Title  string
	Detail string
	Notice string
	// Nav names the section of the navigation the page belongs to; "" on
	// pages shown without a session.
	Nav string
	// Who is the signed-in person; CSRF their session's form token.
	Who  string
	CSRF string
	Data any
}

var funcs = template.FuncMap{
	"stamp": stamp,
	"grantTable": func(csrf string, gs []as.Grant, user, client string) grantTable {
		return grantTable{csrf, gs, user, client}
	},
	"approvalTable": func(csrf string, as []ops.Approval, sub string) approvalTable {
		return approvalTable{csrf, as, sub}
	},
	"connectionTable": func(csrf string, cs []ops.Connection, back string) connectionTable {
		return connectionTable{csrf, cs, back}
	},
	"join":  strings.Join,
	"q":     url.QueryEscape,
	"short": short,
}

// short cuts a long digest to its first 16 characters for a table.
func short(s string) string {
	if len(s) <= 16 {
		return s
	}
	return s[:16] + "…"
}

// stamp formats a time (time.Time or *time.Time) for a table; "—" for none.
func stamp(v any) string {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = x
	case *time.Time:
		if x != nil {
			t = *x
		}
	}
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

func (c *Console) render(w http.ResponseWriter, status int, name string, v *view) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, v); err != nil {
		c.log.Error("console: template", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// show renders a page of a signed-in person.
func (c *Console) show(w http.ResponseWriter, s *session, status int, name, nav, title string, data any) {
	c.render(w, status, name, &view{Title: title, Nav: nav, Who: s.Subject, CSRF: s.CSRF, Data: data})
}

// done renders the outcome of an action, with a link onwards.
func (c *Console) done(w http.ResponseWriter, s *session, nav, title, detail, next, nextLabel string) {
	c.render(w, http.StatusOK, "message.html", &view{Title: title, Detail: detail, Nav: nav, Who: s.Subject, CSRF: s.CSRF,
		Data: link{URL: next, Label: nextLabel}})
}

type link struct{ URL, Label string }

// grantTable is what the grant table template needs.
type grantTable struct {
	CSRF         string
	Grants       []as.Grant
	User, Client string
}

// approvalTable is what the approval table template needs; Sub, when
// set, is the person whose page it is on.
type approvalTable struct {
	CSRF      string
	Approvals []ops.Approval
	Sub       string
}

// connectionTable is what the connection table template needs; Back is
// "person" on a person's page.
type connectionTable struct {
	CSRF        string
	Connections []ops.Connection
	Back        string
}

// fail maps an operation's error to a page; internal causes are logged,
// never shown.
func (c *Console) fail(w http.ResponseWriter, err error) {
	c.failAs(w, nil, err)
}

func (c *Console) failAs(w http.ResponseWriter, s *session, err error) {
	v := &view{}
	if s != nil {
		v.Who, v.CSRF = s.Subject, s.CSRF
	}
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, ops.ErrNotFound):
		status, v.Title, v.Detail = http.StatusNotFound, "Not found", firstUpper(err.Error())+"."
	case errors.Is(err, ops.ErrConfigured), errors.Is(err, ops.ErrDisabledInConfig):
		status, v.Title, v.Detail = http.StatusConflict, "Not changed", firstUpper(err.Error())+"."
	case errors.Is(err, ops.ErrInvalid):
		status, v.Title, v.Detail = http.StatusBadRequest, "Not done", firstUpper(strings.TrimPrefix(err.Error(), ops.ErrInvalid.Error()+": "))+"."
	case errors.Is(err, as.ErrUnsealableKeys):
		c.log.Warn("console: stored keys unsealable with this secret", "err", err)
		status, v.Title, v.Detail = http.StatusConflict, "Not changed",
			"No stored signing key can be unsealed with this server's secret. Serve with the secret the other instances use, then prune the keys no instance can load."
	case errors.Is(err, storage.ErrUnavailable):
		c.log.Error("console: storage unavailable", "err", err)
		status, v.Title, v.Detail = http.StatusServiceUnavailable, "Try again later", "Storage is unavailable."
	default:
		c.log.Error("console: internal error", "err", err)
		v.Title, v.Detail = "Something went wrong", "The server encountered an unexpected condition. The details are in its log."
	}
	c.render(w, status, "message.html", v)
}

func firstUpper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// ---- clients ----

type clientList struct {
	Q, After, Next string
	Clients        []ops.Client
}

// clients lists clients in id order, a page at a time (the store's
// cursor); q keeps those whose id starts with it.
func (c *Console) clients(w http.ResponseWriter, r *http.Request, s *session) {
	q, after := r.URL.Query().Get("q"), r.URL.Query().Get("after")
	o := c.cfg.Ops()
	d := clientList{Q: q, After: after}
	if q != "" && after == "" {
		if cl, err := o.GetClient(r.Context(), q); err == nil {
			d.Clients = append(d.Clients, *cl)
		} else if !errors.Is(err, ops.ErrNotFound) {
			c.failAs(w, s, err)
			return
		}
		after = q
	}
	page, next, err := o.ListClientsPage(r.Context(), after, pageSize)
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	for _, cl := range page {
		if !strings.HasPrefix(cl.ID, q) {
			next = ""
			break
		}
		d.Clients = append(d.Clients, cl)
	}
	if len(d.Clients) > 0 && next != "" {
		d.Next = d.Clients[len(d.Clients)-1].ID
	}
	c.show(w, s, http.StatusOK, "clients.html", "clients", "Clients", d)
}

type clientPage struct {
	Client ops.Client
	Grants []as.Grant
}

func (c *Console) showClient(w http.ResponseWriter, r *http.Request, s *session) {
	o := c.cfg.Ops()
	cl, err := o.GetClient(r.Context(), r.URL.Query().Get("id"))
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	gs, err := o.ListGrants(r.Context(), "", cl.ID)
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	c.show(w, s, http.StatusOK, "client.html", "clients", "Client "+cl.ID, clientPage{Client: *cl, Grants: gs})
}

type newClientForm struct {
	Name, RedirectURIs string
	Public             bool
	Error              string
}

func (c *Console) newClient(w http.ResponseWriter, r *http.Request, s *session) {
	c.show(w, s, http.StatusOK, "newclient.html", "clients", "New client", newClientForm{})
}

func (c *Console) createClient(w http.ResponseWriter, r *http.Request, s *session) {
	f := newClientForm{Name: r.PostForm.Get("client_name"), RedirectURIs: r.PostForm.Get("redirect_uris"), Public: r.PostForm.Get("public") == "on"}
	created, err := c.cfg.Ops().CreateClient(r.Context(), c.cfg.ClientID, ops.NewClient{Name: f.Name, RedirectURIs: strings.Fields(f.RedirectURIs), Public: f.Public})
	if errors.Is(err, ops.ErrInvalid) {
		f.Error = firstUpper(strings.TrimPrefix(err.Error(), ops.ErrInvalid.Error()+": ")) + "."
		c.show(w, s, http.StatusBadRequest, "newclient.html", "clients", "New client", f)
		return
	}
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	// The only page that shows a secret: the new client's, once.
	c.show(w, s, http.StatusCreated, "created.html", "clients", "Client created", created)
}

// confirmation is the page asking to confirm a destructive action: it
// posts Fields again with confirm=yes.
type confirmation struct {
	Action string
	Fields []field
	Items  []string
	Button string
}

type field struct{ Name, Value string }

func (c *Console) confirm(w http.ResponseWriter, s *session, nav, title, detail string, cf confirmation) {
	c.render(w, http.StatusOK, "confirm.html", &view{Title: title, Detail: detail, Nav: nav, Who: s.Subject, CSRF: s.CSRF, Data: cf})
}

func (c *Console) deleteClient(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PostForm.Get("id")
	if r.PostForm.Get("confirm") != "yes" {
		c.confirm(w, s, "clients", "Delete client?", "Deleting the client revokes every grant it holds; its tokens stop working.",
			confirmation{Action: Prefix + "client/delete", Fields: []field{{"id", id}}, Items: []string{id}, Button: "Delete client"})
		return
	}
	if err := c.cfg.Ops().DeleteClient(r.Context(), c.cfg.ClientID, id); err != nil {
		c.failAs(w, s, err)
		return
	}
	c.done(w, s, "clients", "Client deleted", "Deleted client "+id+".", Prefix+"clients", "Back to clients")
}

// ---- people ----

type peopleList struct {
	Q, After, Next string
	People         []ops.User
}

func (c *Console) people(w http.ResponseWriter, r *http.Request, s *session) {
	q, after := r.URL.Query().Get("q"), r.URL.Query().Get("after")
	o := c.cfg.Ops()
	d := peopleList{Q: q, After: after}
	if q != "" && after == "" {
		if u, err := o.GetUser(r.Context(), q); err == nil {
			d.People = append(d.People, *u)
		} else if !errors.Is(err, ops.ErrNotFound) {
			c.failAs(w, s, err)
			return
		}
		after = q
	}
	page, next, err := o.ListUsers(r.Context(), after, pageSize)
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	for _, u := range page {
		if !strings.HasPrefix(u.Subject, q) {
			next = ""
			break
		}
		d.People = append(d.People, u)
	}
	if len(d.People) > 0 && next != "" {
		d.Next = d.People[len(d.People)-1].Subject
	}
	c.show(w, s, http.StatusOK, "people.html", "people", "People", d)
}

type personPage struct {
	User        ops.User
	Grants      []as.Grant
	Sessions    []storage.Session
	Connections []ops.Connection
	Approvals   []ops.Approval
	// MoreApprovals: the person has more approvals than shown; the
	// approvals page lists them all.
	MoreApprovals bool
}

func (c *Console) showPerson(w http.ResponseWriter, r *http.Request, s *session) {
	o := c.cfg.Ops()
	u, err := o.GetUser(r.Context(), r.URL.Query().Get("sub"))
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	gs, err := o.ListGrants(r.Context(), u.Subject, "")
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	ss, err := c.cfg.Sessions.ListSessions(r.Context(), u.Subject)
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	now := c.now()
	var liveSessions []storage.Session
	for i := range ss {
		if live(&ss[i], now) {
			liveSessions = append(liveSessions, ss[i])
		}
	}
	conns, err := o.ListConnections(r.Context(), u.Subject)
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	aps, next, err := o.ListApprovals(r.Context(), u.Subject, "", pageSize)
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	c.show(w, s, http.StatusOK, "person.html", "people", u.Subject, personPage{User: *u, Grants: gs, Sessions: liveSessions,
		Connections: conns, Approvals: aps, MoreApprovals: next != ""})
}

func (c *Console) disablePerson(w http.ResponseWriter, r *http.Request, s *session) {
	sub := r.PostForm.Get("sub")
	if r.PostForm.Get("confirm") != "yes" {
		c.confirm(w, s, "people", "Disable person?", "They can no longer sign in; every grant they gave is revoked and their sign-in sessions end.",
			confirmation{Action: Prefix + "person/disable", Fields: []field{{"sub", sub}}, Items: []string{sub}, Button: "Disable"})
		return
	}
	ch, err := c.cfg.Ops().DisableUser(r.Context(), c.cfg.ClientID, sub)
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	c.done(w, s, "people", "Person disabled", fmt.Sprintf("Disabled %s: revoked %d grant(s), ended %d session(s).", sub, len(ch.RevokedGrants), ch.EndedSessions),
		Prefix+"person?sub="+url.QueryEscape(sub), "Back to "+sub)
}

func (c *Console) enablePerson(w http.ResponseWriter, r *http.Request, s *session) {
	sub := r.PostForm.Get("sub")
	if _, err := c.cfg.Ops().EnableUser(r.Context(), c.cfg.ClientID, sub); err != nil {
		c.failAs(w, s, err)
		return
	}
	c.done(w, s, "people", "Person enabled", "Enabled "+sub+". Nothing revoked comes back: they sign in and consent anew.",
		Prefix+"person?sub="+url.QueryEscape(sub), "Back to "+sub)
}

// ---- grants ----

type grantList struct {
	User, Client string
	Grants       []as.Grant
	Searched     bool
}

func (c *Console) grants(w http.ResponseWriter, r *http.Request, s *session) {
	d := grantList{User: r.URL.Query().Get("user"), Client: r.URL.Query().Get("client")}
	if d.User != "" || d.Client != "" {
		gs, err := c.cfg.Ops().ListGrants(r.Context(), d.User, d.Client)
		if err != nil {
			c.failAs(w, s, err)
			return
		}
		d.Grants, d.Searched = gs, true
	}
	c.show(w, s, http.StatusOK, "grants.html", "grants", "Grants", d)
}

// revokeGrants revokes the grants named (grant=ID, repeated), or every
// grant of a person and/or client (all=yes with user, client), after a
// confirmation step.
func (c *Console) revokeGrants(w http.ResponseWriter, r *http.Request, s *session) {
	f := r.PostForm
	ids := f["grant"]
	user, client := f.Get("user"), f.Get("client")
	all := f.Get("all") == "yes"
	if !all && len(ids) == 0 {
		c.render(w, http.StatusBadRequest, "message.html", &view{Title: "Nothing to revoke", Detail: "Select at least one grant.", Nav: "grants", Who: s.Subject, CSRF: s.CSRF})
		return
	}
	if all && user == "" && client == "" {
		c.render(w, http.StatusBadRequest, "message.html", &view{Title: "Nothing to revoke", Detail: "Name a person or a client.", Nav: "grants", Who: s.Subject, CSRF: s.CSRF})
		return
	}
	if f.Get("confirm") != "yes" {
		cf := confirmation{Action: Prefix + "grants/revoke", Button: "Revoke"}
		if all {
			cf.Fields = []field{{"all", "yes"}, {"user", user}, {"client", client}}
			desc := "every grant"
			if user != "" {
				desc += " of " + user
			}
			if client != "" {
				desc += " to " + client
			}
			cf.Items = []string{desc}
		} else {
			for _, id := range ids {
				cf.Fields = append(cf.Fields, field{"grant", id})
				cf.Items = append(cf.Items, "grant "+id)
			}
		}
		c.confirm(w, s, "grants", "Revoke access?", "Refresh tokens are refused at once and access tokens stop being accepted. The application must ask the person again.", cf)
		return
	}
	var revoked int
	o := c.cfg.Ops()
	if all {
		gs, err := o.RevokeGrants(r.Context(), c.cfg.ClientID, as.GrantFilter{User: user, Client: client})
		if err != nil {
			c.failAs(w, s, err)
			return
		}
		revoked = len(gs)
	} else {
		for _, id := range ids {
			gs, err := o.RevokeGrants(r.Context(), c.cfg.ClientID, as.GrantFilter{GrantID: id})
			if err != nil {
				c.failAs(w, s, err)
				return
			}
			revoked += len(gs)
		}
	}
	back := Prefix + "grants"
	if user != "" || client != "" {
		back += "?user=" + url.QueryEscape(user) + "&client=" + url.QueryEscape(client)
	}
	c.done(w, s, "grants", "Access revoked", fmt.Sprintf("Revoked %d grant(s).", revoked), back, "Back to grants")
}

// ---- keys ----

type keyPage struct {
	Keys      []keyRow
	Retention time.Duration
}

type keyRow struct {
	as.KeyInfo
	// PrunableAt is when a retired key may be pruned.
	PrunableAt *time.Time
}

func (c *Console) keyRows(r *http.Request) ([]keyRow, error) {
	ks, err := c.cfg.Ops().ListKeys(r.Context())
	if err != nil {
		return nil, err
	}
	out := make([]keyRow, 0, len(ks))
	for _, k := range ks {
		row := keyRow{KeyInfo: k}
		if k.RetiredAt != nil {
			t := k.RetiredAt.Add(c.cfg.KeyRetention)
			row.PrunableAt = &t
		}
		out = append(out, row)
	}
	return out, nil
}

func (c *Console) keys(w http.ResponseWriter, r *http.Request, s *session) {
	rows, err := c.keyRows(r)
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	c.show(w, s, http.StatusOK, "keys.html", "keys", "Signing keys", keyPage{Keys: rows, Retention: c.cfg.KeyRetention})
}

func (c *Console) rotateKey(w http.ResponseWriter, r *http.Request, s *session) {
	kid, err := c.cfg.Ops().RotateKey(r.Context(), c.cfg.ClientID)
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	c.done(w, s, "keys", "Key rotated", "Key "+kid+" signs from now on (every instance switches at its next key reload); the others are retired and stay published.", Prefix+"keys", "Back to keys")
}

func (c *Console) retireKey(w http.ResponseWriter, r *http.Request, s *session) {
	kid := r.PostForm.Get("kid")
	signing, err := c.cfg.Ops().RetireKey(r.Context(), c.cfg.ClientID, kid)
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	c.done(w, s, "keys", "Key retired", "Retired "+kid+"; "+signing+" signs.", Prefix+"keys", "Back to keys")
}

func (c *Console) pruneKeys(w http.ResponseWriter, r *http.Request, s *session) {
	deleted, err := c.cfg.Ops().PruneKeys(r.Context(), c.cfg.ClientID, r.PostForm.Get("unloadable") == "on")
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	detail := fmt.Sprintf("Deleted %d key(s)", len(deleted))
	if len(deleted) > 0 {
		detail += ": " + strings.Join(deleted, ", ")
	}
	c.done(w, s, "keys", "Keys pruned", detail+".", Prefix+"keys", "Back to keys")
}
