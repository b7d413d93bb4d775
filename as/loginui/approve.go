package loginui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mcpauth/mcpauth/storage"
)

// ApprovalPath prefixes the page where a person decides about a held tool
// call: ApprovalPath followed by the approval's id.
const ApprovalPath = "/approve/"

// ApprovalStore is the part of storage.ApprovalStore the pages use: the
// approval page reads and decides approvals, /consents lists and revokes
// the person's.
type ApprovalStore interface {
	GetApproval(ctx context.Context, id string) (*storage.Approval, error)
	DecideApproval(ctx context.Context, id, subject string, approve bool, now time.Time) (*storage.Approval, error)
	ListApprovals(ctx context.Context, subject, afterID string, limit int) ([]storage.Approval, error)
	DeleteApproval(ctx context.Context, subject, id string) error
}

// Names gives the display names the approval page shows: a client's name
// ("" when it has none) and a resource's configured name ("" when it has
// none). The authorization server provides them (SetNames).
type Names interface {
	ClientName(ctx context.Context, clientID string) string
	ResourceName(uri string) string
}

// SetNames makes the pages name clients and resources with n. Call it
// before Handler serves; the authorization server (as.New) does.
func (u *UI) SetNames(n Names) { u.names = n }

// approvalIDLen is the length of an approval id: 128 bits, base64url.
const approvalIDLen = 22

// approvalID reports whether s has the form of an approval id.
func approvalID(s string) bool {
	if len(s) != approvalIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// approvalPage is the page name (for sign-in and its flow binding) of the
// approval page of id.
func approvalPage(id string) string { return strings.TrimPrefix(ApprovalPath, "/") + id }

// approvalView is what the approval page shows of one approval.
type approvalView struct {
	ID           string
	Tool         string
	ClientID     string
	ClientName   string
	Resource     string
	ResourceName string
	Expires      string
	Digest       string
	Args         argNode
}

// serveApproval is the page of one approval (GET shows it, POST decides
// it with the session's CSRF token). Only the approval's subject may see
// or decide it: anyone not signed in gets the sign-in form (password or
// upstream provider), which returns here; another person signed in gets
// a refusal.
func (u *UI) serveApproval(w http.ResponseWriter, r *http.Request, id string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, HEAD, POST")
		u.ErrorPage(w, http.StatusMethodNotAllowed, "Method not allowed", "")
		return
	}
	if u.cfg.Approvals == nil || !approvalID(id) {
		u.ErrorPage(w, http.StatusNotFound, "Not found", "There is no such page.")
		return
	}
	sess := u.readSession(r)
	page := approvalPage(id)
	bind := pageBinding(page)
	var f *submittedForm
	if r.Method == http.MethodPost {
		var err error
		if f, err = u.parseForm(w, r); err != nil {
			u.ErrorPage(w, http.StatusBadRequest, "Bad request", "The form could not be read.")
			return
		}
		switch f.Step {
		case stepLogin:
			u.handleLoginPost(w, r, sess, f, bind)
			return
		case stepUpstream:
			u.handleUpstreamPost(w, r, sess, f, page, bind)
			return
		}
	}
	if sess.Subject == "" || !u.active(r.Context(), sess.Subject) {
		u.renderLogin(w, r, sess, loginFor{page: bind}, http.StatusOK, "", "")
		return
	}
	a, err := u.cfg.Approvals.GetApproval(r.Context(), id)
	if errors.Is(err, storage.ErrNotFound) {
		u.ErrorPage(w, http.StatusNotFound, "No such request", "There is no approval request at this address. It may have been withdrawn.")
		return
	}
	if err != nil {
		u.storageError(w, r, "reading an approval", err)
		return
	}
	if a.Subject != sess.Subject {
		u.audit(r.Context(), "approval.refused", "approval_id", id, "sub", sess.Subject, "reason", "another_person")
		u.ErrorPage(w, http.StatusForbidden, "Not your request",
			"This tool call was requested for another person. Only that person can approve or deny it. Sign out and sign in as them, or return to your application.")
		return
	}
	if f != nil {
		u.decideApproval(w, r, sess, f, a)
		return
	}
	u.showApproval(w, r, sess, a, http.StatusOK)
}

