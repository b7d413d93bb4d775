package loginui

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestErrorPagesKeepOnlyErrorStatuses: the error pages answer with the
// status asked for when it is an error status (400 to 599) and 400
// otherwise.
func TestErrorPagesKeepOnlyErrorStatuses(t *testing.T) {
	h := newHarness(t, nil)
	for _, tc := range []struct{ status, want int }{
		{200, 400}, {399, 400}, {400, 400}, {404, 404}, {599, 599}, {600, 400},
	} {
		rec := httptest.NewRecorder()
		ErrorPage(rec, tc.status, "Error", "")
		if rec.Code != tc.want {
			t.Errorf("ErrorPage(%d): status %d, want %d", tc.status, rec.Code, tc.want)
		}
		rec = httptest.NewRecorder()
		h.ui.ClientErrorPage(rec, tc.status, "Error", "", "https://app.example/cb?error=x")
		if rec.Code != tc.want {
			t.Errorf("ClientErrorPage(%d): status %d, want %d", tc.status, rec.Code, tc.want)
		}
	}
	rec := httptest.NewRecorder()
	h.ui.ErrorPage(rec, http.StatusOK, "Error", "")
	if rec.Code != http.StatusBadRequest {
		t.Errorf("UI.ErrorPage(200): status %d, want 400", rec.Code)
	}
}
