package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/net/html"
)

// page is one HTML page the form driver saw.
type page struct {
	URL    string
	Status int
	Title  string
	Kind   string // "login", "consent" or "other"
	Text   string // visible text, whitespace collapsed
}

// formLogin is an auth.AuthorizationCodeFetcher that behaves like a person in
// a browser without JavaScript: it opens the authorization URL, submits the
// login form with its credentials and the consent form's approve button, and
// stops at the redirect to the client's redirect URI, whose query carries the
// authorization response. It keeps cookies across authorizations, as a
// browser does.
type formLogin struct {
	username, password string
	redirectURI        string

	mu      sync.Mutex
	client  *http.Client
	pages   []page
	urls    []string // authorization URLs received
	posts   []int    // status codes answered to form POSTs
	deny    bool     // press Deny instead of Approve
	deliver bool     // follow the final redirect to the client's listener
	maxStep int
}

func newFormLogin(username, password, redirectURI string) *formLogin {
	jar, _ := cookiejar.New(nil)
	f := &formLogin{username: username, password: password, redirectURI: redirectURI, maxStep: 8}
	f.client = &http.Client{
		Jar: jar,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if strings.HasPrefix(req.URL.String(), f.redirectURI) || len(via) > 10 {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	return f
}

// fetch implements auth.AuthorizationCodeFetcher.
func (f *formLogin) fetch(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	target, err := f.authorize(ctx, args.URL)
	if err != nil {
		return nil, err
	}
	return authorizationResponse(target)
}

// authorize opens authURL, walks the login and consent forms and returns the
// URL the AS finally redirected to (the client's redirect URI with the
// authorization response in its query).
func (f *formLogin) authorize(ctx context.Context, authURL string) (string, error) {
	f.mu.Lock()
	f.urls = append(f.urls, authURL)
	f.mu.Unlock()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return "", err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return "", err
	}
	for step := 0; ; step++ {
		if step > f.maxStep {
			resp.Body.Close()
			return "", errors.New("form driver: too many pages before the redirect")
		}
		if loc := resp.Header.Get("Location"); resp.StatusCode/100 == 3 && strings.HasPrefix(resolve(resp.Request.URL, loc), f.redirectURI) {
			resp.Body.Close()
			target := resolve(resp.Request.URL, loc)
			if f.deliver {
				// Hand the response to the client's own loopback listener,
				// as the browser would.
				if err := deliver(ctx, target); err != nil {
					return "", err
				}
			}
			return target, nil
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil {
			return "", err
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			return "", fmt.Errorf("form driver: %s answered %s (%s): %.300s", resp.Request.URL, resp.Status, resp.Header.Get("Content-Type"), body)
		}
		doc, err := html.Parse(strings.NewReader(string(body)))
		if err != nil {
			return "", err
		}
		pg := page{URL: resp.Request.URL.String(), Status: resp.StatusCode, Title: title(doc), Text: visibleText(doc)}
		form, kind := pickForm(doc)
		pg.Kind = kind
		f.mu.Lock()
		f.pages = append(f.pages, pg)
		f.mu.Unlock()
		if form == nil {
			return "", fmt.Errorf("form driver: no login or consent form on %s (%q): %.300s", pg.URL, pg.Title, pg.Text)
		}
		values, action, err := f.fill(form, kind, resp.Request.URL)
		if err != nil {
			return "", err
		}
		post, err := http.NewRequestWithContext(ctx, http.MethodPost, action, strings.NewReader(values.Encode()))
		if err != nil {
			return "", err
		}
		post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err = f.client.Do(post)
		if err != nil {
			return "", err
		}
		f.mu.Lock()
		f.posts = append(f.posts, postStatus(resp))
		f.mu.Unlock()
	}
}

// deliver GETs the redirect URI with the authorization response.
func deliver(ctx context.Context, target string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("delivering the authorization response: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the client's callback answered %s", resp.Status)
	}
	return nil
}

// postStatus is the status of the first answer to a POST: the client follows
// redirects, so look at the request chain.
func postStatus(resp *http.Response) int {
	r := resp
	for r.Request != nil && r.Request.Response != nil {
		r = r.Request.Response
	}
	return r.StatusCode
}

func resolve(base *url.URL, ref string) string {
	u, err := base.Parse(ref)
	if err != nil {
		return ref
	}
	return u.String()
}

// authorizationResponse parses the redirect to the client (RFC 6749 §4.1.2,
// RFC 9207).
func authorizationResponse(loc string) (*auth.AuthorizationResult, error) {
	u, err := url.Parse(loc)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	if e := q.Get("error"); e != "" {
		return nil, &authzError{Code: e, Description: q.Get("error_description"), Iss: q.Get("iss")}
	}
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}

// authzError is an error authorization response.
type authzError struct{ Code, Description, Iss string }

func (e *authzError) Error() string {
	return "authorization response: " + e.Code + ": " + e.Description
}

var approveRE = regexp.MustCompile(`(?i)approve|allow|accept|authori[sz]e|consent|grant|yes|continue`)
var denyRE = regexp.MustCompile(`(?i)deny|reject|cancel|decline|\bno\b`)

// fill collects the form's successful controls (HTML §4.10.21.4) and fills in
// credentials or chooses the approve/deny button.
func (f *formLogin) fill(form *html.Node, kind string, base *url.URL) (url.Values, string, error) {
	values := url.Values{}
	var buttons []*html.Node
	walk(form, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		name := attr(n, "name")
		switch n.Data {
		case "input":
			typ := strings.ToLower(attr(n, "type"))
			switch typ {
			case "submit", "image":
				buttons = append(buttons, n)
			case "checkbox", "radio":
				if hasAttr(n, "checked") && name != "" {
					v := attr(n, "value")
					if !hasAttr(n, "value") {
						v = "on"
					}
					values.Add(name, v)
				}
			case "password":
				if name != "" {
					values.Set(name, f.password)
				}
			case "button", "reset", "file":
			default: // text, hidden, email, ...
				if name == "" {
					return
				}
				if kind == "login" && typ != "hidden" && regexp.MustCompile(`(?i)user|login|email|name`).MatchString(name) {
					values.Set(name, f.username)
				} else {
					values.Add(name, attr(n, "value"))
				}
			}
		case "button":
			if t := strings.ToLower(attr(n, "type")); t == "" || t == "submit" {
				buttons = append(buttons, n)
			}
		case "textarea":
			if name != "" {
				values.Add(name, textOf(n))
			}
		}
	})
	// Pick the button that says what we mean.
	want := approveRE
	if f.deny && kind == "consent" {
		want = denyRE
	}
	var chosen *html.Node
	for _, b := range buttons {
		label := attr(b, "name") + " " + attr(b, "value") + " " + textOf(b)
		if kind == "consent" && !f.deny && denyRE.MatchString(label) {
			continue
		}
		if want.MatchString(label) || (kind == "login" && chosen == nil) {
			chosen = b
			break
		}
	}
	if kind == "consent" && chosen == nil {
		return nil, "", fmt.Errorf("form driver: no %s button among %d buttons", map[bool]string{true: "deny", false: "approve"}[f.deny], len(buttons))
	}
	if chosen != nil && attr(chosen, "name") != "" {
		values.Set(attr(chosen, "name"), attr(chosen, "value"))
	}
	action := attr(form, "action")
	if chosen != nil && hasAttr(chosen, "formaction") {
		action = attr(chosen, "formaction")
	}
	if action == "" {
		return values, base.String(), nil
	}
	return values, resolve(base, action), nil
}

