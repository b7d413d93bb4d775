package loginui

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcpauth/mcpauth/as/authflow"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

var pages = template.Must(template.ParseFS(templateFS, "templates/*.html"))

// contentSecurityPolicy allows nothing but our own stylesheet and forbids
// framing. It deliberately has no form-action directive: Chromium applies
// form-action to the redirect that follows the consent POST, which would
// block the 303 to the client's redirect URI.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; frame-ancestors 'none'"

// setPageHeaders sets the anti-framing, no-referrer, no-store headers every
// page carries (RFC 9700 §4.11.1 clickjacking, §4.2.4 Referer leakage).
func setPageHeaders(h http.Header) {
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
}

// view is the data every template receives; pages use the fields they need.
type view struct {
	Title string
	Base  string // BasePath, for links and the stylesheet

	// Forms.
	Action string
	Step   string
	CSRF   string
	Flow   string
	// Txn is the sealed authorization transaction the forms carry.
	Txn    string
	Error  string
	Notice string

	// Login.
	Username string
	// Upstreams are the sign-in providers' buttons, posting step
	// "upstream" with UpstreamFlow; Password shows the password form.
	Upstreams      []upstreamView
	UpstreamFlow   string
	UpstreamAction string
	Password       bool

	// Consent.
	Subject      string
	ClientID     string
	ClientName   string
	RedirectHost string
	CIMDHost     string
	LoopbackOnly bool
	Resource     string
	ResourceName string
	Scopes       []scopeView
	Approved     []scopeView // already allowed by a remembered consent

	// Consents list, and the person's signed-in sessions and open
	// approvals.
	Consents  []consentView
	Sessions  []sessionView
	Approvals []approvalItem

	// Approval page.
	Approval *approvalView

	// Error page.
	Detail string
	// Back is a link back to the application, shown on an error page;
	// BackHost is the host it names. BackNote, when set, replaces the
	// explanation of why the person is not sent back on their own.
	Back     template.URL
	BackHost string
	BackNote string
}

type scopeView struct{ Name, Description string }

type sessionView struct {
	ID                 string // stored (hashed) id
	Current            bool
	Since, LastSeen    string
	UserAgent, Address string
}

type consentView struct {
	ClientID, ClientName string
	Resource             string
	Scopes               []string
	GrantedAt            string
	ExpiresAt            string
}

// render executes a template into a buffer first, so a template error never
// leaves half a page on the wire.
func render(w http.ResponseWriter, status int, name string, v *view) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString("<!doctype html><title>Error</title><p>Something went wrong.</p>")
	}
	h := w.Header()
	setPageHeaders(h)
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// ErrorPage writes an HTML error page with the anti-framing headers (used by
// as/ for an unknown client or a bad redirect URI, which are never redirected:
// RFC 6749 §4.1.2.1). title and detail are escaped; keep internals out of
// them. The stylesheet link assumes the issuer has no path; with a BasePath
// use (*UI).ErrorPage.
func ErrorPage(w http.ResponseWriter, status int, title, detail string) {
	errorPage(w, "", status, title, detail)
}

// ErrorPage is the package ErrorPage with the stylesheet under BasePath.
func (u *UI) ErrorPage(w http.ResponseWriter, status int, title, detail string) {
	errorPage(w, u.cfg.BasePath, status, title, detail)
}

// ClientErrorPage is the page shown instead of redirecting an error to a
// client the operator did not configure, before the person has answered any
// page of ours (RFC 9700 §4.11.2: otherwise the server is an open
// redirector). It names the host the link goes to; back is the redirect
// URI with the error response, followed only if the person chooses to.
func (u *UI) ClientErrorPage(w http.ResponseWriter, status int, title, detail, back string) {
	v := &view{Title: title, Base: u.cfg.BasePath, Detail: detail}
	if link, host := backLink(back); link != "" {
		v.Back, v.BackHost = link, host
	}
	if status < 400 || status > 599 {
		status = http.StatusBadRequest
	}
	render(w, status, "error.html", v)
}

// backLink vets a registered redirect URI for use as a link: html/template
// would blank any scheme other than http, https and mailto, but native
// clients return to private-use schemes (RFC 8252 §7.1), so those are let
// through here, except schemes that run code or read files.
func backLink(raw string) (template.URL, string) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return "", ""
	}
	switch strings.ToLower(u.Scheme) {
	case "javascript", "data", "vbscript", "file", "about", "blob":
		return "", ""
	}
	host := u.Host
	if host == "" {
		host = u.Scheme + ":"
	}
	return template.URL(u.String()), host
}

// NotPermittedPage says the person may not be granted some of the requested
// scopes, with a link to the access_denied error response back (the
// client's redirect URI with error, state and iss) that the person follows
// to return to the application.
func (u *UI) NotPermittedPage(w http.ResponseWriter, scopes []string, back string) {
	v := &view{
		Title:  "Access not permitted",
		Base:   u.cfg.BasePath,
		Detail: "The application asked for access your organisation does not give you: " + strings.Join(scopes, ", ") + ". Ask your administrator if you need it.",
	}
	if link, host := backLink(back); link != "" {
		v.Back, v.BackHost = link, host
		v.BackNote = "The application will be told that access was denied."
	}
	render(w, http.StatusForbidden, "error.html", v)
}

