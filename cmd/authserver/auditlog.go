package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
	"github.com/mcpauth/mcpauth/internal/auditchain"
)

// auditChainPurpose is the HKDF info (RFC 5869 §3.2) under which the key
// of the audit chain is derived from the server's secret; the seal and
// hash keys are derived under purposes of their own.
const auditChainPurpose = "mcpauth audit chain"

// auditKey derives the audit chain's key from the server's secret. ok is
// false when there is no lasting secret to derive it from (memory storage
// without secret: a random one per run, so nothing could verify it).
func auditKey(cfg *config.Config) (key []byte, ok bool, err error) {
	if kind, _ := cfg.StorageKind(); cfg.Secret == "" && kind == "memory" {
		return nil, false, nil
	}
	secret, _, err := serverSecret(cfg)
	if err != nil {
		return nil, false, err
	}
	key, err = auditchain.DeriveKey(secret, auditChainPurpose)
	return key, err == nil, err
}

// newChainedLogger is newLogger whose audit records (message "audit")
// carry the chain of internal/auditchain, the other records written as
// newLogger writes them, all through one lock. Without a key it is
// newLogger.
func newChainedLogger(c config.Log, w io.Writer, key []byte) *slog.Logger {
	if key == nil {
		return newLogger(c, w)
	}
	format := auditchain.Text
	if c.Format == "json" {
		format = auditchain.JSON
	}
	cw := auditchain.NewWriter(w, key, format)
	return slog.New(&auditRouter{
		audit: newLogger(c, cw.Chained()).Handler(),
		other: newLogger(c, cw.Plain()).Handler(),
	})
}

// auditRouter sends audit records to one handler and the rest to another.
type auditRouter struct{ audit, other slog.Handler }

func (h *auditRouter) Enabled(ctx context.Context, l slog.Level) bool {
	return h.other.Enabled(ctx, l)
}

func (h *auditRouter) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "audit" {
		return h.audit.Handle(ctx, r)
	}
	return h.other.Handle(ctx, r)
}

func (h *auditRouter) WithAttrs(as []slog.Attr) slog.Handler {
	return &auditRouter{audit: h.audit.WithAttrs(as), other: h.other.WithAttrs(as)}
}

func (h *auditRouter) WithGroup(name string) slog.Handler {
	return &auditRouter{audit: h.audit.WithGroup(name), other: h.other.WithGroup(name)}
}

// errChainBroken: audit verify found a line out of its chain.
var errChainBroken = errors.New("audit verify: the audit chain is broken")

// auditVerify checks the chained audit lines of the files logs (a rotated
// series, oldest first) under the key derived from the secret.
func auditVerify(cfg *config.Config, logs []string, e env) error {
	key, ok, err := auditKey(cfg)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("audit verify: no secret configured: the audit chain of memory storage without secret uses a key of its run only")
	}
	res, err := auditchain.VerifyFiles(key, logs)
	var f *auditchain.Failure
	if errors.As(err, &f) {
		fmt.Fprintln(e.stdout, f.Error())
		return errChainBroken
	}
	if err != nil {
		return err
	}
	res.Report(e.stdout)
	return nil
}
