package ops

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcpauth/mcpauth/storage"
)

// Approval is a person's approval of one held tool call as an operator
// sees it: who, through which client, on which resource, which tool, the
// digest of the arguments (never the arguments: they may hold anything
// the person sent), its status and times.
type Approval struct {
	ID         string `json:"approval_id"`
	Subject    string `json:"subject"`
	ClientID   string `json:"client_id"`
	Resource   string `json:"resource"`
	Tool       string `json:"tool"`
	ArgsDigest string `json:"args_digest"`
	// Status is pending, approved, denied or used.
	Status    string     `json:"status"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	DecidedAt *time.Time `json:"decided_at,omitempty"`
	UsedAt    *time.Time `json:"used_at,omitempty"`
	// Expired: ExpiresAt has passed; the approval can no longer be
	// decided or used.
	Expired bool `json:"expired"`
}

// MaxApprovalPage caps ListApprovals' limit.
const MaxApprovalPage = 1000

// ListApprovals returns up to limit approvals (of user when set) whose id
// sorts after after, in id order, and the id to pass as after for the
// next page ("" after the last one). A limit <= 0 or above
// MaxApprovalPage means MaxApprovalPage.
func (o *Ops) ListApprovals(ctx context.Context, user, after string, limit int) ([]Approval, string, error) {
	if limit <= 0 || limit > MaxApprovalPage {
		limit = MaxApprovalPage
	}
	if !utf8.ValidString(user) || strings.IndexByte(user, 0) >= 0 || !utf8.ValidString(after) || strings.IndexByte(after, 0) >= 0 {
		return nil, "", invalidf("user and after must be text")
	}
	list, err := o.Store.ListApprovals(ctx, user, after, limit+1)
	if err != nil {
		return nil, "", err
	}
	now := time.Now()
	out := make([]Approval, 0, len(list))
	for _, a := range list {
		out = append(out, Approval{
			ID: a.ID, Subject: a.Subject, ClientID: a.ClientID, Resource: a.Resource, Tool: a.Tool, ArgsDigest: a.ArgsDigest,
			Status: string(a.Status), CreatedAt: a.CreatedAt.UTC(), ExpiresAt: a.ExpiresAt.UTC(),
			DecidedAt: timePtr(a.DecidedAt), UsedAt: timePtr(a.UsedAt), Expired: !a.Live(now),
		})
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].ID
	}
	return out, next, nil
}

// AllApprovals pages through ListApprovals to the end.
func (o *Ops) AllApprovals(ctx context.Context, user string) ([]Approval, error) {
	all := []Approval{}
	after := ""
	for {
		page, next, err := o.ListApprovals(ctx, user, after, MaxApprovalPage)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" {
			return all, nil
		}
		after = next
	}
}

// RevokeApproval deletes the approval id, whatever its status: a pending
// one can no longer be decided, an approved one no longer used; the held
// call, retried, is held again. ErrNotFound when there is none.
func (o *Ops) RevokeApproval(ctx context.Context, actor, id string) error {
	if id == "" || !utf8.ValidString(id) || strings.IndexByte(id, 0) >= 0 {
		return invalidf("an approval id is required")
	}
	a, err := o.Store.GetApproval(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	if err := o.Store.DeleteApproval(ctx, "", id); errors.Is(err, storage.ErrNotFound) {
		return ErrNotFound
	} else if err != nil {
		return err
	}
	o.audit(ctx, actor, "admin.approval.revoked", "approval_id", id, "sub", a.Subject, "client_id", a.ClientID,
		"resource", a.Resource, "tool", a.Tool, "args_digest", a.ArgsDigest)
	return nil
}
