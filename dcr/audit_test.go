package dcr_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/dcr"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// Registration audit events go to the configured logger, with the client id
// and without the secrets issued.
func TestAuditEventsGoToTheConfiguredLogger(t *testing.T) {
	var logs syncBuffer
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	h, err := dcr.New(dcr.Config{Endpoint: srv.URL + "/register", Store: memory.New(), Secret: testSecret,
		Policy: defaultPolicy(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h.Mount(mux)
	e := &env{t: t, srv: srv, h: h}
	reg := e.register(`{"client_name":"Claude","redirect_uris":["https://claude.ai/api/mcp/auth_callback"],"token_endpoint_auth_method":"client_secret_basic"}`)
	if reg.status != http.StatusCreated {
		t.Fatalf("register: %d %s", reg.status, reg.body)
	}
	ci := reg.info(t)
	if r := e.do(http.MethodGet, ci.RegistrationClientURI, "wrong", "", nil); r.status != http.StatusUnauthorized {
		t.Fatalf("read with a wrong token: %d", r.status)
	}
	got := logs.String()
	for _, want := range []string{
		"msg=audit event=client.registered client_id=" + ci.ClientID + " client_name=Claude auth_method=client_secret_basic redirect_uris=1",
		"msg=audit event=client.auth_failed client_id=" + ci.ClientID,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	for _, s := range []string{ci.ClientSecret, ci.RegistrationAccessToken} {
		if strings.Contains(got, s) {
			t.Errorf("log carries a secret issued to the client:\n%s", got)
		}
	}
}
