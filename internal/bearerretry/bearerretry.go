// Package bearerretry sends a request with a bearer token the caller
// obtained, and when the resource refuses it with 401 (RFC 6750 §3.1
// invalid_token: revoked, or signed by a key the resource no longer trusts)
// drops that token and sends the request once more with a new one. The
// second answer, 401 or not, is passed on. Both the gateway's client
// credentials transport and the middleware's token exchange transport use
// it, so a refused token is handled alike whichever way it was obtained.
package bearerretry

import (
	"context"
	"io"
	"net/http"
)

// Tokens is where a transport's tokens come from.
type Tokens[T any] struct {
	// Get returns a token for ctx (cached or new).
	Get func(ctx context.Context) (T, error)
	// Drop forgets a token the resource refused, so that Get obtains a
	// new one.
	Drop func(T)
	// Value is the access token to send.
	Value func(T) string
}

// RoundTrip sends req through base with tok, and once more with a token
// from ts.Get if the answer is 401 and the body can be sent again (no
// body, or GetBody). A token refused is dropped either way.
func RoundTrip[T any](base http.RoundTripper, req *http.Request, tok T, ts Tokens[T]) (*http.Response, error) {
	// A body sent once can be sent again only through GetBody; whether it
	// can is known before the first send reads it.
	replay := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	res, err := send(base, req, ts.Value(tok))
	if err != nil || res.StatusCode != http.StatusUnauthorized {
		return res, err
	}
	ts.Drop(tok)
	if !replay {
		return res, nil
	}
	again := req
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return res, nil
		}
		again = req.Clone(req.Context())
		again.Body = body
	}
	fresh, err := ts.Get(req.Context())
	if err != nil {
		if again.Body != nil {
			_ = again.Body.Close()
		}
		return res, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
	_ = res.Body.Close()
	res, err = send(base, again, ts.Value(fresh))
	if err == nil && res.StatusCode == http.StatusUnauthorized {
		ts.Drop(fresh)
	}
	return res, err
}

func send(base http.RoundTripper, req *http.Request, tok string) (*http.Response, error) {
	out := req.Clone(req.Context())
	out.Header.Set("Authorization", "Bearer "+tok)
	return base.RoundTrip(out)
}
