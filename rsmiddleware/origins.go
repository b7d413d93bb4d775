package rsmiddleware

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// RewriteOrigins returns an http.RoundTripper for Config.HTTPClient and
// ExchangeConfig.HTTPClient that sends every request for one of the public
// origins in routes to the internal origin it maps to, and every other
// request to base (nil: http.DefaultTransport) unchanged.
//
// It is for a resource server that reaches the AS, or a downstream API, by
// another address than the one in the issuer and in the AS's metadata: in a
// container network the AS is http://authserver:9000 while its issuer, the
// "iss" of every token and the jwks_uri and token_endpoint of its RFC 8414
// metadata all say http://127.0.0.1:9000 or https://auth.example.com. Only
// the connection moves: the URL's path and query are kept, the Host header
// keeps the public host, and the Verifier still compares the metadata's
// issuer and the tokens' iss with the public issuer byte for byte (RFC 8414
// §3.3, RFC 9068 §4).
//
// Origins are scheme://host[:port] (RFC 6454 §4): lower-cased, a default port
// (80 for http, 443 for https) dropped; a path, query, fragment or user info
// is an error.
func RewriteOrigins(base http.RoundTripper, routes map[string]string) (http.RoundTripper, error) {
	if base == nil {
		base = http.DefaultTransport
	}
	rt := &originRewriter{base: base, to: map[string]*url.URL{}}
	for from, to := range routes {
		f, err := parseOrigin(from)
		if err != nil {
			return nil, fmt.Errorf("rsmiddleware: RewriteOrigins: public origin %q: %w", from, err)
		}
		t, err := parseOrigin(to)
		if err != nil {
			return nil, fmt.Errorf("rsmiddleware: RewriteOrigins: internal origin %q: %w", to, err)
		}
		rt.to[originKey(f)] = t
	}
	return rt, nil
}

type originRewriter struct {
	base http.RoundTripper
	to   map[string]*url.URL // originKey of the public origin -> internal origin
}

func (o *originRewriter) RoundTrip(req *http.Request) (*http.Response, error) {
	t, ok := o.to[originKey(req.URL)]
	if !ok {
		return o.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	if r.Host == "" {
		r.Host = req.URL.Host
	}
	r.URL.Scheme, r.URL.Host = t.Scheme, t.Host
	return o.base.RoundTrip(r)
}

func parseOrigin(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return nil, errors.New("not an absolute http(s) origin")
	}
	if strings.TrimSuffix(u.Path, "/") != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.User != nil {
		return nil, errors.New("an origin has no path, query, fragment or user info")
	}
	return u, nil
}

// originKey is scheme://host:port with the default port filled in and the
// scheme and host lower-cased, for comparing origins (RFC 6454 §5).
func originKey(u *url.URL) string {
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + host + ":" + port
}
