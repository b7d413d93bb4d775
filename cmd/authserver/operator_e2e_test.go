package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/internal/password"
)

const (
	opsSecret   = "ops-bot-secret-0123456789"
	otherSecret = "other-bot-secret-0123456789"
	alicePW     = "alice-password-for-tests"
	appRedirect = "http://127.0.0.1:7777/callback"
)

// adminConfig is stackConfig with a user, a public app, two more machine
// clients and the admin listener; adminClients is the admin.clients list.
func adminConfig(t *testing.T, issuer, listen, adminListen, storage, adminClients string) string {
	t.Helper()
	hash, err := password.Hash(alicePW)
	if err != nil {
		t.Fatal(err)
	}
	cfg := stackConfig(issuer, listen, storage)
	cfg = strings.Replace(cfg, "exchange:\n", fmt.Sprintf(`  - id: demo-app
    public: true
    redirect_uris: [%s]
    scopes: [mcp:tools]
  - id: ops-bot
    secret: %s
    grant_types: [client_credentials]
  - id: other-bot
    secret: %s
    grant_types: [client_credentials]
exchange:
`, appRedirect, opsSecret, otherSecret), 1)
	cfg = strings.Replace(cfg, "log:\n  level: debug\n", "log:\n  level: info\n", 1)
	return cfg + fmt.Sprintf(`users:
  - username: alice
    password_hash: %q
admin:
  listen: %s
  clients: [%s]
`, hash, adminListen, adminClients)
}

// adminReq calls the admin API with token (none when "").
func adminReq(t *testing.T, method, u, token string, body any) (int, http.Header, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	if len(b) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s %s: %d, not JSON: %q", method, u, resp.StatusCode, b)
		}
	}
	if resp.StatusCode >= 500 {
		t.Fatalf("%s %s: %d %s", method, u, resp.StatusCode, b)
	}
	return resp.StatusCode, resp.Header, out
}

func tokenFor(t *testing.T, md asMetadata, id, secret, resource string, scopes ...string) string {
	t.Helper()
	tok, err := clientToken(t, md, id, secret, url.Values{"resource": {resource}}, scopes...)
	if err != nil {
		t.Fatalf("token for %s at %s: %v", id, resource, err)
	}
	return tok.AccessToken
}

