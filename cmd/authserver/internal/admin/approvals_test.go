package admin

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// seedApprovals stores five approvals, three of alice's (one arguments
// holding a secret the API must never show) and two of bob's.
func seedApprovals(t *testing.T, f *fixture) []string {
	t.Helper()
	now := time.Now()
	var ids []string
	for i, sub := range []string{"alice", "bob", "alice", "bob", "alice"} {
		id := fmt.Sprintf("approval-%02d-xxxxxxxxxxx", i)
		_, err := f.store.CreateApproval(context.Background(), &storage.Approval{ID: id,
			ApprovalBinding: storage.ApprovalBinding{Subject: sub, ClientID: "demo-app", Resource: mcpURI, Tool: fmt.Sprint("tool", i), ArgsDigest: "d"},
			Arguments:       []byte(`{"password":"hunter2-secret"}`), CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func TestAdminApprovalsAPI(t *testing.T) {
	f := start(t)
	ids := seedApprovals(t, f)
	tok := f.token(t, "ops-bot", f.issuer+"/admin", "admin")

	var got []string
	after := ""
	for range 10 {
		status, _, body := call(t, "GET", f.adminURL+"approvals?limit=2&after="+url.QueryEscape(after), tok, "")
		if status != 200 {
			t.Fatalf("list: %d %v", status, body)
		}
		page, _ := body["approvals"].([]any)
		if len(page) > 2 {
			t.Fatalf("limit 2 returned %d", len(page))
		}
		for _, a := range page {
			m := a.(map[string]any)
			got = append(got, m["approval_id"].(string))
			if m["status"] != "pending" || m["tool"] == "" || m["args_digest"] != "d" || m["expired"] != false {
				t.Fatalf("approval %v", m)
			}
			if _, has := m["arguments"]; has {
				t.Fatalf("the API shows arguments: %v", m)
			}
		}
		next, _ := body["next_after"].(string)
		if next == "" {
			break
		}
		after = next
	}
	if strings.Join(got, " ") != strings.Join(ids, " ") {
		t.Fatalf("paged through %v, want %v", got, ids)
	}
	status, _, body := call(t, "GET", f.adminURL+"approvals?user=alice", tok, "")
	if list, _ := body["approvals"].([]any); status != 200 || len(list) != 3 {
		t.Fatalf("alice's: %d %v", status, body)
	}
	for _, q := range []string{"limit=0", "limit=x", "limit=1001"} {
		if status, _, _ := call(t, "GET", f.adminURL+"approvals?"+q, tok, ""); status != 400 {
			t.Errorf("?%s: %d", q, status)
		}
	}

	status, _, body = call(t, "DELETE", f.adminURL+"approvals/"+ids[0], tok, "")
	if status != 200 || body["revoked"] != ids[0] {
		t.Fatalf("revoke: %d %v", status, body)
	}
	if _, err := f.store.GetApproval(context.Background(), ids[0]); err == nil {
		t.Fatal("the revoked approval is still stored")
	}
	if status, _, body := call(t, "DELETE", f.adminURL+"approvals/"+ids[0], tok, ""); status != 404 || body["error"] != "not_found" {
		t.Fatalf("revoking twice: %d %v", status, body)
	}
	audit := f.audit.String()
	if !strings.Contains(audit, "event=admin.approval.revoked admin_client=ops-bot approval_id="+ids[0]+" sub=alice") {
		t.Fatalf("audit: %s", audit)
	}
	if strings.Contains(audit, "hunter2") {
		t.Fatal("the audit holds the arguments")
	}

	// A token of another client, or without the admin scope, changes nothing.
	for _, other := range []string{f.token(t, "stranger", f.issuer+"/admin", "admin"), f.token(t, "ops-bot", f.issuer+"/admin", "audit")} {
		if status, _, _ := call(t, "DELETE", f.adminURL+"approvals/"+ids[1], other, ""); status != 403 {
			t.Errorf("revoke with a foreign token: %d", status)
		}
	}
	if _, err := f.store.GetApproval(context.Background(), ids[1]); err != nil {
		t.Fatalf("approval after refused revokes: %v", err)
	}
}