// pickForm finds the login form (one with a password field) or the consent
// form (one with an approve button).
func pickForm(doc *html.Node) (*html.Node, string) {
	var forms []*html.Node
	walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "form" && !strings.EqualFold(attr(n, "method"), "get") {
			forms = append(forms, n)
		}
	})
	for _, fm := range forms {
		found := false
		walk(fm, func(n *html.Node) {
			if n.Type == html.ElementNode && n.Data == "input" && strings.EqualFold(attr(n, "type"), "password") {
				found = true
			}
		})
		if found {
			return fm, "login"
		}
	}
	for _, fm := range forms {
		found := false
		walk(fm, func(n *html.Node) {
			if n.Type == html.ElementNode && (n.Data == "button" || (n.Data == "input" && strings.EqualFold(attr(n, "type"), "submit"))) {
				if approveRE.MatchString(attr(n, "name") + " " + attr(n, "value") + " " + textOf(n)) {
					found = true
				}
			}
		})
		if found {
			return fm, "consent"
		}
	}
	return nil, "other"
}

func walk(n *html.Node, fn func(*html.Node)) {
	fn(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, fn)
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if strings.EqualFold(a.Key, key) {
			return a.Val
		}
	}
	return ""
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if strings.EqualFold(a.Key, key) {
			return true
		}
	}
	return false
}

func textOf(n *html.Node) string {
	var b strings.Builder
	walk(n, func(c *html.Node) {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
			b.WriteByte(' ')
		}
	})
	return strings.Join(strings.Fields(b.String()), " ")
}

func title(doc *html.Node) string {
	var t string
	walk(doc, func(n *html.Node) {
		if t == "" && n.Type == html.ElementNode && n.Data == "title" {
			t = textOf(n)
		}
	})
	return t
}

// visibleText is the document's text outside script, style and head.
func visibleText(doc *html.Node) string {
	var b strings.Builder
	var rec func(*html.Node)
	rec = func(n *html.Node) {
		if n.Type == html.ElementNode && (n.Data == "script" || n.Data == "style" || n.Data == "head") {
			return
		}
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			b.WriteByte(' ')
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			rec(c)
		}
	}
	rec(doc)
	return strings.Join(strings.Fields(b.String()), " ")
}