// showApproval writes the page of a: its details and the approve and
// deny buttons while it is pending, otherwise what became of it.
func (u *UI) showApproval(w http.ResponseWriter, r *http.Request, sess session, a *storage.Approval, status int) {
	now := u.now()
	switch {
	case !a.Live(now) && (a.Status == storage.ApprovalPending || a.Status == storage.ApprovalApproved):
		u.approvalMessage(w, http.StatusGone, "Request expired",
			"This request expired before it was used. Return to your application and try again: it will ask you again.")
		return
	case a.Status == storage.ApprovalApproved:
		u.approvalMessage(w, http.StatusOK, "Already approved", "You approved this tool call. Return to your application and try again.")
		return
	case a.Status == storage.ApprovalUsed:
		u.approvalMessage(w, http.StatusOK, "Already used", "You approved this tool call and it has run. Another call needs a new approval.")
		return
	case a.Status == storage.ApprovalDenied:
		u.approvalMessage(w, http.StatusOK, "Denied", "You denied this tool call.")
		return
	}
	args, err := argTree(a.Arguments)
	if err != nil {
		// Never show less than what will run: arguments that cannot be
		// read are not offered for approval.
		u.log.ErrorContext(r.Context(), "loginui: stored approval arguments unreadable", "approval_id", a.ID, "err", err)
		u.ErrorPage(w, http.StatusInternalServerError, "Something went wrong", "This request cannot be shown. Return to your application and try again.")
		return
	}
	av := &approvalView{
		ID: a.ID, Tool: visibleText(a.Tool), ClientID: visibleText(a.ClientID), Resource: visibleText(a.Resource),
		Expires: a.ExpiresAt.UTC().Format("2006-01-02 15:04:05 UTC"), Digest: a.ArgsDigest, Args: args,
	}
	if u.names != nil {
		av.ClientName = cleanText(u.names.ClientName(r.Context(), a.ClientID))
		av.ResourceName = cleanText(u.names.ResourceName(a.Resource))
	}
	if strings.TrimSpace(av.ClientName) == "" {
		av.ClientName = av.ClientID
	}
	if strings.TrimSpace(av.ResourceName) == "" {
		av.ResourceName = av.Resource
	}
	render(w, status, "approve.html", &view{
		Title: "Approve this tool call?", Base: u.cfg.BasePath, Action: selfURL(r), Step: stepApproval,
		CSRF: u.csrfToken(sess), Subject: u.who(r.Context(), sess.Subject), Approval: av,
	})
}

func (u *UI) approvalMessage(w http.ResponseWriter, status int, title, notice string) {
	render(w, status, "message.html", &view{Title: title, Base: u.cfg.BasePath, Notice: notice})
}

// decideApproval records the person's answer to a (their own approval).
func (u *UI) decideApproval(w http.ResponseWriter, r *http.Request, sess session, f *submittedForm, a *storage.Approval) {
	if f.Step != stepApproval || !u.validCSRF(sess, f.CSRF) || (f.Action != "approve" && f.Action != "deny") {
		u.ErrorPage(w, http.StatusForbidden, "Form expired", "This form has expired. Please open the page again.")
		return
	}
	approve := f.Action == "approve"
	d, err := u.cfg.Approvals.DecideApproval(r.Context(), a.ID, sess.Subject, approve, u.now())
	switch {
	case errors.Is(err, storage.ErrInactive) || errors.Is(err, storage.ErrNotFound):
		// Decided in another tab, expired, or withdrawn meanwhile.
		cur, gerr := u.cfg.Approvals.GetApproval(r.Context(), a.ID)
		if gerr != nil {
			u.approvalMessage(w, http.StatusGone, "Request withdrawn", "This request no longer exists. Return to your application and try again.")
			return
		}
		u.showApproval(w, r, sess, cur, http.StatusConflict)
		return
	case err != nil:
		u.storageError(w, r, "deciding an approval", err)
		return
	}
	event, title := "approval.denied", "Denied"
	notice := "You denied this tool call. It will not run. Return to your application."
	if approve {
		event, title = "approval.approved", "Approved"
		notice = "You approved this tool call. Return to your application and try again: the call will run once."
	}
	u.audit(r.Context(), event, "approval_id", d.ID, "sub", d.Subject, "client_id", d.ClientID, "resource", d.Resource,
		"tool", d.Tool, "args_digest", d.ArgsDigest)
	u.approvalMessage(w, http.StatusOK, title, notice)
}

