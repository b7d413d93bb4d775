package as

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// FuzzParseApprovalRequest throws arbitrary bodies at the approvals
// endpoint's parser: it never panics, fails only with an invalid_request
// text, and what it accepts holds: a tool of 1 to 128 bytes of printable
// UTF-8, a positive ttl within the cap, arguments that are a canonical
// JSON object (canonicalising them again changes nothing) whose digest is
// the one rsmiddleware records, and a body without repeated member names.
func FuzzParseApprovalRequest(f *testing.F) {
	f.Add([]byte(`{"token":"t","tool":"send_email","arguments":{"to":"bob","n":1.50},"ttl":300}`))
	f.Add([]byte(`{"token":"t","tool":"x","arguments":null}`))
	f.Add([]byte(`{"token":"t","tool":"x","arguments":{"a":{"a":1,"a":2}}}`))
	f.Add([]byte(`{"token":"t","tool":"x","arguments":{"\u0000":"\u202e<script>"},"ttl":99999999999}`))
	f.Add([]byte(`{"token":"t","tool":"x","ttl":"300"}`))
	f.Add([]byte(`{"token":"t","tool":"x"} {}`))
	f.Add([]byte(`[{"token":"t"}]`))
	f.Add([]byte(`{"token":"t","tool":"x","arguments":{"n":1e400}}`))
	f.Add([]byte(`{"client_id":"gw","client_secret":null,"token":"t","tool":"x"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parseApprovalRequest(body)
		if err != nil {
			var e errApprovalRequest
			if !errors.As(err, &e) || e == "" {
				t.Fatalf("error %v is not an invalid_request text", err)
			}
			return
		}
		if len(req.Tool) == 0 || len(req.Tool) > maxToolName || !utf8.ValidString(req.Tool) || !printable(req.Tool) {
			t.Fatalf("accepted tool %q", req.Tool)
		}
		if req.Token == "" || req.TTL <= 0 || req.TTL > MaxApprovalTTL {
			t.Fatalf("accepted token %q ttl %s", req.Token, req.TTL)
		}
		if len(req.Arguments) == 0 || req.Arguments[0] != '{' {
			t.Fatalf("arguments %q are not an object", req.Arguments)
		}
		again, err := rsmiddleware.CanonicalJSON(req.Arguments)
		if err != nil || !bytes.Equal(again, req.Arguments) {
			t.Fatalf("arguments %q are not canonical: %q %v", req.Arguments, again, err)
		}
		sum := sha256.Sum256(req.Arguments)
		if req.Digest != hex.EncodeToString(sum[:]) {
			t.Fatalf("digest %s", req.Digest)
		}
		if d, err := rsmiddleware.ArgumentsDigest(json.RawMessage(req.Arguments)); err != nil || d != req.Digest {
			t.Fatalf("rsmiddleware digests the arguments as %s (%v), the AS as %s", d, err, req.Digest)
		}
		if !json.Valid(body) {
			t.Fatalf("accepted a body that is not JSON: %q", body)
		}
	})
}
