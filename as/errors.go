package as

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/ory/fosite"
)

// errInvalidTarget is RFC 8707 §2: the requested resource is invalid,
// unknown, or not one the client may use.
func errInvalidTarget(desc string) *fosite.RFC6749Error {
	return &fosite.RFC6749Error{
		ErrorField:       "invalid_target",
		DescriptionField: desc,
		CodeField:        http.StatusBadRequest,
	}
}

// oauthError is the wire form of an error (RFC 6749 §5.2).
type oauthError struct {
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
	status      int
}

// The answers to a storage outage and to an internal error: the same
// generic words whatever happened inside.
var (
	unavailableAnswer = oauthError{Code: "temporarily_unavailable", Description: "The service is temporarily unavailable. Try again later.", status: http.StatusServiceUnavailable}
	serverErrorAnswer = oauthError{Code: "server_error", Description: "The server encountered an unexpected condition.", status: http.StatusInternalServerError}
)

// toOAuthError maps any error to the RFC error word and status it deserves.
// Internal errors are logged and answered with a generic server_error; an
// unreachable store gives 503 temporarily_unavailable.
func (s *Server) toOAuthError(ctx context.Context, err error) oauthError {
	if isUnavailable(err) {
		s.log.error(ctx, "storage unavailable", "err", err)
		return unavailableAnswer
	}
	if errors.Is(err, errCodeRace) {
		return oauthError{Code: "invalid_grant", Description: "The authorization code has already been used.", status: http.StatusBadRequest}
	}
	var rfc *fosite.RFC6749Error
	if !errors.As(err, &rfc) {
		s.log.error(ctx, "internal error", "err", err)
		return serverErrorAnswer
	}
	if rfc.ErrorField == fosite.ErrServerError.ErrorField || rfc.CodeField >= 500 || rfc.CodeField == 0 {
		s.log.error(ctx, "internal error", "err", err, "debug", rfc.GetDescription()+" "+rfc.DebugField)
		if rfc.ErrorField == fosite.ErrTemporarilyUnavailable.ErrorField {
			return unavailableAnswer
		}
		return serverErrorAnswer
	}
	code := rfc.ErrorField
	status := rfc.CodeField
	switch code {
	case "jti_known":
		code, status = "invalid_client", http.StatusUnauthorized
	case fosite.ErrInvalidClient.ErrorField:
		status = http.StatusUnauthorized
	case fosite.ErrTokenExpired.ErrorField, fosite.ErrTokenSignatureMismatch.ErrorField, fosite.ErrInvalidTokenFormat.ErrorField:
		code, status = "invalid_grant", http.StatusBadRequest
	case fosite.ErrRequestUnauthorized.ErrorField:
		code, status = "invalid_client", http.StatusUnauthorized
	}
	return oauthError{Code: code, Description: describe(rfc), status: status}
}

// describe is the error_description of rfc (RFC 6749 §5.2: human-readable
// text helping the developer): one sentence. fosite's GetDescription joins
// the generic description of the error word and the specific hint, which
// often says the same again ("Client authentication failed (e.g., ...).
// Client authentication failed."). The hint, when there is one of the
// request's own, is the more precise sentence and is used alone; otherwise
// the generic description is. fosite's stock hints ("Make sure that the
// various parameters are correct, ...") say nothing about the request and
// count as none.
func describe(rfc *fosite.RFC6749Error) string {
	d := strings.TrimSpace(rfc.HintField)
	if d == "" || stockHints[d] {
		d = strings.TrimSpace(rfc.DescriptionField)
	}
	if d == "" {
		return ""
	}
	if !strings.HasSuffix(d, ".") && !strings.HasSuffix(d, "?") && !strings.HasSuffix(d, "!") {
		d += "."
	}
	return strings.ReplaceAll(d, "\"", "'")
}

func writeJSONError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="token"`)
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(oauthError{Code: code, Description: desc})
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := s.toOAuthError(r.Context(), err)
	if e.Code == "invalid_client" {
		s.log.audit(r.Context(), "client.auth_failed", "client_id", requestClientID(r), "path", r.URL.Path)
	}
	var ce *connectRequiredError
	if errors.As(err, &ce) && e.Code == ce.rfc.ErrorField {
		w.Header().Set("Content-Type", "application/json;charset=UTF-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(e.status)
		_ = json.NewEncoder(w).Encode(struct {
			oauthError
			ConnectURI string `json:"connect_uri"`
		}{e, ce.connectURI})
		return
	}
	writeJSONError(w, e.status, e.Code, e.Description)
}

// stockHints are the hints fosite's error values carry before any WithHint.
var stockHints = func() map[string]bool {
	m := map[string]bool{}
	for _, e := range []*fosite.RFC6749Error{fosite.ErrRequestForbidden, fosite.ErrInvalidRequest, fosite.ErrUnauthorizedClient,
		fosite.ErrAccessDenied, fosite.ErrRequestUnauthorized, fosite.ErrTokenSignatureMismatch, fosite.ErrInvalidTokenFormat,
		fosite.ErrTokenExpired, fosite.ErrScopeNotGranted, fosite.ErrTokenClaim, fosite.ErrInactiveToken} {
		if e.HintField != "" {
			m[strings.TrimSpace(e.HintField)] = true
		}
	}
	return m
}()
