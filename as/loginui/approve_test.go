package loginui

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/rsmiddleware"
	"github.com/mcpauth/mcpauth/storage"
)

// testNames names the clients and resources of the approval tests.
type testNames struct{}

func (testNames) ClientName(_ context.Context, id string) string {
	if id == "demo-app" {
		return "Demo <App>"
	}
	return ""
}

func (testNames) ResourceName(uri string) string {
	if uri == "http://127.0.0.1:8080/mcp" {
		return "Example MCP server"
	}
	return ""
}

// hostileArgs are arguments a poisoned model might send: markup, control
// and bidirectional characters, a long value with something at its end.
const hostileArgs = `{"to":"bob@example.com","subject":"<script>alert(1)</script>","body":"line one\nline two\u0007\u202eevil\u200b",` +
	`"attachment":"` + "AAAA" + `","n":[1,2.5,true,null,{"deep":"x"}]}`

// approvalHarness is the pages' harness with approvals in its store.
func approvalHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, nil)
	h.ui.cfg.Approvals = h.store
	h.ui.SetNames(testNames{})
	return h
}

// seedApproval stores a pending approval of subject with args (any JSON
// object) and returns its id.
func (h *harness) seedApproval(subject, tool, args string, ttl time.Duration) string {
	h.t.Helper()
	canon, err := rsmiddleware.CanonicalJSON([]byte(args))
	if err != nil {
		h.t.Fatal(err)
	}
	sum := sha256.Sum256(canon)
	id := randomID()
	now := h.clock.Now()
	a, err := h.store.CreateApproval(context.Background(), &storage.Approval{
		ID: id, ApprovalBinding: storage.ApprovalBinding{Subject: subject, ClientID: "demo-app", Resource: "http://127.0.0.1:8080/mcp",
			Tool: tool, ArgsDigest: hex.EncodeToString(sum[:])},
		Arguments: canon, Status: storage.ApprovalPending, CreatedAt: now, ExpiresAt: now.Add(ttl),
	})
	if err != nil || a.ID != id {
		h.t.Fatalf("CreateApproval: %v", err)
	}
	return id
}