// The admin API is a resource server of this AS: it refuses a missing
// token, a token for another audience, a token without the admin scope and
// a token of a client that is not (any more) in admin.clients; every
// endpoint works over real HTTP and every change is audited with the admin
// client's id. The access log of the whole run holds no secret, token or
// code, and /metrics parses with the Prometheus text parser.
func TestAdminAPIAndOperatorSurface(t *testing.T) {
	dir := t.TempDir()
	addr, adminAddr := freeAddr(t), freeAddr(t)
	issuer := "http://" + addr
	storage := "sqlite:" + filepath.Join(dir, "a.db")
	cfgPath := writeConfig(t, dir, adminConfig(t, issuer, addr, adminAddr, storage, "ops-bot, other-bot"))
	p := start(t, dir, issuer, testEnv, "--config", cfgPath)
	md := discover(t, issuer)
	adminURL := "http://" + adminAddr + "/admin/v1/"
	adminResource := issuer + "/admin"

	// Who may get a token for the admin resource at all.
	if _, err := clientToken(t, md, "ci-bot", botSecret, url.Values{"resource": {adminResource}}, "admin"); !isOAuthError(err, "invalid_target", "invalid_scope") {
		t.Fatalf("ci-bot got an admin token: %v", err)
	}
	opsTok := tokenFor(t, md, "ops-bot", opsSecret, adminResource, "admin")
	otherTok := tokenFor(t, md, "other-bot", otherSecret, adminResource, "admin")
	mcpTok := tokenFor(t, md, "ops-bot", opsSecret, "http://127.0.0.1:8080/mcp", "mcp:tools")

	// Refusals.
	status, hdr, _ := adminReq(t, "GET", adminURL+"clients", "", nil)
	if status != 401 || !strings.Contains(hdr.Get("WWW-Authenticate"), "resource_metadata=") {
		t.Fatalf("no token: %d %q", status, hdr.Get("WWW-Authenticate"))
	}
	status, hdr, _ = adminReq(t, "GET", adminURL+"clients", mcpTok, nil)
	if status != 401 || !strings.Contains(hdr.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Fatalf("token for another audience: %d %q", status, hdr.Get("WWW-Authenticate"))
	}
	// The AS issues no token for the admin resource without the admin
	// scope (the admin package's tests present such tokens, minted by an
	// AS whose admin resource has a second scope).
	if _, err := clientToken(t, md, "ops-bot", opsSecret, url.Values{"resource": {adminResource}}, "mcp:tools"); !isOAuthError(err, "invalid_scope") {
		t.Fatalf("admin-resource token without admin: %v", err)
	}
	if status, _, _ := adminReq(t, "GET", adminURL+"clients", otherTok, nil); status != 200 {
		t.Fatalf("other-bot while in admin.clients: %d", status)
	}

	// other-bot leaves admin.clients (SIGHUP); its still-valid token is refused.
	writeConfig(t, dir, adminConfig(t, issuer, addr, adminAddr, storage, "ops-bot"))
	hupAndWait(t, p, 1)
	status, _, body := adminReq(t, "GET", adminURL+"clients", otherTok, nil)
	if status != 403 || body["error"] != "access_denied" {
		t.Fatalf("token of a client no longer in admin.clients: %d %v", status, body)
	}

	// Clients.
	status, _, body = adminReq(t, "POST", adminURL+"clients", opsTok, map[string]any{"client_name": "Docs", "redirect_uris": []string{"https://docs.example/cb"}})
	id, _ := body["client_id"].(string)
	createdSecret := fmt.Sprint(body["client_secret"])
	if status != 201 || id == "" || len(fmt.Sprint(body["client_secret"])) < 32 {
		t.Fatalf("create client: %d %v", status, body)
	}
	if status, _, body = adminReq(t, "POST", adminURL+"clients", opsTok, map[string]any{"client_name": "Bad", "redirect_uris": []string{"https://x.example/cb#f"}}); status != 400 || body["error"] != "invalid_request" {
		t.Fatalf("bad client: %d %v", status, body)
	}
	if status, _, body = adminReq(t, "POST", adminURL+"clients", opsTok, map[string]any{"client_name": "X", "bogus": 1}); status != 400 {
		t.Fatalf("unknown field: %d %v", status, body)
	}
	status, _, body = adminReq(t, "GET", adminURL+"clients", opsTok, nil)
	if status != 200 || !strings.Contains(fmt.Sprint(body["clients"]), id) || !strings.Contains(fmt.Sprint(body["clients"]), "ops-bot") {
		t.Fatalf("list clients: %d %v", status, body)
	}
	if strings.Contains(fmt.Sprint(body), createdSecret) || strings.Contains(fmt.Sprint(body), "client_secret:") {
		t.Fatalf("client list shows secrets: %v", body)
	}
	if status, _, body = adminReq(t, "GET", adminURL+"clients/"+id, opsTok, nil); status != 200 || body["client_name"] != "Docs" {
		t.Fatalf("show client: %d %v", status, body)
	}
	if status, _, _ = adminReq(t, "DELETE", adminURL+"clients/ops-bot", opsTok, nil); status != 409 {
		t.Fatalf("delete configured client: %d", status)
	}
	if status, _, _ = adminReq(t, "DELETE", adminURL+"clients/"+id, opsTok, nil); status != 204 {
		t.Fatalf("delete client: %d", status)
	}
	if status, _, _ = adminReq(t, "GET", adminURL+"clients/"+id, opsTok, nil); status != 404 {
		t.Fatalf("deleted client: %d", status)
	}

	// A real authorization by alice, then her consents.
	code := authorizationCode(t, issuer, issuer, appRedirect, "alice", alicePW)
	st, tokBody, err := postToken(issuer, url.Values{"grant_type": {"authorization_code"}, "code": {code.Code},
		"redirect_uri": {appRedirect}, "client_id": {"demo-app"}, "code_verifier": {code.Verifier}})
	if err != nil || st != 200 {
		t.Fatalf("code redemption: %d %v %v", st, tokBody, err)
	}
	refresh := tokBody["refresh_token"].(string)
	st, refreshed, err := postToken(issuer, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {"demo-app"}})
	if err != nil || st != 200 {
		t.Fatalf("refresh: %d %v", st, err)
	}
	if st, _, _ := postToken(issuer, url.Values{"grant_type": {"client_credentials"}, "client_id": {"ci-bot"}, "client_secret": {"wrong-secret-wrong"}}); st != 401 {
		t.Fatalf("wrong client secret: %d", st)
	}
	// Grants: alice's grant to demo-app is listed, then revoked with her
	// consent; the rotated refresh token stops working at once.
	status, _, body = adminReq(t, "GET", adminURL+"grants?user=alice", opsTok, nil)
	grants, _ := body["grants"].([]any)
	if status != 200 || len(grants) != 1 || grants[0].(map[string]any)["client_id"] != "demo-app" {
		t.Fatalf("grants of alice: %d %v", status, body)
	}
	if status, _, body = adminReq(t, "GET", adminURL+"grants?client=other-bot", opsTok, nil); status != 200 || len(body["grants"].([]any)) == 0 {
		t.Fatalf("grants of other-bot: %d %v", status, body)
	}
	status, _, body = adminReq(t, "GET", adminURL+"consents?user=alice", opsTok, nil)
	if status != 200 || !strings.Contains(fmt.Sprint(body["consents"]), "demo-app") {
		t.Fatalf("consents: %d %v", status, body)
	}
	if status, _, _ = adminReq(t, "GET", adminURL+"consents", opsTok, nil); status != 400 {
		t.Fatalf("consents without user: %d", status)
	}
	if status, _, _ = adminReq(t, "DELETE", adminURL+"consents?user=alice&client=demo-app", opsTok, nil); status != 204 {
		t.Fatalf("revoke consent: %d", status)
	}
	if _, _, body = adminReq(t, "GET", adminURL+"consents?user=alice", opsTok, nil); strings.Contains(fmt.Sprint(body["consents"]), "demo-app") {
		t.Fatalf("consent still listed: %v", body)
	}
	if st, b, _ := postToken(issuer, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshed["refresh_token"].(string)}, "client_id": {"demo-app"}}); st != 400 || b["error"] != "invalid_grant" {
		t.Fatalf("refresh after the admin revoked the consent: %d %v", st, b)
	}
	if status, _, body = adminReq(t, "GET", adminURL+"grants?user=alice", opsTok, nil); len(body["grants"].([]any)) != 0 {
		t.Fatalf("grants of alice after revoking her consent: %v", body)
	}
	// One grant by id, and a revocation by client.
	code2 := authorizationCode(t, issuer, issuer, appRedirect, "alice", alicePW)
	if st, b, err := postToken(issuer, url.Values{"grant_type": {"authorization_code"}, "code": {code2.Code},
		"redirect_uri": {appRedirect}, "client_id": {"demo-app"}, "code_verifier": {code2.Verifier}}); err != nil || st != 200 {
		t.Fatalf("second code: %d %v", st, b)
	}
	_, _, body = adminReq(t, "GET", adminURL+"grants?user=alice&client=demo-app", opsTok, nil)
	gid := body["grants"].([]any)[0].(map[string]any)["id"].(string)
	if status, _, body = adminReq(t, "DELETE", adminURL+"grants/"+gid, opsTok, nil); status != 200 || len(body["revoked"].([]any)) != 1 {
		t.Fatalf("revoke grant by id: %d %v", status, body)
	}
	if status, _, body = adminReq(t, "DELETE", adminURL+"grants?client=other-bot", opsTok, nil); status != 200 || len(body["revoked"].([]any)) == 0 {
		t.Fatalf("revoke grants of a client: %d %v", status, body)
	}
	if status, _, _ = adminReq(t, "DELETE", adminURL+"grants", opsTok, nil); status != 400 {
		t.Fatalf("revoke without a filter: %d", status)
	}
	login(t, issuer, "alice", "not-her-password") // counted below as a login failure

	// Keys.
	status, _, body = adminReq(t, "GET", adminURL+"keys", opsTok, nil)
	keys, _ := body["keys"].([]any)
	if status != 200 || len(keys) != 1 {
		t.Fatalf("keys: %d %v", status, body)
	}
	first := keys[0].(map[string]any)["kid"].(string)
	status, _, body = adminReq(t, "POST", adminURL+"keys", opsTok, nil)
	second, _ := body["signing_kid"].(string)
	if status != 201 || second == "" || second == first {
		t.Fatalf("rotate: %d %v", status, body)
	}
	status, _, body = adminReq(t, "POST", adminURL+"keys/"+second+"/retire", opsTok, nil)
	if status != 200 || body["signing_kid"] == second {
		t.Fatalf("retire: %d %v", status, body)
	}
	if status, _, _ = adminReq(t, "POST", adminURL+"keys/nope/retire", opsTok, nil); status != 404 {
		t.Fatalf("retire unknown: %d", status)
	}
	if status, _, body = adminReq(t, "POST", adminURL+"keys/prune?unloadable=true", opsTok, nil); status != 200 || len(body["deleted"].([]any)) != 0 {
		t.Fatalf("prune: %d %v", status, body)
	}
	if status, _, _ = adminReq(t, "POST", adminURL+"keys/prune?unloadable=maybe", opsTok, nil); status != 400 {
		t.Fatalf("prune with a bad flag: %d", status)
	}
	if status, _, _ = adminReq(t, "GET", adminURL+"nothing", opsTok, nil); status != 404 {
		t.Fatalf("unknown endpoint: %d", status)
	}

	// Metrics, on the admin listener only.
	if resp, err := http.Get(issuer + "/metrics"); err != nil || resp.StatusCode != 404 {
		t.Fatalf("/metrics on the main listener: %v %v", resp, err)
	}
	fams := scrape(t, "http://"+adminAddr+"/metrics")
	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"mcpauth_tokens_issued_total", map[string]string{"grant_type": "client_credentials"}, 3},
		{"mcpauth_tokens_issued_total", map[string]string{"grant_type": "authorization_code"}, 1},
		{"mcpauth_tokens_issued_total", map[string]string{"grant_type": "refresh_token"}, 1},
		{"mcpauth_http_requests_total", map[string]string{"endpoint": "token", "code": "200"}, 5},
		{"mcpauth_http_requests_total", map[string]string{"endpoint": "token", "code": "401"}, 1},
		{"mcpauth_http_requests_total", map[string]string{"endpoint": "admin", "code": "201"}, 2},
		{"mcpauth_oauth_errors_total", map[string]string{"endpoint": "token", "error": "invalid_client"}, 1},
		{"mcpauth_oauth_errors_total", map[string]string{"endpoint": "admin", "error": "invalid_token"}, 1},
		{"mcpauth_client_auth_failures_total", nil, 1},
		{"mcpauth_login_failures_total", nil, 1},
		{"mcpauth_admin_actions_total", nil, 7},
		{"mcpauth_grant_revocations_total", nil, 3},
		{"mcpauth_http_request_duration_seconds", map[string]string{"endpoint": "token"}, 7},
	} {
		if got := metricValue(fams, c.name, c.labels); got < c.min {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, got, c.min)
		}
	}
	for _, name := range []string{"mcpauth_refresh_replays_total", "mcpauth_registrations_total", "mcpauth_cimd_fetches_total",
		"mcpauth_cimd_cache_hits_total", "mcpauth_login_throttled_total", "mcpauth_storage_errors_total"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("metric %s is not exported", name)
		}
	}

	// An unknown client at /authorize gets an error page, and a log line.
	resp, err := http.Get(issuer + "/authorize?response_type=code&client_id=nobody-known&redirect_uri=https://x.example/cb&code_challenge=abc&code_challenge_method=S256")
	if err != nil || resp.StatusCode < 400 {
		t.Fatalf("unknown client at /authorize: %v %v", resp, err)
	}
	resp.Body.Close()

	p.stop(t)
	log := p.stderr.String()
	if !regexp.MustCompile(`msg=access component=http method=GET path=/authorize status=4\d\d .*client_id=nobody-known`).MatchString(log) {
		t.Error("no access line for the unknown client at /authorize")
	}
	// Audit events name the admin client.
	for _, ev := range []string{"admin.client.created", "admin.client.deleted", "admin.consent.revoked", "admin.grants.revoked", "admin.key.rotated", "admin.key.retired"} {
		if !strings.Contains(log, "event="+ev+" admin_client=ops-bot") {
			t.Errorf("no audit event %s naming ops-bot", ev)
		}
	}
	// The access log has a line per request, with client and error code.
	for _, want := range []string{
		`msg=access component=http method=POST path=/token status=200`,
		`client_id=demo-app`,
		`status=401`,
		`error=invalid_client`,
		`path=/admin/v1/clients status=401`,
		`error=invalid_token`,
		`client_id=ops-bot`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("access log lacks %q", want)
		}
	}
	// ... and never a secret, token, code or password.
	for name, secret := range map[string]string{
		"server secret": testSecret, "client secret": botSecret, "ops secret": opsSecret, "wrong secret": "wrong-secret-wrong",
		"password": alicePW, "wrong password": "not-her-password", "code": code.Code, "verifier": code.Verifier,
		"access token": tokBody["access_token"].(string), "refresh token": refresh,
		"rotated refresh token": refreshed["refresh_token"].(string), "admin token": opsTok, "second code": code2.Code,
	} {
		if strings.Contains(log, secret) {
			t.Errorf("the log contains the %s", name)
		}
	}
}

