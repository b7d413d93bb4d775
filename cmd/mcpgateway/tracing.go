package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpauth/mcpauth/internal/tracing"
)

// metaCarrier returns the trace context fields of a JSON-RPC request that
// MCP carries in params._meta (traceparent, tracestate), for a POST to the
// MCP endpoint path of at most limit bytes without a traceparent header.
// The body is read within timeout (as the endpoint reads it) and put back
// to be read again, its read error included.
func metaCarrier(path string, limit int64, timeout time.Duration) func(w http.ResponseWriter, r *http.Request) propagation.TextMapCarrier {
	return func(w http.ResponseWriter, r *http.Request) propagation.TextMapCarrier {
		if r.Method != http.MethodPost || r.URL.Path != path || r.ContentLength <= 0 || r.ContentLength > limit {
			return nil
		}
		orig := r.Body
		// The declared length in one buffer (net/http's reader ends the
		// body there).
		b := make([]byte, r.ContentLength)
		n, err := io.ReadFull(bodyDeadline(w, r, timeout), b)
		b = b[:n] // a short body's error is the endpoint's to answer
		r.Body = &replayBody{Reader: bytes.NewReader(b), err: err, closer: orig}
		if err != nil {
			return nil
		}
		return readMeta(b)
	}
}

// replayBody reads the bytes read ahead, then the error that ended them.
type replayBody struct {
	*bytes.Reader
	err    error
	closer io.Closer
}

func (b *replayBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err == io.EOF && b.err != nil {
		return n, b.err
	}
	return n, err
}

func (b *replayBody) Close() error { return b.closer.Close() }

// readMeta returns the string traceparent and tracestate members of
// params._meta of the single JSON-RPC message body, or nil.
func readMeta(body []byte) propagation.TextMapCarrier {
	var m struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	// Most bodies carry none: they are not parsed.
	if len(body) == 0 || body[0] != '{' || !bytes.Contains(body, []byte(`"traceparent"`)) || json.Unmarshal(body, &m) != nil {
		return nil
	}
	c := propagation.MapCarrier{}
	for _, k := range [...]string{"traceparent", "tracestate"} {
		var v string
		if raw, ok := m.Params.Meta[k]; ok && json.Unmarshal(raw, &v) == nil {
			c[k] = v
		}
	}
	if c["traceparent"] == "" {
		return nil
	}
	return c
}

// injectMeta returns body, a single JSON-RPC request or notification, with
// the trace context of ctx in params._meta.traceparent and tracestate (the
// fields MCP defines for it), and true; body and false when it is no such
// message or ctx has no sampled span (the traceparent header carries an
// unsampled one, and the body is not rewritten for it). Other members keep
// their values byte for byte (their order and white space may change).
func injectMeta(ctx context.Context, body []byte) ([]byte, bool) {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return body, false
	}
	fields := propagation.MapCarrier{}
	tracing.Propagator.Inject(ctx, fields)
	if fields["traceparent"] == "" || len(body) == 0 || body[0] != '{' {
		return body, false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || top["method"] == nil {
		return body, false
	}
	params := map[string]json.RawMessage{}
	if raw, ok := top["params"]; ok && json.Unmarshal(raw, &params) != nil {
		return body, false // params is an array, or null
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := params["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return body, false
	}
	delete(meta, "tracestate")
	for k, v := range fields {
		meta[k], _ = marshal(v)
	}
	var err error
	if params["_meta"], err = marshal(meta); err != nil {
		return body, false
	}
	if top["params"], err = marshal(params); err != nil {
		return body, false
	}
	out, err := marshal(top)
	if err != nil {
		return body, false
	}
	return out, true
}

// marshal is json.Marshal without the escapes of <, > and & (the client's
// strings go on as it wrote them).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
