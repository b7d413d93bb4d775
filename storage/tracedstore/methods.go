// One method per method of storage.Store, each the same: a span around
// the call to the store it wraps.

package tracedstore

import (
	"context"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

func (w *store) GetClient(ctx context.Context, id string) (*storage.Client, error) {
	ctx, span := w.start(ctx, "GetClient")
	r0, err := w.next.GetClient(ctx, id)
	end(span, err)
	return r0, err
}

func (w *store) CreateClient(ctx context.Context, c *storage.Client) error {
	ctx, span := w.start(ctx, "CreateClient")
	err := w.next.CreateClient(ctx, c)
	end(span, err)
	return err
}

func (w *store) UpdateClient(ctx context.Context, id string, update func(storage.Client) (storage.Client, error)) error {
	ctx, span := w.start(ctx, "UpdateClient")
	err := w.next.UpdateClient(ctx, id, update)
	end(span, err)
	return err
}

func (w *store) DeleteClient(ctx context.Context, id string) error {
	ctx, span := w.start(ctx, "DeleteClient")
	err := w.next.DeleteClient(ctx, id)
	end(span, err)
	return err
}

func (w *store) TouchClient(ctx context.Context, id string, at time.Time) error {
	ctx, span := w.start(ctx, "TouchClient")
	err := w.next.TouchClient(ctx, id, at)
	end(span, err)
	return err
}

func (w *store) ListClients(ctx context.Context, afterID string, limit int) ([]storage.Client, error) {
	ctx, span := w.start(ctx, "ListClients")
	r0, err := w.next.ListClients(ctx, afterID, limit)
	end(span, err)
	return r0, err
}

func (w *store) CountClients(ctx context.Context, source string) (int, error) {
	ctx, span := w.start(ctx, "CountClients")
	r0, err := w.next.CountClients(ctx, source)
	end(span, err)
	return r0, err
}

func (w *store) ReapClients(ctx context.Context, neverUsedBefore time.Time, idleBefore time.Time, limit int) (int, error) {
	ctx, span := w.start(ctx, "ReapClients")
	r0, err := w.next.ReapClients(ctx, neverUsedBefore, idleBefore, limit)
	end(span, err)
	return r0, err
}

func (w *store) CreateToken(ctx context.Context, t *storage.Token) error {
	ctx, span := w.start(ctx, "CreateToken")
	err := w.next.CreateToken(ctx, t)
	end(span, err)
	return err
}

func (w *store) GetToken(ctx context.Context, kind storage.TokenKind, signature string) (*storage.Token, error) {
	ctx, span := w.start(ctx, "GetToken")
	r0, err := w.next.GetToken(ctx, kind, signature)
	end(span, err)
	return r0, err
}

func (w *store) DeactivateToken(ctx context.Context, kind storage.TokenKind, signature string) error {
	ctx, span := w.start(ctx, "DeactivateToken")
	err := w.next.DeactivateToken(ctx, kind, signature)
	end(span, err)
	return err
}

func (w *store) RotateToken(ctx context.Context, kind storage.TokenKind, signature string, now time.Time, grace time.Duration) error {
	ctx, span := w.start(ctx, "RotateToken")
	err := w.next.RotateToken(ctx, kind, signature, now, grace)
	end(span, err)
	return err
}

func (w *store) RevokeTokens(ctx context.Context, kind storage.TokenKind, requestID string) error {
	ctx, span := w.start(ctx, "RevokeTokens")
	err := w.next.RevokeTokens(ctx, kind, requestID)
	end(span, err)
	return err
}

func (w *store) DeleteToken(ctx context.Context, kind storage.TokenKind, signature string) error {
	ctx, span := w.start(ctx, "DeleteToken")
	err := w.next.DeleteToken(ctx, kind, signature)
	end(span, err)
	return err
}

func (w *store) DeleteExpiredTokens(ctx context.Context, before time.Time, limit int) (int, error) {
	ctx, span := w.start(ctx, "DeleteExpiredTokens")
	r0, err := w.next.DeleteExpiredTokens(ctx, before, limit)
	end(span, err)
	return r0, err
}

func (w *store) ListGrants(ctx context.Context, f storage.GrantFilter, now time.Time, limit int) ([]storage.Grant, error) {
	ctx, span := w.start(ctx, "ListGrants")
	r0, err := w.next.ListGrants(ctx, f, now, limit)
	end(span, err)
	return r0, err
}

func (w *store) RevokeGrants(ctx context.Context, f storage.GrantFilter) (int, error) {
	ctx, span := w.start(ctx, "RevokeGrants")
	r0, err := w.next.RevokeGrants(ctx, f)
	end(span, err)
	return r0, err
}

func (w *store) AllocateStatusIndices(ctx context.Context, n int) (int64, error) {
	ctx, span := w.start(ctx, "AllocateStatusIndices")
	r0, err := w.next.AllocateStatusIndices(ctx, n)
	end(span, err)
	return r0, err
}

func (w *store) StatusList(ctx context.Context, now time.Time) (int64, []int64, error) {
	ctx, span := w.start(ctx, "StatusList")
	r0, r1, err := w.next.StatusList(ctx, now)
	end(span, err)
	return r0, r1, err
}

func (w *store) DeleteExpiredStatuses(ctx context.Context, before time.Time, limit int) (int, error) {
	ctx, span := w.start(ctx, "DeleteExpiredStatuses")
	r0, err := w.next.DeleteExpiredStatuses(ctx, before, limit)
	end(span, err)
	return r0, err
}

func (w *store) GetConsent(ctx context.Context, subject string, clientID string, resource string) (*storage.Consent, error) {
	ctx, span := w.start(ctx, "GetConsent")
	r0, err := w.next.GetConsent(ctx, subject, clientID, resource)
	end(span, err)
	return r0, err
}

func (w *store) PutConsent(ctx context.Context, c *storage.Consent) error {
	ctx, span := w.start(ctx, "PutConsent")
	err := w.next.PutConsent(ctx, c)
	end(span, err)
	return err
}

func (w *store) DeleteConsents(ctx context.Context, subject string, clientID string) error {
	ctx, span := w.start(ctx, "DeleteConsents")
	err := w.next.DeleteConsents(ctx, subject, clientID)
	end(span, err)
	return err
}

func (w *store) ListConsents(ctx context.Context, subject string) ([]storage.Consent, error) {
	ctx, span := w.start(ctx, "ListConsents")
	r0, err := w.next.ListConsents(ctx, subject)
	end(span, err)
	return r0, err
}

func (w *store) DeleteExpiredConsents(ctx context.Context, before time.Time, limit int) (int, error) {
	ctx, span := w.start(ctx, "DeleteExpiredConsents")
	r0, err := w.next.DeleteExpiredConsents(ctx, before, limit)
	end(span, err)
	return r0, err
}

func (w *store) ListKeys(ctx context.Context) ([]storage.SigningKey, error) {
	ctx, span := w.start(ctx, "ListKeys")
	r0, err := w.next.ListKeys(ctx)
	end(span, err)
	return r0, err
}

func (w *store) CreateKey(ctx context.Context, k *storage.SigningKey) error {
	ctx, span := w.start(ctx, "CreateKey")
	err := w.next.CreateKey(ctx, k)
	end(span, err)
	return err
}

func (w *store) RetireKeys(ctx context.Context, keepID string, at time.Time) error {
	ctx, span := w.start(ctx, "RetireKeys")
	err := w.next.RetireKeys(ctx, keepID, at)
	end(span, err)
	return err
}

func (w *store) DeleteKey(ctx context.Context, id string) error {
	ctx, span := w.start(ctx, "DeleteKey")
	err := w.next.DeleteKey(ctx, id)
	end(span, err)
	return err
}

func (w *store) UseJTI(ctx context.Context, id string, expiresAt time.Time) error {
	ctx, span := w.start(ctx, "UseJTI")
	err := w.next.UseJTI(ctx, id, expiresAt)
	end(span, err)
	return err
}

func (w *store) DeleteExpiredJTIs(ctx context.Context, before time.Time, limit int) (int, error) {
	ctx, span := w.start(ctx, "DeleteExpiredJTIs")
	r0, err := w.next.DeleteExpiredJTIs(ctx, before, limit)
	end(span, err)
	return r0, err
}

func (w *store) UpdateCounters(ctx context.Context, keys []string, now time.Time, update func([]storage.Counter) ([]storage.Counter, error)) error {
	ctx, span := w.start(ctx, "UpdateCounters")
	err := w.next.UpdateCounters(ctx, keys, now, update)
	end(span, err)
	return err
}

func (w *store) DeleteExpiredCounters(ctx context.Context, before time.Time, limit int) (int, error) {
	ctx, span := w.start(ctx, "DeleteExpiredCounters")
	r0, err := w.next.DeleteExpiredCounters(ctx, before, limit)
	end(span, err)
	return r0, err
}

func (w *store) CreateSession(ctx context.Context, s *storage.Session) error {
	ctx, span := w.start(ctx, "CreateSession")
	err := w.next.CreateSession(ctx, s)
	end(span, err)
	return err
}

func (w *store) GetSession(ctx context.Context, id string) (*storage.Session, error) {
	ctx, span := w.start(ctx, "GetSession")
	r0, err := w.next.GetSession(ctx, id)
	end(span, err)
	return r0, err
}

func (w *store) TouchSession(ctx context.Context, id string, lastSeen time.Time, idleExpiresAt time.Time) error {
	ctx, span := w.start(ctx, "TouchSession")
	err := w.next.TouchSession(ctx, id, lastSeen, idleExpiresAt)
	end(span, err)
	return err
}

func (w *store) ListSessions(ctx context.Context, subject string) ([]storage.Session, error) {
	ctx, span := w.start(ctx, "ListSessions")
	r0, err := w.next.ListSessions(ctx, subject)
	end(span, err)
	return r0, err
}

func (w *store) DeleteSession(ctx context.Context, subject string, id string) error {
	ctx, span := w.start(ctx, "DeleteSession")
	err := w.next.DeleteSession(ctx, subject, id)
	end(span, err)
	return err
}

func (w *store) DeleteExpiredSessions(ctx context.Context, before time.Time, limit int) (int, error) {
	ctx, span := w.start(ctx, "DeleteExpiredSessions")
	r0, err := w.next.DeleteExpiredSessions(ctx, before, limit)
	end(span, err)
	return r0, err
}

func (w *store) RecordLogin(ctx context.Context, u *storage.User) (*storage.User, error) {
	ctx, span := w.start(ctx, "RecordLogin")
	r0, err := w.next.RecordLogin(ctx, u)
	end(span, err)
	return r0, err
}

func (w *store) GetUser(ctx context.Context, subject string) (*storage.User, error) {
	ctx, span := w.start(ctx, "GetUser")
	r0, err := w.next.GetUser(ctx, subject)
	end(span, err)
	return r0, err
}

func (w *store) ListUsers(ctx context.Context, afterSubject string, limit int) ([]storage.User, error) {
	ctx, span := w.start(ctx, "ListUsers")
	r0, err := w.next.ListUsers(ctx, afterSubject, limit)
	end(span, err)
	return r0, err
}

func (w *store) SetUserDisabled(ctx context.Context, subject string, disabled bool) error {
	ctx, span := w.start(ctx, "SetUserDisabled")
	err := w.next.SetUserDisabled(ctx, subject, disabled)
	end(span, err)
	return err
}

func (w *store) UpdateUpstreamSession(ctx context.Context, subject string, sealedRefresh []byte, checkedAt time.Time, groups []string, claims map[string][]string) error {
	ctx, span := w.start(ctx, "UpdateUpstreamSession")
	err := w.next.UpdateUpstreamSession(ctx, subject, sealedRefresh, checkedAt, groups, claims)
	end(span, err)
	return err
}

func (w *store) CreateApproval(ctx context.Context, a *storage.Approval) (*storage.Approval, error) {
	ctx, span := w.start(ctx, "CreateApproval")
	r0, err := w.next.CreateApproval(ctx, a)
	end(span, err)
	return r0, err
}

func (w *store) GetApproval(ctx context.Context, id string) (*storage.Approval, error) {
	ctx, span := w.start(ctx, "GetApproval")
	r0, err := w.next.GetApproval(ctx, id)
	end(span, err)
	return r0, err
}

func (w *store) DecideApproval(ctx context.Context, id string, subject string, approve bool, now time.Time) (*storage.Approval, error) {
	ctx, span := w.start(ctx, "DecideApproval")
	r0, err := w.next.DecideApproval(ctx, id, subject, approve, now)
	end(span, err)
	return r0, err
}

func (w *store) UseApproval(ctx context.Context, b storage.ApprovalBinding, now time.Time) (*storage.Approval, error) {
	ctx, span := w.start(ctx, "UseApproval")
	r0, err := w.next.UseApproval(ctx, b, now)
	end(span, err)
	return r0, err
}

func (w *store) ListApprovals(ctx context.Context, subject string, afterID string, limit int) ([]storage.Approval, error) {
	ctx, span := w.start(ctx, "ListApprovals")
	r0, err := w.next.ListApprovals(ctx, subject, afterID, limit)
	end(span, err)
	return r0, err
}

func (w *store) DeleteApproval(ctx context.Context, subject string, id string) error {
	ctx, span := w.start(ctx, "DeleteApproval")
	err := w.next.DeleteApproval(ctx, subject, id)
	end(span, err)
	return err
}

func (w *store) DeleteExpiredApprovals(ctx context.Context, before time.Time, limit int) (int, error) {
	ctx, span := w.start(ctx, "DeleteExpiredApprovals")
	r0, err := w.next.DeleteExpiredApprovals(ctx, before, limit)
	end(span, err)
	return r0, err
}

func (w *store) BeginTX(ctx context.Context) (context.Context, error) {
	// The transaction's context is derived from ctx, not from the span's,
	// so that the calls made in it are children of the request's span.
	_, span := w.start(ctx, "BeginTX")
	out, err := w.next.BeginTX(ctx)
	end(span, err)
	return out, err
}

func (w *store) Commit(ctx context.Context) error {
	ctx, span := w.start(ctx, "Commit")
	err := w.next.Commit(ctx)
	end(span, err)
	return err
}

func (w *store) Rollback(ctx context.Context) error {
	ctx, span := w.start(ctx, "Rollback")
	err := w.next.Rollback(ctx)
	end(span, err)
	return err
}

func (w *store) Ping(ctx context.Context) error {
	ctx, span := w.start(ctx, "Ping")
	err := w.next.Ping(ctx)
	end(span, err)
	return err
}

func (w *store) AppendAuditEvents(ctx context.Context, events []storage.AuditEvent) error {
	ctx, span := w.start(ctx, "AppendAuditEvents")
	err := w.next.AppendAuditEvents(ctx, events)
	end(span, err)
	return err
}

func (w *store) ListAuditEvents(ctx context.Context, f storage.AuditFilter) ([]storage.AuditEvent, error) {
	ctx, span := w.start(ctx, "ListAuditEvents")
	r0, err := w.next.ListAuditEvents(ctx, f)
	end(span, err)
	return r0, err
}

func (w *store) DeleteAuditEventsBefore(ctx context.Context, before time.Time, limit int) (int, error) {
	ctx, span := w.start(ctx, "DeleteAuditEventsBefore")
	r0, err := w.next.DeleteAuditEventsBefore(ctx, before, limit)
	end(span, err)
	return r0, err
}

func (w *store) AddStats(ctx context.Context, counts []storage.StatCount) error {
	ctx, span := w.start(ctx, "AddStats")
	err := w.next.AddStats(ctx, counts)
	end(span, err)
	return err
}

func (w *store) ListStats(ctx context.Context, since time.Time) ([]storage.StatCount, error) {
	ctx, span := w.start(ctx, "ListStats")
	r0, err := w.next.ListStats(ctx, since)
	end(span, err)
	return r0, err
}

func (w *store) DeleteStatsBefore(ctx context.Context, before time.Time, limit int) (int, error) {
	ctx, span := w.start(ctx, "DeleteStatsBefore")
	r0, err := w.next.DeleteStatsBefore(ctx, before, limit)
	end(span, err)
	return r0, err
}
