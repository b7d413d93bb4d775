package loginui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/as/authflow"
	"github.com/mcpauth/mcpauth/as/loginui"
	"github.com/mcpauth/mcpauth/internal/password"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// The authorization endpoint validates the request once into a
// transaction, and authflow.Next decides the step; for a visitor nobody
// signed in, that is the login page, whose form posts the sealed
// transaction to the login step's own path.
func ExampleUI_SignIn() {
	store := memory.New()
	hash, err := password.Hash("s3cret")
	if err != nil {
		panic(err)
	}
	secret := []byte("an example secret of at least 32 bytes")
	ui, err := loginui.New(loginui.Config{
		Users:    []loginui.User{{Username: "alice", PasswordHash: hash}},
		Consents: store,
		JTIs:     store,
		Secret:   secret,
	})
	if err != nil {
		panic(err)
	}
	flow, err := authflow.NewCodec(secret, store, 0, nil)
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		// as/ has checked client_id, redirect_uri, PKCE, resource and scope here.
		t := flow.New(authflow.Request{
			ClientID: "demo-app", RedirectURI: "http://127.0.0.1:7777/callback", State: r.URL.Query().Get("state"),
			Resource: "http://127.0.0.1:8080/mcp", Scopes: []string{"mcp:tools"}, MaxAge: -1,
		}, authflow.Display{ClientName: "Demo app", RedirectHost: "127.0.0.1:7777", LoopbackOnly: true})
		sess := ui.Session(w, r)
		t.Session = sess.ID
		d := authflow.Next(authflow.Input{Txn: t, Session: sess, OnlyProvider: ui.OnlyProvider(), Now: time.Now()})
		if d.Step == authflow.SignIn {
			ui.SignIn(w, r, sess, t, d)
		}
	})
	mux.Handle("/", ui.Handler()) // the steps, /logout, /consents, /ui/
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/authorize?client_id=demo-app&state=xyz")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("X-Frame-Options"))
	fmt.Println(strings.Contains(string(body), `action="`+loginui.LoginPath+`"`), strings.Contains(string(body), `name="txn"`))
	// Output:
	// 200 DENY
	// true true
}

// as/ answers an unknown client or an unregistered redirect URI with an HTML
// page, never a redirect.
func ExampleErrorPage() {
	rec := httptest.NewRecorder()
	loginui.ErrorPage(rec, http.StatusBadRequest, "Unknown application", `No application "<demo>" is registered.`)
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	fmt.Println(strings.Contains(rec.Body.String(), "&lt;demo&gt;"))
	// Output:
	// 400 text/html; charset=utf-8
	// true
}

// Handler serves the pages outside the authorization flow; mount it next to
// the authorization endpoint under the issuer's path.
func ExampleUI_Handler() {
	store := memory.New()
	ui, err := loginui.New(loginui.Config{
		Consents: store,
		JTIs:     store,
		Secret:   []byte("an example secret of at least 32 bytes"),
		BasePath: "/auth",
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	for _, p := range []string{"/auth/logout", "/auth/consents", "/auth/ui/"} {
		mux.Handle(p, ui.Handler())
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, p := range []string{"/auth/ui/style.css", "/auth/logout"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(p, resp.StatusCode, strings.Split(resp.Header.Get("Content-Type"), ";")[0])
	}
	// Output:
	// /auth/ui/style.css 200 text/css
	// /auth/logout 200 text/html
}

// An authorization error for a client the operator did not configure is
// shown on the server's own page, with a link back that the person may
// follow, instead of an automatic redirect (RFC 9700 §4.11.2).
func ExampleUI_ClientErrorPage() {
	store := memory.New()
	ui, err := loginui.New(loginui.Config{Consents: store, JTIs: store, Secret: []byte("an example secret of at least 32 bytes")})
	if err != nil {
		panic(err)
	}
	rec := httptest.NewRecorder()
	ui.ClientErrorPage(rec, http.StatusBadRequest, "The request could not be completed", "PKCE is required.",
		"https://app.example/cb?error=invalid_request&state=xyz")
	body := rec.Body.String()
	fmt.Println(rec.Code, rec.Header().Get("Location") == "")
	fmt.Println(strings.Contains(body, `<a href="https://app.example/cb?error=invalid_request&amp;state=xyz" rel="noreferrer">Return to app.example</a>`))
	// Output:
	// 400 true
	// true
}

// With Config.Approvals, Handler serves the page of each approval of a
// held tool call under ApprovalPath; only its person may see it, so a
// visitor who is not signed in gets the sign-in form, which returns there.
func ExampleUI_SetNames() {
	store := memory.New()
	ui, err := loginui.New(loginui.Config{
		Consents:  store,
		JTIs:      store,
		Approvals: store,
		Secret:    []byte("an example secret of at least 32 bytes"),
	})
	if err != nil {
		panic(err)
	}
	ui.SetNames(names{}) // the authorization server does this in as.New
	srv := httptest.NewServer(ui.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + loginui.ApprovalPath + "AAAAAAAAAAAAAAAAAAAAAA")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, strings.Contains(string(body), `name="password"`), resp.Header.Get("X-Frame-Options"))
	// Output: 200 true DENY
}

// names names clients and resources for the pages.
type names struct{}

func (names) ClientName(context.Context, string) string { return "Example client" }
func (names) ResourceName(string) string                { return "Example MCP server" }
