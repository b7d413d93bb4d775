package console

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/ops"
)

// ---- approvals ----

type approvalList struct {
	User, After, Next string
	Approvals         []ops.Approval
}

// approvals lists the approvals of held tool calls in id order, a page at
// a time (the store's cursor), of one person when user is set. A row
// shows the tool and the digest of the arguments, never the arguments:
// only the person who made the call sees them, on the approval page.
func (c *Console) approvals(w http.ResponseWriter, r *http.Request, s *session) {
	d := approvalList{User: r.URL.Query().Get("user"), After: r.URL.Query().Get("after")}
	list, next, err := c.cfg.Ops().ListApprovals(r.Context(), d.User, d.After, pageSize)
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	d.Approvals, d.Next = list, next
	c.show(w, s, http.StatusOK, "approvals.html", "approvals", "Approvals", d)
}

// revokeApproval deletes one approval (id), whatever its status, after a
// confirmation step: a pending one can no longer be decided, an approved
// one no longer used. sub, when set, is the person page to go back to.
func (c *Console) revokeApproval(w http.ResponseWriter, r *http.Request, s *session) {
	id, sub := r.PostForm.Get("id"), r.PostForm.Get("sub")
	if id == "" {
		c.render(w, http.StatusBadRequest, "message.html", &view{Title: "Nothing to revoke", Detail: "Name an approval.", Nav: "approvals", Who: s.Subject, CSRF: s.CSRF})
		return
	}
	back, label := Prefix+"approvals", "Back to approvals"
	if sub != "" {
		back, label = Prefix+"person?sub="+url.QueryEscape(sub), "Back to "+sub
	}
	if r.PostForm.Get("confirm") != "yes" {
		item := "approval " + id
		if tool := r.PostForm.Get("tool"); tool != "" {
			item += " (" + tool + ")"
		}
		c.confirm(w, s, "approvals", "Revoke approval?", "A pending approval can no longer be decided and an approved one no longer used: the held call, retried, is held again.",
			confirmation{Action: Prefix + "approvals/revoke", Fields: []field{{"id", id}, {"sub", sub}}, Items: []string{item}, Button: "Revoke approval"})
		return
	}
	if err := c.cfg.Ops().RevokeApproval(r.Context(), c.cfg.ClientID, id); err != nil {
		c.failAs(w, s, err)
		return
	}
	c.done(w, s, "approvals", "Approval revoked", "Revoked approval "+id+".", back, label)
}

// ---- connections ----

type connectionList struct {
	User        string
	Connections []ops.Connection
}

// connections lists the people's connected accounts, of one person when
// user is set, in subject then connection order. No provider token is
// ever read for it.
func (c *Console) connections(w http.ResponseWriter, r *http.Request, s *session) {
	d := connectionList{User: r.URL.Query().Get("user")}
	list, err := c.cfg.Ops().ListConnections(r.Context(), d.User)
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	d.Connections = list
	c.show(w, s, http.StatusOK, "connections.html", "connections", "Connections", d)
}

// revokeConnection disconnects a person's (sub) connected account
// (connection) after a confirmation step: its records go, no token of it
// is released any more, and the provider is asked to revoke the tokens
// where it can (RFC 7009). back=person returns to the person's page.
func (c *Console) revokeConnection(w http.ResponseWriter, r *http.Request, s *session) {
	sub, conn, from := r.PostForm.Get("sub"), r.PostForm.Get("connection"), r.PostForm.Get("back")
	if sub == "" || conn == "" {
		c.render(w, http.StatusBadRequest, "message.html", &view{Title: "Nothing to revoke", Detail: "Name a person and a connection.", Nav: "connections", Who: s.Subject, CSRF: s.CSRF})
		return
	}
	back, label := Prefix+"connections?user="+url.QueryEscape(sub), "Back to connections"
	if from == "person" {
		back, label = Prefix+"person?sub="+url.QueryEscape(sub), "Back to "+sub
	}
	if r.PostForm.Get("confirm") != "yes" {
		c.confirm(w, s, "connections", "Revoke connection?", "The person's account at the provider is disconnected: its tokens are deleted here, revoked at the provider where it can, and released to no MCP server any more. The person can connect again.",
			confirmation{Action: Prefix + "connections/revoke", Fields: []field{{"sub", sub}, {"connection", conn}, {"back", from}},
				Items: []string{conn + " of " + sub}, Button: "Revoke connection"})
		return
	}
	revoked, err := c.cfg.Ops().RevokeConnections(r.Context(), c.cfg.ClientID, sub, conn)
	if err != nil {
		c.failAs(w, s, err)
		return
	}
	c.done(w, s, "connections", "Connection revoked", fmt.Sprintf("Revoked %d connection(s) of %s.", len(revoked), sub), back, label)
}
