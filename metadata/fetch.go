package metadata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"
)

// Limits applied by the fetch helpers.
const (
	// MaxDocumentBytes caps the size of a fetched metadata document.
	MaxDocumentBytes = 256 << 10
	// DefaultFetchTimeout bounds one fetch when ctx has no earlier deadline.
	DefaultFetchTimeout = 10 * time.Second
)

// Errors returned by the fetch helpers; compare with errors.Is.
var (
	// ErrNotFound: no discovery URL returned a document.
	ErrNotFound = errors.New("metadata: document not found")
	// ErrMismatch: the document names another issuer or resource than the
	// one its URL was built from (RFC 8414 §3.3, RFC 9728 §3.3).
	ErrMismatch = errors.New("metadata: identifier in document does not match")
	// ErrInvalidDocument: not JSON, too large, wrong content type, or a
	// required member missing.
	ErrInvalidDocument = errors.New("metadata: invalid document")
	// ErrNoClient: the client argument was nil. These helpers fetch from
	// URLs that may come from untrusted input (an issuer a token names, a
	// resource_metadata parameter), so the caller passes a client whose
	// policy fits: one that refuses loopback, private and other special-use
	// addresses for untrusted URLs. This package imports the standard
	// library only and has no such client to fall back to.
	ErrNoClient = errors.New("metadata: nil *http.Client: pass a client with an address policy")
)

// FetchAuthorizationServerMetadata fetches the metadata of issuer from the
// URLs of DiscoveryURLs, in order, and returns the first document found. Per
// RFC 8414 §3.3 the document's "issuer" must equal issuer byte for byte;
// otherwise ErrMismatch is returned and the document must not be used.
// A nil client is ErrNoClient, before any request. Redirects are not
// followed. The document's Content-Type, when present, must be
// application/json (RFC 8414 §3.2).
func FetchAuthorizationServerMetadata(ctx context.Context, client *http.Client, issuer string) (*AuthorizationServerMetadata, error) {
	if client == nil {
		return nil, ErrNoClient
	}
	urls, err := DiscoveryURLs(issuer)
	if err != nil {
		return nil, err
	}
	var lastErr error = ErrNotFound
	for _, u := range urls {
		var doc AuthorizationServerMetadata
		status, err := fetchJSON(ctx, client, u, &doc)
		if err != nil {
			if status == http.StatusNotFound || status == http.StatusMethodNotAllowed || status == http.StatusGone {
				continue // try the next form
			}
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return nil, err
			}
			lastErr = err
			continue
		}
		if doc.Issuer != issuer {
			return nil, fmt.Errorf("%w: fetched %q, document says issuer %q", ErrMismatch, u, doc.Issuer)
		}
		return &doc, nil
	}
	return nil, lastErr
}

// FetchProtectedResourceMetadata fetches the RFC 9728 document of resource
// from its path-inserted well-known URL (RFC 9728 §3.1). Per RFC 9728 §3.3 the
// document's "resource" must equal resource byte for byte, else ErrMismatch.
// As for FetchAuthorizationServerMetadata, a nil client is ErrNoClient and
// the Content-Type must be application/json (RFC 9728 §3.2).
func FetchProtectedResourceMetadata(ctx context.Context, client *http.Client, resource string) (*ProtectedResourceMetadata, error) {
	u, err := WellKnownURL(resource, SuffixProtectedResource)
	if err != nil {
		return nil, err
	}
	return FetchProtectedResourceMetadataFrom(ctx, client, u, resource)
}

// FetchProtectedResourceMetadataFrom fetches the RFC 9728 document from
// metadataURL (for example the resource_metadata parameter of a
// WWW-Authenticate challenge, RFC 9728 §5.1) and checks that its "resource"
// equals resource byte for byte.
func FetchProtectedResourceMetadataFrom(ctx context.Context, client *http.Client, metadataURL, resource string) (*ProtectedResourceMetadata, error) {
	var doc ProtectedResourceMetadata
	if _, err := fetchJSON(ctx, client, metadataURL, &doc); err != nil {
		return nil, err
	}
	if doc.Resource != resource {
		return nil, fmt.Errorf("%w: fetched %q, document says resource %q", ErrMismatch, metadataURL, doc.Resource)
	}
	return &doc, nil
}

// fetchJSON GETs u and decodes a JSON object into dst. The Content-Type,
// when present, must be application/json: the media type of both metadata
// documents (RFC 8414 §3.2, RFC 9728 §3.2). A JWK Set, which may come as
// application/jwk-set+json (RFC 7517 §8.5.1), is not fetched here. It
// returns the HTTP status (0 when no response arrived) with any error.
func fetchJSON(ctx context.Context, client *http.Client, u string, dst any) (int, error) {
	if client == nil {
		return 0, ErrNoClient
	}
	// An earlier deadline of ctx is kept: WithTimeout never extends one.
	ctx, cancel := context.WithTimeout(ctx, DefaultFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	// Never follow redirects: the document must come from the URL built from
	// the identifier.
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, fmt.Errorf("%w: GET %s: status %d", ErrNotFound, u, resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return resp.StatusCode, fmt.Errorf("%w: GET %s: content type %q", ErrInvalidDocument, u, ct)
		}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxDocumentBytes+1))
	if err != nil {
		return resp.StatusCode, err
	}
	if len(body) > MaxDocumentBytes {
		return resp.StatusCode, fmt.Errorf("%w: GET %s: larger than %d bytes", ErrInvalidDocument, u, MaxDocumentBytes)
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return resp.StatusCode, fmt.Errorf("%w: GET %s: %v", ErrInvalidDocument, u, err)
	}
	return resp.StatusCode, nil
}