func isOAuthError(err error, codes ...string) bool {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return false
	}
	for _, c := range codes {
		if re.ErrorCode == c {
			return true
		}
	}
	return false
}

// hupAndWait sends SIGHUP and waits for the n-th "configuration reloaded"
// or "reload refused" line.
func hupAndWait(t *testing.T, p *proc, n int) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		s := p.stderr.String()
		if strings.Count(s, "configuration reloaded")+strings.Count(s, "reload refused") >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no reload after SIGHUP:\n%s", p.stderr)
}

func scrape(t *testing.T, u string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the Prometheus text parser refuses /metrics: %v", err)
	}
	return fams
}

// metricValue sums the counters (or histogram counts) of name whose labels
// include labels.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
	var sum float64
	for _, m := range f.GetMetric() {
		match := true
		for k, v := range labels {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		}
	}
	return sum
}

// SIGHUP reloads clients from the file without dropping connections; a bad
// file is refused with its field path and the running configuration stays;
// SIGTERM still stops the server gracefully.
func TestSIGHUPReloadsTheConfiguration(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	base := stackConfig(issuer, addr, "memory")
	cfgPath := writeConfig(t, dir, base)
	p := start(t, dir, issuer, testEnv, "--config", cfgPath)
	md := discover(t, issuer)

	// One keep-alive connection for the whole test.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	reused := 0
	get := func() {
		t.Helper()
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
			if i.Reused {
				reused++
			}
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", issuer+"/livez", nil)
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("/livez: %v %v", resp, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	get()

	const newSecret = "new-bot-secret-0123456789"
	if _, err := clientToken(t, md, "new-bot", newSecret, nil, "mcp:tools"); !isOAuthError(err, "invalid_client") {
		t.Fatalf("new-bot before reload: %v", err)
	}
	withNewBot := strings.Replace(base, "exchange:\n", "  - id: new-bot\n    secret: "+newSecret+"\n    grant_types: [client_credentials]\nexchange:\n", 1)
	writeConfig(t, dir, withNewBot)
	hupAndWait(t, p, 1)
	get()
	if _, err := clientToken(t, md, "new-bot", newSecret, nil, "mcp:tools"); err != nil {
		t.Fatalf("new-bot after reload: %v", err)
	}

	// A bad file: refused, named by field path; the old configuration stays.
	writeConfig(t, dir, strings.Replace(withNewBot, "secret: "+newSecret, "secret: short", 1))
	hupAndWait(t, p, 2)
	get()
	if !strings.Contains(p.stderr.String(), "reload refused") || !strings.Contains(p.stderr.String(), "clients[2].secret") {
		t.Fatalf("bad file not refused by field path:\n%s", p.stderr)
	}
	if _, err := clientToken(t, md, "new-bot", newSecret, nil, "mcp:tools"); err != nil {
		t.Fatalf("new-bot after a refused reload: %v", err)
	}
	if reused < 2 {
		t.Errorf("the keep-alive connection was reused %d times across reloads, want 2", reused)
	}
	p.stop(t)
	if !strings.Contains(p.stderr.String(), "stopped") {
		t.Fatalf("no graceful stop:\n%s", p.stderr)
	}
}

// An instance started with another secret than the one that sealed the
// stored keys refuses to start, says why, and writes no key; /readyz
// reports a missing signing key; /livez and /healthz answer.
func TestWrongSecretRefusesToStartAndReadyzReportsAMissingKey(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	cfgPath := writeConfig(t, dir, stackConfig(issuer, addr, "sqlite:"+filepath.Join(dir, "k.db")))
	p := start(t, dir, issuer, testEnv, "--config", cfgPath)
	for _, path := range []string{"/livez", "/readyz", "/healthz"} {
		resp, err := http.Get(issuer + path)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", path, resp, err)
		}
		resp.Body.Close()
	}
	p.stop(t)

	wrongEnv := []string{"AUTHSERVER_SECRET=another-secret-another-secret-0123456", "CI_BOT_SECRET=" + botSecret}
	_, errOut, err := runBin(t, dir, wrongEnv, "", "serve", "--config", cfgPath)
	if err == nil || !strings.Contains(errOut, "sealed under another secret") || !strings.Contains(errOut, "no key was written") {
		t.Fatalf("serve with the wrong secret: %v\n%s", err, errOut)
	}
	out, errOut, err := runBin(t, dir, testEnv, "", "keys", "list", "--config", cfgPath, "--format", "json")
	var keys []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &keys) != nil || len(keys) != 1 || keys[0]["loadable"] != true {
		t.Fatalf("keys after the refused start: %v %s %s", err, out, errOut)
	}

	// Every key deleted under a running server: it is not ready.
	p = start(t, dir, issuer, testEnv, "--config", cfgPath)
	cfg := loadTestConfig(t, cfgPath, testSecret)
	st, err := openStore(context.Background(), cfg, false, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, _ := st.ListKeys(context.Background())
	for _, r := range recs {
		if err := st.DeleteKey(context.Background(), r.ID); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(issuer + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 503 {
			if !strings.Contains(string(b), "no signing key") {
				t.Fatalf("/readyz 503 without naming the key: %q", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d after the keys were deleted", resp.StatusCode)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if resp, err := http.Get(issuer + "/livez"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/livez: %v %v", resp, err)
	}
}
