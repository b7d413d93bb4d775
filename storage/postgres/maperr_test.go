package postgres

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mcpauth/mcpauth/storage"
)

// Transient database conditions must reach the AS as ErrUnavailable (503
// temporarily_unavailable, retry), never as an unexpected error (500).
func TestMapErrTransientConditionsAreUnavailable(t *testing.T) {
	for _, code := range []string{"40001", "40P01", "55P03", "57014", "57P01", "08006", "53300"} {
		err := mapErr(&pgconn.PgError{Code: code})
		if !errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("SQLSTATE %s maps to %v, want ErrUnavailable", code, err)
		}
	}
	if err := mapErr(&pgconn.PgError{Code: "23505"}); !errors.Is(err, storage.ErrAlreadyExists) {
		t.Errorf("unique violation maps to %v", err)
	}
	if err := mapErr(&pgconn.PgError{Code: "42P01"}); errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("undefined table maps to ErrUnavailable: %v", err)
	}
	// An error mapped already (passed on through a transaction) is kept as is.
	for _, sentinel := range []error{storage.ErrNotFound, storage.ErrAlreadyExists, storage.ErrUnavailable} {
		if err := mapErr(sentinel); err != sentinel {
			t.Errorf("mapErr(%v) = %v, want it unchanged", sentinel, err)
		}
	}
}