func errorPage(w http.ResponseWriter, base string, status int, title, detail string) {
	if status < 400 || status > 599 {
		status = http.StatusBadRequest
	}
	if title == "" {
		title = http.StatusText(status)
	}
	render(w, status, "error.html", &view{Title: title, Base: base, Detail: detail})
}

// loginFor is what a login form signs in for: an authorization
// transaction (txn), or one of the pages Handler serves (page, its flow
// binding).
type loginFor struct {
	txn  *authflow.Transaction
	page string
}

// renderLogin writes the login form, giving the visitor a session first if
// needed. A transaction's forms post it, sealed for this session, to
// LoginPath and UpstreamPath; a page's post back to the page.
func (u *UI) renderLogin(w http.ResponseWriter, r *http.Request, sess session, lf loginFor, status int, msg, username string) {
	sess = u.ensureSession(w, sess)
	v := &view{
		Title:    "Sign in",
		Base:     u.cfg.BasePath,
		Step:     stepLogin,
		CSRF:     u.csrfToken(sess),
		Error:    msg,
		Username: username,
		Password: len(u.users) > 0 || len(u.cfg.Upstreams) == 0,
	}
	if len(u.cfg.Upstreams) > 0 {
		v.Upstreams = u.upstreamViews()
	}
	if t := lf.txn; t != nil {
		t.Session = sess.ID
		if !u.sealInto(w, r, v, t) {
			return
		}
		v.Action, v.UpstreamAction = u.cfg.BasePath+LoginPath, u.cfg.BasePath+UpstreamPath
		v.ClientID, v.ClientName, v.RedirectHost = t.Request.ClientID, displayName(t), t.Display.RedirectHost
	} else {
		v.Action, v.UpstreamAction = selfURL(r), selfURL(r)
		v.Flow = u.newFlow(sess, stepLogin, lf.page)
		if len(u.cfg.Upstreams) > 0 {
			v.UpstreamFlow = u.newFlow(sess, stepUpstream, lf.page)
		}
	}
	render(w, status, "login.html", v)
}

// sealInto seals t for the page's forms; on failure it writes an error
// page and returns false.
func (u *UI) sealInto(w http.ResponseWriter, r *http.Request, v *view, t *authflow.Transaction) bool {
	sealed, err := u.flow.Seal(t)
	if err != nil {
		u.log.ErrorContext(r.Context(), "loginui: sealing the transaction", "err", err)
		u.ErrorPage(w, http.StatusInternalServerError, "Something went wrong", "Please start again from the application.")
		return false
	}
	v.Txn = sealed
	return true
}

// renderContinue is the one-click page for a remembered consent that must
// not be used silently (Request.ConfirmRemembered). It posts the consent
// form with action=approve, so it carries the same CSRF token and
// transaction.
func (u *UI) renderContinue(w http.ResponseWriter, r *http.Request, sess session, t *authflow.Transaction, status int) {
	v := u.askView(r, sess, t, "Continue?")
	if !u.sealInto(w, r, v, t) {
		return
	}
	render(w, status, "continue.html", v)
}

// renderConsent shows the consent page for what t asks. Scopes in
// approved (a remembered consent) are listed apart as already allowed, so
// a step-up asks only about the new ones.
func (u *UI) renderConsent(w http.ResponseWriter, r *http.Request, sess session, t *authflow.Transaction, approved []string, status int, msg string) {
	v := u.askView(r, sess, t, "Allow access?")
	v.Error = msg
	for _, s := range t.Asked {
		sv := scopeView{Name: s, Description: u.cfg.ScopeDescriptions[s]}
		if slices.Contains(approved, s) {
			v.Approved = append(v.Approved, sv)
		} else {
			v.Scopes = append(v.Scopes, sv)
		}
	}
	if !u.sealInto(w, r, v, t) {
		return
	}
	render(w, status, "consent.html", v)
}

// askView is what the consent and continue pages show of t.
func (u *UI) askView(r *http.Request, sess session, t *authflow.Transaction, title string) *view {
	d := &t.Display
	v := &view{
		Title:        title,
		Base:         u.cfg.BasePath,
		Action:       u.cfg.BasePath + ConsentPath,
		Step:         stepConsent,
		CSRF:         u.csrfToken(sess),
		Subject:      u.who(r.Context(), sess.Subject),
		ClientID:     t.Request.ClientID,
		ClientName:   displayName(t),
		RedirectHost: d.RedirectHost,
		CIMDHost:     d.CIMDHost,
		LoopbackOnly: d.LoopbackOnly,
		Resource:     t.Request.Resource,
		ResourceName: d.ResourceName,
	}
	if v.ResourceName == "" {
		v.ResourceName = t.Request.Resource
	}
	return v
}

// maxNameRunes bounds how much of a client-chosen name is shown.
const maxNameRunes = 80

// displayName is the client's self-chosen name (or its id) made safe to show:
// control and format characters (bidi overrides that could reverse "edualC"
// into "Claude", zero-width joiners) are dropped and long names are cut.
// html/template escapes the rest.
func displayName(t *authflow.Transaction) string {
	name := cleanText(t.Display.ClientName)
	if strings.TrimSpace(name) == "" {
		name = cleanText(t.Request.ClientID)
	}
	return name
}

func cleanText(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			continue
		}
		if n == maxNameRunes {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}
