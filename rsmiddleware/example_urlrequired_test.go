package rsmiddleware_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// Asking the person to open a page before a tools/call can run. Inside
// MCPFilter, the answer is a -32042 URL elicitation error for a client that
// declared URL-mode elicitation, and a tool result with isError and the URL
// in its text for one that did not.
func ExampleWriteURLRequired() {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &req)
		rsmiddleware.WriteURLRequired(w, r, req.Method, req.ID, rsmiddleware.URLRequired{
			URL:           "https://as.example.com/approve/q3Yx",
			ElicitationID: "q3Yx",
			Message:       "Approve sending this email.",
		})
	})
	h := rsmiddleware.NewMCPFilter(rsmiddleware.MCPFilterConfig{}).Wrap(handler)
	p := &rsmiddleware.Principal{Subject: "alice", ClientID: "app"}

	for _, meta := range []string{
		`{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}`,
		`{}`,
	} {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send_email","arguments":{},"_meta":` + meta + `}}`
		req := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
		req = req.WithContext(rsmiddleware.ContextWithPrincipal(context.Background(), p, ""))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out bytes.Buffer
		_ = json.Indent(&out, bytes.TrimSpace(rec.Body.Bytes()), "", "  ")
		fmt.Println(out.String())
	}
	// Output:
	// {
	//   "jsonrpc": "2.0",
	//   "id": 1,
	//   "error": {
	//     "code": -32042,
	//     "message": "Approve sending this email.",
	//     "data": {
	//       "elicitations": [
	//         {
	//           "mode": "url",
	//           "elicitationId": "q3Yx",
	//           "url": "https://as.example.com/approve/q3Yx",
	//           "message": "Approve sending this email."
	//         }
	//       ]
	//     }
	//   }
	// }
	// {
	//   "jsonrpc": "2.0",
	//   "id": 1,
	//   "result": {
	//     "content": [
	//       {
	//         "type": "text",
	//         "text": "Approve sending this email. Open https://as.example.com/approve/q3Yx and then try again."
	//       }
	//     ],
	//     "isError": true
	//   }
	// }
}

// Holding the calls of dangerous tools until a person approves each on the
// authorization server's page. The AS lists the client "gateway" in
// approval_clients of this server's resource; calls of delete_* and
// send_email then reach the handler only once approved, with exactly the
// arguments the person saw.
func ExampleNewApproval() {
	approval, err := rsmiddleware.NewApproval(rsmiddleware.ApprovalConfig{
		Tools:        []string{"delete_*", "send_email"},
		TTL:          5 * time.Minute,
		Endpoint:     "https://auth.example.com/approvals",
		ClientID:     "gateway",
		ClientSecret: os.Getenv("GATEWAY_SECRET"),
	})
	if err != nil {
		log.Fatal(err)
	}
	filter := rsmiddleware.NewMCPFilter(rsmiddleware.MCPFilterConfig{Approval: approval})
	var mcpServer http.Handler      // the MCP server's Streamable HTTP handler
	var mw *rsmiddleware.Middleware // NewMiddleware: verifies the token, puts the principal in the context
	http.Handle("/mcp", mw.Wrap(filter.Wrap(mcpServer)))
	fmt.Println(approval.Requires("delete_repo"), approval.Requires("echo"))
}
