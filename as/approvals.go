package as

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/as/loginui"
	"github.com/mcpauth/mcpauth/rsmiddleware"
	"github.com/mcpauth/mcpauth/storage"
)

// ApprovalsPath is the approvals endpoint, under the issuer's path: a
// resource server (a gateway) that holds a high-risk tool call registers
// it there for the person's approval and asks, at the retry, whether the
// person approved it. ApprovalPagePath followed by the approval's id is the
// page where the person decides (as/loginui).
const (
	ApprovalsPath    = "/approvals"
	ApprovalPagePath = loginui.ApprovalPath
)

// Limits of an approval request.
const (
	// MaxApprovalTTL caps the lifetime a resource server asks for.
	MaxApprovalTTL = time.Hour
	// DefaultApprovalTTL is the lifetime of an approval whose request
	// names none.
	DefaultApprovalTTL = 5 * time.Minute
	// maxToolName is the longest tool name accepted, in bytes.
	maxToolName = 128
	// maxApprovalDepth bounds the nesting of the request's JSON.
	maxApprovalDepth = 100
)

// Answers of the approvals endpoint (the "status" member).
const (
	approvalAnswerApproved = "approved"
	approvalAnswerPending  = "pending"
	approvalAnswerDenied   = "denied"
)

// approvalRequest is a parsed, checked request body of the approvals
// endpoint.
type approvalRequest struct {
	Token string
	Tool  string
	// Arguments are the canonical JSON (RFC 8785) of the call's arguments,
	// a JSON object; Digest is the lowercase hex SHA-256 of those bytes.
	Arguments []byte
	Digest    string
	TTL       time.Duration
	// ClientID and ClientSecret are client_secret_post credentials sent in
	// the body; nil when absent.
	ClientID, ClientSecret *string
}

// errApprovalRequest is an invalid_request answer of the approvals
// endpoint; its text is the error_description.
type errApprovalRequest string

func (e errApprovalRequest) Error() string { return string(e) }

// parseApprovalRequest reads the JSON body of an approvals request: an
// object (no member named twice, at any depth) with token, tool,
// arguments (an object; absent or null is the empty object, as MCP treats
// it) and ttl (a positive whole number of seconds, capped at
// MaxApprovalTTL; absent is DefaultApprovalTTL), and client_id and
// client_secret for client_secret_post. Other members are ignored. Every
// failure is an errApprovalRequest.
func parseApprovalRequest(body []byte) (*approvalRequest, error) {
	if err := checkJSONText(body); err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return nil, errApprovalRequest("The request body is not a JSON object.")
	}
	str := func(name string) (*string, error) {
		v, ok := raw[name]
		if !ok {
			return nil, nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return nil, errApprovalRequest(fmt.Sprintf("%s is not a string.", name))
		}
		return &s, nil
	}
	out := &approvalRequest{TTL: DefaultApprovalTTL}
	token, err := str("token")
	if err != nil {
		return nil, err
	}
	if token == nil || *token == "" {
		return nil, errApprovalRequest("The token member is missing or empty.")
	}
	out.Token = *token
	tool, err := str("tool")
	if err != nil {
		return nil, err
	}
	switch {
	case tool == nil || *tool == "":
		return nil, errApprovalRequest("The tool member is missing or empty.")
	case len(*tool) > maxToolName:
		return nil, errApprovalRequest(fmt.Sprintf("The tool name is longer than %d bytes.", maxToolName))
	case !printable(*tool):
		return nil, errApprovalRequest("The tool name has control characters or is not UTF-8.")
	}
	out.Tool = *tool
	args := bytes.TrimSpace(raw["arguments"])
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	if args[0] != '{' {
		return nil, errApprovalRequest("arguments is not a JSON object.")
	}
	if out.Arguments, err = rsmiddleware.CanonicalJSON(args); err != nil {
		return nil, errApprovalRequest("arguments cannot be canonicalised (RFC 8785): " + err.Error())
	}
	sum := sha256.Sum256(out.Arguments)
	out.Digest = hex.EncodeToString(sum[:])
	if v, ok := raw["ttl"]; ok {
		// A JSON number of digits only: no string, fraction or exponent.
		v = bytes.TrimSpace(v)
		if len(v) == 0 || len(v) > 18 || bytes.ContainsFunc(v, func(r rune) bool { return r < '0' || r > '9' }) {
			return nil, errApprovalRequest("ttl is not a positive integer.")
		}
		secs, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || secs <= 0 {
			return nil, errApprovalRequest("ttl is not a positive integer.")
		}
		out.TTL = MaxApprovalTTL
		if secs < int64(MaxApprovalTTL/time.Second) {
			out.TTL = time.Duration(secs) * time.Second
		}
	}
	if out.ClientID, err = str("client_id"); err != nil {
		return nil, err
	}
	if out.ClientSecret, err = str("client_secret"); err != nil {
		return nil, err
	}
	return out, nil
}

