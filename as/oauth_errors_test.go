package as

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/storage"
)

// TestToOAuthError pins the error word, status and description each kind
// of error is answered with (RFC 6749 §5.2), and that internal ones are
// logged and answered with generic words only.
func TestToOAuthError(t *testing.T) {
	h, logs := newLoggedHarness(t, nil)
	for _, tc := range []struct {
		name   string
		err    error
		want   oauthError
		logged bool // "internal error" or "storage unavailable" logged
	}{
		{"a storage outage", fmt.Errorf("reading: %w", storage.ErrUnavailable), unavailableAnswer, true},
		{"fosite's temporarily_unavailable", fosite.ErrTemporarilyUnavailable.WithHint("store down at 10.0.0.7"), unavailableAnswer, true},
		{"temporarily_unavailable with a status of its own", &fosite.RFC6749Error{ErrorField: "temporarily_unavailable", CodeField: 500, HintField: "store down at 10.0.0.7"}, unavailableAnswer, true},
		{"a lost code race", errCodeRace, oauthError{Code: "invalid_grant", Description: "The authorization code has already been used.", status: 400}, false},
		{"an error fosite does not know", errors.New("pq: connection to 10.0.0.7 refused"), serverErrorAnswer, true},
		{"fosite's server_error with a hint", fosite.ErrServerError.WithHint("key 7 is unreadable"), serverErrorAnswer, true},
		{"server_error with status 400", &fosite.RFC6749Error{ErrorField: "server_error", CodeField: 400, HintField: "key 7 is unreadable"}, serverErrorAnswer, true},
		{"another word with a 5xx status", &fosite.RFC6749Error{ErrorField: "invalid_request", CodeField: 502, HintField: "upstream 10.0.0.7"}, serverErrorAnswer, true},
		{"another word with status 500", &fosite.RFC6749Error{ErrorField: "invalid_request", CodeField: 500, HintField: "upstream 10.0.0.7"}, serverErrorAnswer, true},
		{"another word without a status", &fosite.RFC6749Error{ErrorField: "invalid_request", HintField: "upstream 10.0.0.7"}, serverErrorAnswer, true},
		{"a 4xx just below 500", &fosite.RFC6749Error{ErrorField: "invalid_request", CodeField: 499, HintField: "Odd."}, oauthError{Code: "invalid_request", Description: "Odd.", status: 499}, false},
		{"invalid_client", fosite.ErrInvalidClient.WithHint("Client authentication failed."), oauthError{Code: "invalid_client", Description: "Client authentication failed.", status: 401}, false},
		{"a known jti", &fosite.RFC6749Error{ErrorField: "jti_known", CodeField: 400, HintField: "Seen before."}, oauthError{Code: "invalid_client", Description: "Seen before.", status: 401}, false},
		{"an expired token", fosite.ErrTokenExpired.WithHint("Expired a minute ago."), oauthError{Code: "invalid_grant", Description: "Expired a minute ago.", status: 400}, false},
		{"request_unauthorized", fosite.ErrRequestUnauthorized.WithHint("No."), oauthError{Code: "invalid_client", Description: "No.", status: 401}, false},
		{"invalid_target", errInvalidTarget("Unknown resource."), oauthError{Code: "invalid_target", Description: "Unknown resource.", status: 400}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := strings.Count(logs.String(), `"level":"ERROR"`)
			got := h.as.toOAuthError(context.Background(), tc.err)
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if logged := strings.Count(logs.String(), `"level":"ERROR"`) > before; logged != tc.logged {
				t.Errorf("logged an error: %v, want %v", logged, tc.logged)
			}
		})
	}
}

// TestDescribe pins the error_description made of a fosite error: its own
// hint alone, else the generic description, one sentence ending in a full
// stop unless it ends in ? or !, with double quotes turned into single.
func TestDescribe(t *testing.T) {
	stock := fosite.ErrInvalidRequest.HintField
	if !stockHints[strings.TrimSpace(stock)] {
		t.Fatalf("fosite's invalid_request hint %q is not a stock hint", stock)
	}
	for _, tc := range []struct {
		name, hint, desc, want string
	}{
		{"the request's own hint alone", "The code has expired.", "The generic words.", "The code has expired."},
		{"a stock hint counts as none", stock, "The generic words.", "The generic words."},
		{"no hint", "", "The generic words", "The generic words."},
		{"a hint of spaces counts as none", "   ", "The generic words.", "The generic words."},
		{"nothing at all", "", "", ""},
		{"a question kept", "Did you mean code?", "", "Did you mean code?"},
		{"an exclamation kept", "Stop!", "", "Stop!"},
		{"a full stop added", "No full stop", "", "No full stop."},
		{"double quotes made single", `The "resource" is unknown`, "", "The 'resource' is unknown."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := describe(&fosite.RFC6749Error{HintField: tc.hint, DescriptionField: tc.desc}); got != tc.want {
				t.Errorf("describe = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestWriteJSONErrorChallengesOnlyOn401: a 401 carries the Basic
// challenge of RFC 6749 §5.2 (invalid_client), other statuses none.
func TestWriteJSONErrorChallengesOnlyOn401(t *testing.T) {
	for status, want := range map[int]string{401: `Basic realm="token"`, 400: "", 503: ""} {
		w := httptest.NewRecorder()
		writeJSONError(w, status, "x", "y")
		if got := w.Header().Get("WWW-Authenticate"); got != want || w.Code != status {
			t.Errorf("status %d: WWW-Authenticate %q, code %d; want %q", status, got, w.Code, want)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json;charset=UTF-8" {
			t.Errorf("status %d: Content-Type %q", status, ct)
		}
	}
}