// Folding of long string values.
const (
	// foldRunes: a string value of more runes than this (as shown) is
	// folded into a <details> element.
	foldRunes = 120
	// foldLines: so is one of more lines than this.
	foldLines = 3
	// headRunes is how much of each end of a folded value its summary
	// shows.
	headRunes = 48
)

// argNode is one JSON value of the arguments as the approval page shows
// it: an object or array with its members, or a scalar as text. Key is
// the member name an object member has (visible form, quoted).
type argNode struct {
	Kind  string // object, array, string, number, literal
	Key   string
	Text  string
	Long  bool
	Head  string
	Tail  string
	Runes int
	Items []argNode
	Last  bool
}

// argTree parses the canonical JSON of arguments into the tree the page
// renders, in the stored member order.
func argTree(b []byte) (argNode, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	n, err := argValue(dec, 0)
	if err != nil {
		return argNode{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return argNode{}, errors.New("loginui: trailing data after the arguments")
	}
	return n, nil
}

// maxArgDepth bounds the nesting argTree follows (the approvals endpoint
// accepts less).
const maxArgDepth = 200

func argValue(dec *json.Decoder, depth int) (argNode, error) {
	if depth > maxArgDepth {
		return argNode{}, errors.New("loginui: arguments nest too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return argNode{}, err
	}
	switch v := tok.(type) {
	case json.Delim:
		n := argNode{Kind: "object"}
		if v == '[' {
			n.Kind = "array"
		}
		for dec.More() {
			var key string
			if n.Kind == "object" {
				kt, err := dec.Token()
				if err != nil {
					return argNode{}, err
				}
				k, ok := kt.(string)
				if !ok {
					return argNode{}, errors.New("loginui: object member without a name")
				}
				key = visibleString(k)
			}
			child, err := argValue(dec, depth+1)
			if err != nil {
				return argNode{}, err
			}
			child.Key = key
			n.Items = append(n.Items, child)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return argNode{}, err
		}
		if len(n.Items) > 0 {
			n.Items[len(n.Items)-1].Last = true
		}
		return n, nil
	case string:
		n := argNode{Kind: "string", Text: visibleString(v)}
		n.Runes = utf8.RuneCountInString(n.Text)
		if n.Runes > foldRunes || strings.Count(n.Text, "\n") > foldLines {
			// The summary shows both ends: what a value says at its
			// end is often what matters.
			n.Long = true
			r := []rune(n.Text)
			if len(r) > 2*headRunes {
				n.Head, n.Tail = string(r[:headRunes]), string(r[len(r)-headRunes:])
			} else {
				n.Head = string(r[:len(r)/2])
				n.Tail = string(r[len(r)/2:])
			}
		}
		return n, nil
	case json.Number:
		return argNode{Kind: "number", Text: v.String()}, nil
	case bool:
		return argNode{Kind: "literal", Text: fmt.Sprint(v)}, nil
	case nil:
		return argNode{Kind: "literal", Text: "null"}, nil
	}
	return argNode{}, fmt.Errorf("loginui: unexpected JSON token %T", tok)
}

// visibleString is s as a JSON string literal in which every character
// that would not show, or would show as something else, is an escape: the
// escapes of RFC 8259 §7 for quotes, backslashes and control characters,
// and \uXXXX (\u{XXXXX} beyond the BMP) for DEL, C1 controls, format
// characters (bidirectional overrides, zero-width joiners, tags), line and
// paragraph separators, spaces other than U+0020 and other invisible
// fillers. After each \n escape the text breaks its line too, so that
// multi-line values stay readable.
func visibleString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i, w := 0, 0; i < len(s); i += w {
		r, size := utf8.DecodeRuneInString(s[i:])
		w = size
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString("\\n\n")
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case invisible(r):
			if r > 0xFFFF {
				fmt.Fprintf(&b, `\u{%X}`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// visibleText is s with the characters visibleString escapes escaped, but
// not quoted: for identifiers (a tool name, a client id).
func visibleText(s string) string {
	v := visibleString(s)
	return strings.ReplaceAll(v[1:len(v)-1], "\\n\n", `\n`)
}

// invisible reports whether r would not show as itself on the page.
func invisible(r rune) bool {
	switch {
	case unicode.IsControl(r), unicode.Is(unicode.Cf, r), unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
		return true
	case unicode.Is(unicode.Zs, r) && r != ' ':
		return true
	case unicode.Is(unicode.Co, r), r == utf8.RuneError:
		return true
	// Default-ignorable fillers and joiners of other categories, and
	// variation selectors.
	case r == 0x034F, r == 0x115F, r == 0x1160, r == 0x17B4, r == 0x17B5, r == 0x3164, r == 0xFFA0,
		0xFE00 <= r && r <= 0xFE0F, 0xE0100 <= r && r <= 0xE01EF, 0x180B <= r && r <= 0x180F:
		return true
	}
	return false
}

// approvalItem is one open approval on the /consents page.
type approvalItem struct {
	ID, Tool, ClientName, ResourceName string
	Approved                           bool
	Expires                            string
	Link                               string
}

// maxListedApprovals bounds how many of a person's approvals /consents
// reads.
const maxListedApprovals = 200

// openApprovals lists subject's approvals that are pending or approved and
// unused, and still live, for the /consents page.
func (u *UI) openApprovals(ctx context.Context, subject string) ([]approvalItem, error) {
	if u.cfg.Approvals == nil {
		return nil, nil
	}
	list, err := u.cfg.Approvals.ListApprovals(ctx, subject, "", maxListedApprovals)
	if err != nil {
		return nil, err
	}
	now := u.now()
	var out []approvalItem
	for _, a := range list {
		if !a.Live(now) || (a.Status != storage.ApprovalPending && a.Status != storage.ApprovalApproved) {
			continue
		}
		it := approvalItem{
			ID: a.ID, Tool: visibleText(a.Tool), ClientName: visibleText(a.ClientID), ResourceName: visibleText(a.Resource),
			Approved: a.Status == storage.ApprovalApproved, Expires: a.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"),
			Link: u.cfg.BasePath + ApprovalPath + a.ID,
		}
		if u.names != nil {
			if n := cleanText(u.names.ClientName(ctx, a.ClientID)); strings.TrimSpace(n) != "" {
				it.ClientName = n
			}
			if n := cleanText(u.names.ResourceName(a.Resource)); strings.TrimSpace(n) != "" {
				it.ResourceName = n
			}
		}
		out = append(out, it)
	}
	return out, nil
}

// revokeApproval withdraws one of the person's approvals (POST with CSRF
// from /consents).
func (u *UI) revokeApproval(w http.ResponseWriter, r *http.Request, sess session, f *submittedForm) {
	if !u.validCSRF(sess, f.CSRF) || !approvalID(f.ApprovalID) || u.cfg.Approvals == nil {
		u.ErrorPage(w, http.StatusForbidden, "Form expired", "This form has expired. Please open the page again.")
		return
	}
	err := u.cfg.Approvals.DeleteApproval(r.Context(), sess.Subject, f.ApprovalID)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		u.storageError(w, r, "revoking an approval", err)
		return
	}
	if err == nil {
		u.audit(r.Context(), "approval.revoked", "approval_id", f.ApprovalID, "sub", sess.Subject)
	}
	http.Redirect(w, r, selfURL(r), http.StatusSeeOther)
}