func (h *harness) approvalStatus(id string) storage.ApprovalStatus {
	h.t.Helper()
	a, err := h.store.GetApproval(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return a.Status
}

func TestApprovalPageSignsInThenApproves(t *testing.T) {
	h := approvalHarness(t)
	long := strings.Repeat("harmless text ", 30) + "AND THEN rm -rf /"
	id := h.seedApproval("alice", "send_email", strings.Replace(hostileArgs, "AAAA", long, 1), 5*time.Minute)
	b := h.browser()
	p := b.login("/approve/"+id, "alice", alicePW)
	if p.StatusCode != http.StatusOK || !strings.Contains(p.Body, "Approve this tool call?") {
		t.Fatalf("after signing in: %d\n%s", p.StatusCode, p.Body)
	}
	for _, want := range []string{
		"Demo &lt;App&gt;", "(demo-app)", "Example MCP server", "<code>send_email</code>",
		// Markup in arguments is text.
		`&#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;`,
		// Control, bidirectional and zero-width characters are escapes.
		`\u0007`, `\u202e`, `\u200b`, `line one\n`,
		// Member names in canonical order, values as JSON.
		`<span class="key">&#34;attachment&#34;</span>`, `<span class="number">2.5</span>`, `<span class="literal">null</span>`,
		// The long value is folded, and all of it is on the page.
		"<details", "AND THEN rm -rf /",
	} {
		if !strings.Contains(p.Body, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	for _, bad := range []string{"<script>", "\u202e", "\u0007", "\u200b"} {
		if strings.Contains(p.Body, bad) {
			t.Errorf("the page holds %q raw", bad)
		}
	}
	if h := p.Header; h.Get("X-Frame-Options") != "DENY" || !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") ||
		h.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", h)
	}
	if s := h.approvalStatus(id); s != storage.ApprovalPending {
		t.Fatalf("status %s before deciding", s)
	}
	p = b.submit(p.form(t, "action", "approve"))
	if p.StatusCode != http.StatusOK || !strings.Contains(p.Body, "Return to your application and try again") {
		t.Fatalf("after approving: %d\n%s", p.StatusCode, p.Body)
	}
	if s := h.approvalStatus(id); s != storage.ApprovalApproved {
		t.Fatalf("status %s after approving", s)
	}
	// Deciding again changes nothing.
	p = b.get("/approve/" + id)
	if !strings.Contains(p.Body, "Already approved") || len(p.forms()) != 0 {
		t.Fatalf("the decided approval: %d\n%s", p.StatusCode, p.Body)
	}
}

func TestApprovalPageDenies(t *testing.T) {
	h := approvalHarness(t)
	id := h.seedApproval("alice", "delete_repo", `{"repo":"acme/prod"}`, 5*time.Minute)
	b := h.browser()
	p := b.login("/approve/"+id, "alice", alicePW)
	p = b.submit(p.form(t, "action", "deny"))
	if p.StatusCode != http.StatusOK || !strings.Contains(p.Body, "You denied this tool call") {
		t.Fatalf("after denying: %d\n%s", p.StatusCode, p.Body)
	}
	if s := h.approvalStatus(id); s != storage.ApprovalDenied {
		t.Fatalf("status %s", s)
	}
}

// TestAnotherPersonCannotDecide: bob, signed in, sees a refusal and his
// posts (with his own valid CSRF token) change nothing.
func TestAnotherPersonCannotDecide(t *testing.T) {
	h := approvalHarness(t)
	id := h.seedApproval("alice", "send_email", `{"to":"x"}`, 5*time.Minute)
	other := h.seedApproval("bob", "noop", `{}`, 5*time.Minute)
	bob := h.browser()
	own := bob.login("/approve/"+other, "bob", bobPW)
	csrf := own.form(t).Fields.Get("csrf")
	p := bob.get("/approve/" + id)
	if p.StatusCode != http.StatusForbidden || !strings.Contains(p.Body, "another person") || strings.Contains(p.Body, `"to"`) {
		t.Fatalf("bob's view of alice's approval: %d\n%s", p.StatusCode, p.Body)
	}
	p = bob.post("/approve/"+id, url.Values{stepField: {stepApproval}, "csrf": {csrf}, "action": {"approve"}})
	if p.StatusCode != http.StatusForbidden {
		t.Fatalf("bob's approval: %d\n%s", p.StatusCode, p.Body)
	}
	if s := h.approvalStatus(id); s != storage.ApprovalPending {
		t.Fatalf("status %s after bob's post", s)
	}
}

func TestApprovalFormNeedsItsCSRFToken(t *testing.T) {
	h := approvalHarness(t)
	id := h.seedApproval("alice", "send_email", `{"to":"x"}`, 5*time.Minute)
	b := h.browser()
	p := b.login("/approve/"+id, "alice", alicePW)
	// A token of another session of alice's.
	foreign := h.browser().login("/approve/"+id, "alice", alicePW).form(t).Fields.Get("csrf")
	for name, csrf := range map[string]string{"missing": "", "foreign": foreign, "garbage": "x"} {
		f := p.form(t, "action", "approve")
		if csrf == "" {
			f.Fields.Del("csrf")
		} else {
			f.Fields.Set("csrf", csrf)
		}
		if got := b.submit(f); got.StatusCode != http.StatusForbidden {
			t.Errorf("%s CSRF token: %d", name, got.StatusCode)
		}
	}
	if got := b.submit(p.form(t, "action", "maybe")); got.StatusCode != http.StatusForbidden {
		t.Errorf("unknown action: %d", got.StatusCode)
	}
	if s := h.approvalStatus(id); s != storage.ApprovalPending {
		t.Fatalf("status %s after refused forms", s)
	}
}

func TestExpiredApprovalShowsExpired(t *testing.T) {
	h := approvalHarness(t)
	id := h.seedApproval("alice", "send_email", `{"to":"x"}`, time.Minute)
	b := h.browser()
	p := b.login("/approve/"+id, "alice", alicePW)
	h.clock.Advance(2 * time.Minute)
	if got := b.get("/approve/" + id); got.StatusCode != http.StatusGone || !strings.Contains(got.Body, "expired") || len(got.forms()) != 0 {
		t.Fatalf("expired approval: %d\n%s", got.StatusCode, got.Body)
	}
	if got := b.submit(p.form(t, "action", "approve")); got.StatusCode != http.StatusGone {
		t.Fatalf("approving after expiry: %d", got.StatusCode)
	}
	if s := h.approvalStatus(id); s != storage.ApprovalPending {
		t.Fatalf("status %s", s)
	}
}

func TestApprovalPageRefusesOddAddresses(t *testing.T) {
	h := approvalHarness(t)
	b := h.browser()
	for _, path := range []string{"/approve/", "/approve/short", "/approve/" + strings.Repeat("a", 21) + "!", "/approve/" + randomID() + "/x"} {
		if p := b.get(path); p.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d", path, p.StatusCode)
		}
	}
	b.login("/consents", "alice", alicePW)
	if p := b.get("/approve/" + randomID()); p.StatusCode != http.StatusNotFound {
		t.Errorf("unknown approval: %d", p.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPut, h.srv.URL+"/approve/"+randomID(), nil)
	if p := b.do(req); p.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("PUT: %d", p.StatusCode)
	}
}

// TestUpstreamSignInReturnsToTheApprovalPage: a person who signs in
// through a provider comes back to the approval page.
func TestUpstreamSignInReturnsToTheApprovalPage(t *testing.T) {
	e := newUpstreamEnv(t, false, "")
	e.ui.cfg.Approvals = e.store
	id := e.seedApproval("corp:u-alice", "send_email", `{"to":"bob"}`, 5*time.Minute)
	b := e.browser()
	cb := e.signIn(b, "/approve/"+id, "alice")
	p := b.open(cb)
	if p.StatusCode != http.StatusOK || !strings.Contains(p.Body, "Approve this tool call?") || !strings.Contains(p.Body, "&#34;bob&#34;") {
		t.Fatalf("after the provider: %d\n%s", p.StatusCode, p.Body)
	}
	p = b.submit(p.form(t, "action", "approve"))
	if s := e.approvalStatus(id); p.StatusCode != http.StatusOK || s != storage.ApprovalApproved {
		t.Fatalf("approving: %d, status %s", p.StatusCode, s)
	}
	for page, want := range map[string]bool{"approve/" + id: true, "approve/x": false, "approve/../consents": false, "approve/" + id + "/x": false} {
		if got := (&pendingUpstream{Page: page}).returnsHome(); got != want {
			t.Errorf("returnsHome(%q) = %v", page, got)
		}
	}
}

func TestConsentsPageListsAndRevokesApprovals(t *testing.T) {
	h := approvalHarness(t)
	pending := h.seedApproval("alice", "send_email", `{"to":"x"}`, 5*time.Minute)
	approved := h.seedApproval("alice", "delete_file", `{"path":"/tmp/x"}`, 5*time.Minute)
	denied := h.seedApproval("alice", "drop_table", `{}`, 5*time.Minute)
	h.seedApproval("bob", "bobs_tool", `{}`, 5*time.Minute)
	ctx := context.Background()
	if _, err := h.store.DecideApproval(ctx, approved, "alice", true, h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.DecideApproval(ctx, denied, "alice", false, h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	b := h.browser()
	p := b.login("/consents", "alice", alicePW)
	var ids []string
	var revoke form
	for _, f := range p.forms() {
		if f.Fields.Get(stepField) == "revoke_approval" {
			ids = append(ids, f.Fields.Get("approval_id"))
			if f.Fields.Get("approval_id") == pending {
				revoke = f
			}
		}
	}
	if len(ids) != 2 || !strings.Contains(p.Body, "send_email") || !strings.Contains(p.Body, "delete_file") ||
		strings.Contains(p.Body, "drop_table") || strings.Contains(p.Body, "bobs_tool") || !strings.Contains(p.Body, "Approved, not yet used") {
		t.Fatalf("listed %v:\n%s", ids, p.Body)
	}
	bad := form{Action: revoke.Action, Fields: cloneValues(revoke.Fields)}
	bad.Fields.Set("csrf", "forged")
	if got := b.submit(bad); got.StatusCode != http.StatusForbidden {
		t.Fatalf("revoke with a forged CSRF token: %d", got.StatusCode)
	}
	if got := b.submit(revoke); got.StatusCode != http.StatusOK || strings.Contains(got.Body, "send_email") {
		t.Fatalf("after revoking: %d\n%s", got.StatusCode, got.Body)
	}
	if _, err := h.store.GetApproval(ctx, pending); err == nil {
		t.Fatal("the revoked approval is still stored")
	}
	// Someone else's approval cannot be revoked from alice's page.
	bobs, _ := h.store.ListApprovals(ctx, "bob", "", 10)
	f := form{Action: revoke.Action, Fields: cloneValues(revoke.Fields)}
	f.Fields.Set("approval_id", bobs[0].ID)
	b.submit(f)
	if _, err := h.store.GetApproval(ctx, bobs[0].ID); err != nil {
		t.Fatalf("bob's approval after alice's revoke: %v", err)
	}
}

func TestVisibleString(t *testing.T) {
	for in, want := range map[string]string{
		"plain":           `"plain"`,
		"a\"b\\c":         `"a\"b\\c"`,
		"tab\there":       `"tab\there"`,
		"nl\nx":           "\"nl\\n\nx\"",
		"\x00\x1b\x7f":    `"\u0000\u001b\u007f"`,
		"\u0085\u00a0":    `"\u0085\u00a0"`,
		"rtl\u202egnp":    `"rtl\u202egnp"`,
		"zw\u200b\u2060":  `"zw\u200b\u2060"`,
		"sep\u2028\u2029": `"sep\u2028\u2029"`,
		"tag\U000E0041":   `"tag\u{E0041}"`,
		"fill\u3164":      `"fill\u3164"`,
		"ünïcödé 中文":      `"ünïcödé 中文"`,
		"bad\xffbyte":     `"bad\xffbyte"`,
	} {
		if got := visibleString(in); got != want {
			t.Errorf("visibleString(%q) = %s, want %s", in, got, want)
		}
	}
}