// checkJSONText reports an errApprovalRequest unless body is JSON text
// (json.Unmarshal then refuses more than one value) with no object member named twice (at any depth) and nesting of at most
// maxApprovalDepth. encoding/json keeps the last of repeated names, so
// two readers of one body could disagree about the arguments; such a body
// is refused instead.
func checkJSONText(body []byte) error {
	if !utf8.Valid(body) {
		return errApprovalRequest("The request body is not UTF-8.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		names  map[string]bool
		object bool
		key    bool // the next token of an object is a name
	}
	var stack []frame
	bad := errApprovalRequest("The request body is not valid JSON.")
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(stack) != 0 {
				return bad
			}
			return nil
		}
		if err != nil {
			return bad
		}
		if n := len(stack); n > 0 && stack[n-1].object {
			top := &stack[n-1]
			if top.key {
				if d, ok := tok.(json.Delim); ok && d == '}' {
					stack = stack[:n-1]
					continue
				}
				name, ok := tok.(string)
				if !ok {
					return bad
				}
				if top.names[name] {
					return errApprovalRequest(fmt.Sprintf("The member %q appears twice in one object.", name))
				}
				top.names[name] = true
				top.key = false
				continue
			}
			top.key = true
		}
		d, ok := tok.(json.Delim)
		if !ok {
			continue
		}
		switch d {
		case '{':
			if len(stack) >= maxApprovalDepth {
				return errApprovalRequest("The request body nests too deeply.")
			}
			stack = append(stack, frame{names: map[string]bool{}, object: true, key: true})
		case '[':
			if len(stack) >= maxApprovalDepth {
				return errApprovalRequest("The request body nests too deeply.")
			}
			stack = append(stack, frame{})
		case ']':
			stack = stack[:len(stack)-1]
		}
	}
}

// printable reports whether s is UTF-8 without control or format
// characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

// approvalAnswer is the body of a 200 answer.
type approvalAnswer struct {
	Status      string `json:"status"`
	ApprovalID  string `json:"approval_id"`
	ApprovalURI string `json:"approval_uri,omitempty"`
	ExpiresIn   int64  `json:"expires_in,omitempty"`
}

