package as

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

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
	return oauthError{Code: code, Description: rfc.GetDescription(), status: status}
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
	writeJSONError(w, e.status, e.Code, e.Description)
}
