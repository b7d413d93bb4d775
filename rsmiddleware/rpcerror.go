package rsmiddleware

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
)

// rpcErrorBody is one JSON-RPC 2.0 error Response object (§5, §5.1); id is
// the JSON text of the id it answers, "null" when that cannot be read.
func rpcErrorBody(id string, code int, msg string) []byte {
	body, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: json.RawMessage(id), Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	return body
}

// writeRPCError answers status with one JSON-RPC error Response object.
func writeRPCError(w http.ResponseWriter, status int, id string, code int, msg string) {
	writeRPCAnswer(w, status, rpcErrorBody(id, code, msg))
}

// writeRPCAnswer answers status with the JSON body, a line.
func writeRPCAnswer(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// answerID is the id an error answer to the JSON-RPC message msg carries
// (JSON-RPC 2.0 §5: the request's id; null when it cannot be read): the
// value of the one "id" member of a request (a message with a method),
// when it is a string, a number or null that has a canonical form
// (idKey). A response of the client answers a request of the server: its
// id is not the client's to match, and its error answer has id null.
// expected reports whether msg is a request with an id, which a Response
// answers (§4.1: a notification has no id and gets none).
func answerID(msg []byte) (id string, expected bool) {
	var raw []byte
	ids, hasMethod := 0, false
	if objectFields(msg, func(key, val []byte) error {
		switch string(key) {
		case "id":
			ids++
			raw = val
		case "method":
			hasMethod = true
		}
		return nil
	}) != nil || !hasMethod {
		return "null", false
	}
	if ids != 1 || !isIDValue(raw) {
		return "null", ids > 0
	}
	if _, err := idKey(raw); err != nil {
		// A number beyond float64 (1e400): no id a client could match.
		return "null", true
	}
	return string(raw), true
}

// errorAnswer is the JSON-RPC 2.0 error answer to a refused request body.
//
// A body that is not JSON is answered -32700 with id null, one that is an
// empty batch or neither an object nor an array -32600 with id null (§5.1,
// §6). A single message is answered by one Response object with its id
// (answerID): the error of its own form when it has one (peekJSONRPC),
// code and text otherwise. A batch (§6) is answered by an array of
// Response objects: one for each message refused for its form, with that
// message's error, and one for each other request with an id, with code
// and text; notifications and responses of the client get none, unless
// no message gets one, when one Response object with id null answers the
// whole. A batch of more than MaxBatchRequests messages is answered by one
// -32600 Response object with id null, as MCPFilter refuses it: an answer
// per message would be dozens of times the size of a batch of small ones. A code of zero refuses a body for its form alone: a batch's
// requests whose form is right are answered -32600 for the messages
// beside them.
//
// The body must be at most the size the caller accepts: the answer is a
// bounded multiple of it.
func errorAnswer(body []byte, code int, text string) []byte {
	b := trimJSONSpace(body)
	_, err := peekJSONRPC(b)
	var im *invalidMessage
	if !errors.As(err, &im) {
		im = nil
	}
	if im == errParse || im == errNoMessage || im == errEmptyBatch {
		return rpcErrorBody("null", im.code, im.text)
	}
	if b[0] == '{' {
		switch {
		case im != nil:
			code, text = im.code, im.text
		case code == 0:
			code, text = codeInvalidRequest, "Invalid Request"
		}
		id, _ := answerID(b)
		return rpcErrorBody(id, code, text)
	}
	if code == 0 {
		code, text = codeInvalidRequest, "Invalid Request: another message of the batch is refused"
	}
	if n := 0; forEachMessage(b, func([]byte) error {
		if n++; n > MaxBatchRequests {
			return errBatchTooLong
		}
		return nil
	}) != nil {
		return rpcErrorBody("null", codeInvalidRequest, batchTooLongText)
	}
	out := []byte{'['}
	n := 0
	_ = forEachMessage(b, func(m []byte) error {
		c, t := code, text
		id, expected := answerID(m)
		if _, err := peekMessage(m); errors.As(err, &im) {
			c, t = im.code, im.text
		} else if !expected {
			// A notification or a response: no answer (§6).
			return nil
		}
		if n++; n > 1 {
			out = append(out, ',')
		}
		out = append(out, rpcErrorBody(id, c, t)...)
		return nil
	})
	if n == 0 {
		return rpcErrorBody("null", code, text)
	}
	return append(out, ']')
}