// serveApprovals is the approvals endpoint (docs/TOOLS.md, "Approval of
// high-risk calls"). A configured confidential client named in
// Resource.ApprovalClients of the token's resource sends the access token
// a held tools/call carried, the tool and the arguments. The person,
// client and resource come from the token, which must be active as at
// introspection (RFC 7662 §2.2: not expired, not revoked, its person
// still active). The answer is "approved" (an approval for exactly this
// call is used by this request), "denied" (reported once), or "pending"
// with the page where the person decides.
func (s *Server) serveApprovals(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeJSONError(w, http.StatusMethodNotAllowed, "invalid_request", "The approvals endpoint accepts POST only.")
		return
	}
	ctx := withRedemption(r.Context())
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeJSONError(w, http.StatusBadRequest, "invalid_request", "The request body must be application/json.")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeJSONError(w, http.StatusBadRequest, "invalid_request", "The request body is too large.")
			return
		}
		writeJSONError(w, http.StatusBadRequest, "invalid_request", "The request body could not be read.")
		return
	}
	req, err := parseApprovalRequest(body)
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	form := url.Values{}
	if req.ClientID != nil {
		form.Set("client_id", *req.ClientID)
	}
	if req.ClientSecret != nil {
		form.Set("client_secret", *req.ClientSecret)
	}
	r.PostForm = form // names the client of a failed authentication in the audit
	fc, err := s.clients.authenticate(ctx, r, form)
	if err == nil {
		if c := fc.(*client); c.public || c.source != "config" {
			err = fosite.ErrInvalidClient.WithHint("Only configured confidential clients may register tool calls for approval.")
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	caller := fc.(*client)
	if !s.approvesAny(caller.id) {
		// Checked before the token, so that no other client learns
		// whether a token is active.
		writeJSONError(w, http.StatusBadRequest, "unauthorized_client", "The client is not an approval client of any resource.")
		return
	}
	tok, err := s.approvalToken(ctx, req.Token)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if tok == nil {
		writeJSONError(w, http.StatusBadRequest, "invalid_token", "The access token is not active.")
		return
	}
	if !s.approves(caller.id, tok.Resource) {
		writeJSONError(w, http.StatusBadRequest, "unauthorized_client", "The client may not register tool calls for approval on the token's resource.")
		return
	}
	b := storage.ApprovalBinding{Subject: tok.Subject, ClientID: tok.ClientID, Resource: tok.Resource, Tool: req.Tool, ArgsDigest: req.Digest}
	now := s.now()
	audit := func(event, id string) {
		s.log.audit(ctx, event, "approval_id", id, "sub", b.Subject, "client_id", b.ClientID, "resource", b.Resource,
			"tool", b.Tool, "args_digest", b.ArgsDigest, "approval_client", caller.id)
	}
	used, err := s.cfg.Store.UseApproval(ctx, b, now)
	switch {
	case err == nil && used.Status == storage.ApprovalUsed:
		audit("approval.used", used.ID)
		writeApprovalAnswer(w, approvalAnswer{Status: approvalAnswerApproved, ApprovalID: used.ID})
		return
	case err == nil:
		writeApprovalAnswer(w, approvalAnswer{Status: approvalAnswerDenied, ApprovalID: used.ID})
		return
	case !errors.Is(err, storage.ErrNotFound):
		s.writeError(w, r, err)
		return
	}
	id, err := newApprovalID()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := s.cfg.Store.CreateApproval(ctx, &storage.Approval{
		ID: id, ApprovalBinding: b, Arguments: req.Arguments, Status: storage.ApprovalPending,
		CreatedAt: now, ExpiresAt: now.Add(req.TTL),
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if a.ID == id {
		audit("approval.requested", a.ID)
	}
	writeApprovalAnswer(w, approvalAnswer{
		Status: approvalAnswerPending, ApprovalID: a.ID, ApprovalURI: s.endpoint(ApprovalPagePath + a.ID),
		ExpiresIn: int64(math.Ceil(a.ExpiresAt.Sub(now).Seconds())),
	})
}

func writeApprovalAnswer(w http.ResponseWriter, a approvalAnswer) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(a)
}

// newApprovalID is 128 random bits, base64url.
func newApprovalID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// approvalTokenInfo is what an active access token says about the call it
// carried.
type approvalTokenInfo struct {
	Subject, ClientID, Resource string
}

// approvalToken checks an access token as introspection does (describe):
// stored, active, unexpired, the exact token of its record, with one
// audience and a person who is still active. It returns nil for a token
// that is not, and an error only for a storage outage.
func (s *Server) approvalToken(ctx context.Context, token string) (*approvalTokenInfo, error) {
	sig := s.tokens.AccessTokenSignature(ctx, token)
	if sig == "" {
		return nil, nil
	}
	t, sr, err := s.store.loadShared(ctx, storage.KindAccessToken, sig)
	if errors.Is(err, fosite.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !t.Active || !s.now().Before(t.ExpiresAt) || sr.Session == nil || sr.Session.Subject == "" {
		return nil, nil // a token of no person (client credentials) has nobody to ask
	}
	if sr.Session.TokenHash != "" && !tokenHashIs(token, sr.Session.TokenHash) {
		return nil, nil
	}
	if len(sr.GrantedAud) != 1 {
		return nil, nil
	}
	active, err := s.personActive(ctx, sr.Session.Subject, sr.Session.Federated != "")
	if err != nil || !active {
		return nil, err
	}
	return &approvalTokenInfo{Subject: sr.Session.Subject, ClientID: sr.ClientID, Resource: sr.GrantedAud[0]}, nil
}

// approvesAny reports whether clientID is one of the ApprovalClients of
// some resource.
func (s *Server) approvesAny(clientID string) bool {
	for _, r := range s.resources {
		if slices.Contains(r.approvers, clientID) {
			return true
		}
	}
	return false
}

// approves reports whether clientID is one of the ApprovalClients of the
// resource uri.
func (s *Server) approves(clientID, uri string) bool {
	for _, r := range s.resources {
		if r.URI == uri {
			return slices.Contains(r.approvers, clientID)
		}
	}
	return false
}

// displayNames names clients and resources on the pages (loginui.Names):
// a client's configured or registered name, a resource's configured name.
type displayNames struct{ s *Server }

func (n displayNames) ClientName(ctx context.Context, clientID string) string {
	c, err := n.s.clients.get(ctx, clientID)
	if err != nil {
		return ""
	}
	return c.name
}

func (n displayNames) ResourceName(uri string) string {
	for _, r := range n.s.resources {
		if r.URI == uri {
			return r.Name
		}
	}
	return ""
}
