package sqlstore

import (
	"context"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

const approvalCols = `id, subject, client_id, resource, tool, args_digest, arguments, status,
	created_at, expires_at, decided_at, used_at`

// approvalDest are the scan destinations of approvalCols into a.
func (s *Store) approvalDest(a *storage.Approval) []any {
	d := s.d
	return []any{&a.ID, &a.Subject, &a.ClientID, &a.Resource, &a.Tool, &a.ArgsDigest, &a.Arguments, &a.Status,
		d.ScanTime(&a.CreatedAt), d.ScanTime(&a.ExpiresAt), d.ScanTime(&a.DecidedAt), d.ScanTime(&a.UsedAt)}
}

func (s *Store) scanApproval(row Row, a *storage.Approval) error {
	return row.Scan(s.approvalDest(a)...)
}

// The condition on a binding, its five columns as $1 to $5.
const approvalBinding = `subject = $1 AND client_id = $2 AND resource = $3 AND tool = $4 AND args_digest = $5`

func bindingArgs(b storage.ApprovalBinding) []any {
	return []any{b.Subject, b.ClientID, b.Resource, b.Tool, b.ArgsDigest}
}

// CreateApproval implements storage.ApprovalStore in one transaction: the
// binding's pending approvals that are no longer live are removed (the
// unique index allows one pending approval per binding), then a is
// inserted unless a live one is there, which is returned instead.
func (s *Store) CreateApproval(ctx context.Context, a *storage.Approval) (*storage.Approval, error) {
	if err := s.checkText(a.ID, a.Subject, a.ClientID, a.Resource, a.Tool, a.ArgsDigest); err != nil {
		return nil, err
	}
	d := s.d
	b := bindingArgs(a.ApprovalBinding)
	var out storage.Approval
	err := d.InTx(ctx, func(q Querier) error {
		if _, err := q.Exec(ctx, `DELETE FROM approvals WHERE `+approvalBinding+` AND status = 'pending' AND expires_at <= $6`,
			append(b, d.Time(a.CreatedAt))...); err != nil {
			return s.fail(err)
		}
		n, err := q.Exec(ctx, `INSERT INTO approvals (`+approvalCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9, NULL, NULL)
			ON CONFLICT (subject, client_id, resource, tool, args_digest) WHERE status = 'pending' DO NOTHING`,
			a.ID, a.Subject, a.ClientID, a.Resource, a.Tool, a.ArgsDigest, nonNil(a.Arguments), d.Time(a.CreatedAt), d.Time(a.ExpiresAt))
		if err != nil {
			return s.fail(err)
		}
		if n == 1 {
			out = *a
			out.Status, out.DecidedAt, out.UsedAt = storage.ApprovalPending, time.Time{}, time.Time{}
			out.Arguments = append([]byte(nil), a.Arguments...)
			return nil
		}
		return s.fail(q.QueryRow(ctx, `SELECT `+approvalCols+` FROM approvals WHERE `+approvalBinding+` AND status = 'pending'`,
			b...).Scan(s.approvalDest(&out)...))
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// nonNil keeps nil out of the NOT NULL arguments column.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// GetApproval implements storage.ApprovalStore.
func (s *Store) GetApproval(ctx context.Context, id string) (*storage.Approval, error) {
	if !s.storable(id) {
		return nil, storage.ErrNotFound
	}
	return one(s, s.d.Read(ctx).QueryRow(ctx, `SELECT `+approvalCols+` FROM approvals WHERE id = $1`, id), s.scanApproval)
}

// DecideApproval implements storage.ApprovalStore with one update whose
// WHERE clause holds the rule; when it changes nothing, a read tells an
// unknown approval from one that cannot be decided.
func (s *Store) DecideApproval(ctx context.Context, id, subject string, approve bool, now time.Time) (*storage.Approval, error) {
	if !s.storable(id, subject) {
		return nil, storage.ErrNotFound
	}
	status := storage.ApprovalDenied
	if approve {
		status = storage.ApprovalApproved
	}
	var out storage.Approval
	err := s.d.WriteRow(ctx, s.approvalDest(&out), `UPDATE approvals SET status = $3, decided_at = $4
		WHERE id = $1 AND subject = $2 AND status = 'pending' AND expires_at > $4 RETURNING `+approvalCols,
		id, subject, string(status), s.d.Time(now))
	if err = s.fail(err); err == nil {
		return &out, nil
	}
	if err != storage.ErrNotFound {
		return nil, err
	}
	a, gerr := s.GetApproval(ctx, id)
	if gerr != nil {
		return nil, gerr
	}
	if a.Subject != subject {
		return nil, storage.ErrNotFound
	}
	return nil, storage.ErrInactive
}

// UseApproval implements storage.ApprovalStore with one update: the
// sub-select picks the oldest usable approval, and the update's own
// condition, checked again on the row it changes, lets only one of
// concurrent callers change it.
func (s *Store) UseApproval(ctx context.Context, b storage.ApprovalBinding, now time.Time) (*storage.Approval, error) {
	if !s.storable(b.Subject, b.ClientID, b.Resource, b.Tool, b.ArgsDigest) {
		return nil, storage.ErrNotFound
	}
	var out storage.Approval
	err := s.d.WriteRow(ctx, s.approvalDest(&out), `UPDATE approvals
		SET status = CASE WHEN status = 'approved' THEN 'used' ELSE status END, used_at = $6
		WHERE id = (SELECT id FROM approvals WHERE `+approvalBinding+`
				AND status IN ('approved', 'denied') AND used_at IS NULL AND expires_at > $6
				ORDER BY created_at, id LIMIT 1)
			AND status IN ('approved', 'denied') AND used_at IS NULL
		RETURNING `+approvalCols, append(bindingArgs(b), s.d.Time(now))...)
	if err != nil {
		return nil, s.fail(err)
	}
	return &out, nil
}

// ListApprovals implements storage.ApprovalStore. IDs compare bytewise (the
// column's collation), as in the other backends.
func (s *Store) ListApprovals(ctx context.Context, subject, afterID string, limit int) ([]storage.Approval, error) {
	if limit <= 0 || !s.storable(subject) {
		return []storage.Approval{}, nil
	}
	if !s.storable(afterID) {
		return nil, s.checkText(afterID)
	}
	rows, err := s.d.Read(ctx).Query(ctx, `SELECT `+approvalCols+` FROM approvals
		WHERE ($1 = '' OR subject = $1) AND id > $2 ORDER BY id LIMIT $3`, subject, afterID, limit)
	return collect(s, []storage.Approval{}, rows, err, s.scanApproval)
}

// DeleteApproval implements storage.ApprovalStore.
func (s *Store) DeleteApproval(ctx context.Context, subject, id string) error {
	if !s.storable(subject, id) {
		return storage.ErrNotFound
	}
	return s.execOne(ctx, `DELETE FROM approvals WHERE id = $2 AND ($1 = '' OR subject = $1)`, subject, id)
}

// DeleteExpiredApprovals implements storage.ApprovalStore. A limit <= 0
// deletes nothing.
func (s *Store) DeleteExpiredApprovals(ctx context.Context, before time.Time, limit int) (int, error) {
	return s.deleteBatch(ctx, "approvals", "id", "expires_at < $1", before, limit)
}
