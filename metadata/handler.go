package metadata

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Handler returns an http.Handler serving doc (any JSON-marshalable metadata
// document) as application/json. The document is marshalled once, here.
//
// Metadata is public (RFC 8414 §3, RFC 9728 §3): GET and HEAD are answered
// with "Access-Control-Allow-Origin: *" so browser-based MCP clients can read
// it, OPTIONS answers a CORS preflight with 204, and any other method gets 405
// with an Allow header.
func Handler(doc any) (http.Handler, error) {
	body, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	body = append(body, '\n')
	length := strconv.Itoa(len(body))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			h.Set("Content-Type", "application/json")
			h.Set("Content-Length", length)
			h.Set("Cache-Control", "public, max-age=3600")
			h.Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusOK)
			if r.Method == http.MethodGet {
				_, _ = w.Write(body)
			}
		case http.MethodOptions:
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, MCP-Protocol-Version")
			h.Set("Access-Control-Max-Age", "86400")
			w.WriteHeader(http.StatusNoContent)
		default:
			h.Set("Allow", "GET, HEAD, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	}), nil
}
