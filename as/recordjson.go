package as

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/ory/fosite"
)

// marshal is json.Marshal(sr), byte for byte, without reflection: it
// appends the members in the order of storedRequest and session, the map
// members (the form, the expiry of each token kind) in sorted key order as
// encoding/json writes them. A record with an act claim, a string that
// encoding/json would escape or a time it would refuse is encoded by
// encoding/json itself.
func (sr *storedRequest) marshal() ([]byte, error) {
	if !sr.plain() {
		return json.Marshal(sr)
	}
	b := make([]byte, 0, 160+sr.size())
	b = appendMember(b, `{"id":`, sr.ID)
	b = append(b, `,"at":"`...)
	b, _ = sr.RequestedAt.AppendText(b)
	b = append(b, `","cid":`...)
	b = appendJSONString(b, sr.ClientID)
	b = appendStrings(b, `,"rs":`, sr.RequestedScope)
	b = appendStrings(b, `,"gs":`, sr.GrantedScope)
	b = appendStrings(b, `,"ra":`, sr.RequestedAud)
	b = appendStrings(b, `,"ga":`, sr.GrantedAud)
	if len(sr.Form) > 0 {
		b = append(b, `,"f":{`...)
		var buf [8]string
		for i, k := range sortedKeys(buf[:0], sr.Form) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendStringArray(b, sr.Form[k])
		}
		b = append(b, '}')
	}
	b = append(b, `,"s":`...)
	if s := sr.Session; s == nil {
		b = append(b, "null"...)
	} else {
		b = s.appendJSON(b)
	}
	if sr.AccessSignature != "" {
		b = appendMember(b, `,"as":`, sr.AccessSignature)
	}
	if sr.PKCE != nil {
		b = appendMember(b, `,"pk":{"c":`, sr.PKCE.Challenge)
		b = appendMember(b, `,"m":`, sr.PKCE.Method)
		b = append(b, '}')
	}
	if sr.Parent != "" {
		b = appendMember(b, `,"pr":`, sr.Parent)
	}
	return append(b, '}'), nil
}

// appendJSON appends the members of s that encoding/json writes, in the
// order of session; the caller has checked that s is plain.
func (s *session) appendJSON(b []byte) []byte {
	b = append(b, '{')
	first := true
	sep := func(b []byte, key string) []byte {
		if !first {
			b = append(b, ',')
		}
		first = false
		return append(b, key...)
	}
	if s.Subject != "" {
		b = appendJSONString(sep(b, `"sub":`), s.Subject)
	}
	if len(s.ExpiresAt) > 0 {
		b = append(sep(b, `"exp":`), '{')
		var buf [4]fosite.TokenType
		for i, k := range sortedKeys(buf[:0], s.ExpiresAt) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, string(k))
			b = append(b, `:"`...)
			b, _ = s.ExpiresAt[k].AppendText(b)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	if !s.GrantedAt.IsZero() {
		b = append(sep(b, `"gat":`), '"')
		b, _ = s.GrantedAt.AppendText(b)
		b = append(b, '"')
	}
	if len(s.Scopes) > 0 {
		b = appendStringArray(sep(b, `"gsc":`), s.Scopes)
	}
	if s.TokenHash != "" {
		b = appendJSONString(sep(b, `"th":`), s.TokenHash)
	}
	if s.StatusIdx != 0 {
		b = strconv.AppendInt(sep(b, `"si":`), s.StatusIdx, 10)
	}
	for _, m := range [...]struct{ key, v string }{
		{`"jkt":`, s.CnfJKT}, {`"rjkt":`, s.RefreshJKT}, {`"ajkt":`, s.AuthorizeJKT}, {`"fed":`, s.Federated},
	} {
		if m.v != "" {
			b = appendJSONString(sep(b, m.key), m.v)
		}
	}
	return append(b, '}')
}

// plain reports whether marshal may encode sr itself: no act claim, every
// string written as itself between quotes (plainJSON) and every time one
// that encoding/json accepts.
func (sr *storedRequest) plain() bool {
	for _, s := range [...]string{sr.ID, sr.ClientID, sr.AccessSignature, sr.Parent} {
		if !plainJSON(s) {
			return false
		}
	}
	if !plainTime(sr.RequestedAt) {
		return false
	}
	for _, l := range [...][]string{sr.RequestedScope, sr.GrantedScope, sr.RequestedAud, sr.GrantedAud} {
		if !plainStrings(l) {
			return false
		}
	}
	for k, v := range sr.Form {
		if !plainJSON(k) || !plainStrings(v) {
			return false
		}
	}
	if p := sr.PKCE; p != nil && (!plainJSON(p.Challenge) || !plainJSON(p.Method)) {
		return false
	}
	s := sr.Session
	if s == nil {
		return true
	}
	if s.Act != nil || !plainStrings(s.Scopes) || !s.GrantedAt.IsZero() && !plainTime(s.GrantedAt) {
		return false
	}
	for k, t := range s.ExpiresAt {
		if !plainJSON(string(k)) || !plainTime(t) {
			return false
		}
	}
	for _, v := range [...]string{s.Subject, s.TokenHash, s.CnfJKT, s.RefreshJKT, s.AuthorizeJKT, s.Federated} {
		if !plainJSON(v) {
			return false
		}
	}
	return true
}

// size is the length of the strings of sr, to size marshal's buffer.
func (sr *storedRequest) size() int {
	n := len(sr.ID) + len(sr.ClientID) + len(sr.AccessSignature) + len(sr.Parent)
	for _, l := range [...][]string{sr.RequestedScope, sr.GrantedScope, sr.RequestedAud, sr.GrantedAud} {
		for _, v := range l {
			n += len(v) + 3
		}
	}
	for k, v := range sr.Form {
		n += len(k) + 4
		for _, s := range v {
			n += len(s) + 3
		}
	}
	if s := sr.Session; s != nil {
		n += len(s.Subject) + len(s.TokenHash) + len(s.CnfJKT) + len(s.RefreshJKT) + len(s.AuthorizeJKT) + len(s.Federated) + 48*len(s.ExpiresAt)
		for _, v := range s.Scopes {
			n += len(v) + 3
		}
	}
	return n
}

// plainTime reports whether encoding/json encodes t (Time.MarshalJSON)
// without an error: a year of four digits and a zone offset under 24 hours.
func plainTime(t time.Time) bool {
	var buf [40]byte
	_, err := t.AppendText(buf[:0])
	return err == nil
}

func plainStrings(l []string) bool {
	for _, s := range l {
		if !plainJSON(s) {
			return false
		}
	}
	return true
}

// appendJSONString appends s, which plainJSON accepts, as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendStrings appends key and the array l unless l is empty (omitempty).
func appendStrings(b []byte, key string, l []string) []byte {
	if len(l) == 0 {
		return b
	}
	return appendStringArray(append(b, key...), l)
}

// appendStringArray appends l as encoding/json writes a []string: null
// for nil.
func appendStringArray(b []byte, l []string) []byte {
	if l == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range l {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// sortedKeys appends the keys of m to keys in the order encoding/json
// writes them.
func sortedKeys[K ~string, V any](keys []K, m map[K]V) []K {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// writeAccessResponse is fosite's WriteAccessResponse (RFC 6749 §5.1: the
// token response, no-store and no-cache) with the members encoded by
// marshalTokenResponse, byte for byte what json.Marshal writes.
func writeAccessResponse(w http.ResponseWriter, resp fosite.AccessResponder) {
	h := w.Header()
	// fosite sets both whole; one that already holds just that value
	// (noStore sets Cache-Control) is left as it is, without allocating.
	if v := h["Cache-Control"]; len(v) != 1 || v[0] != "no-store" {
		h.Set("Cache-Control", "no-store")
	}
	if v := h["Pragma"]; len(v) != 1 || v[0] != "no-cache" {
		h.Set("Pragma", "no-cache")
	}
	js, err := marshalTokenResponse(resp.ToMap())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h.Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(js)
}

// marshalTokenResponse is json.Marshal(m) without reflection when every
// key and string value is plain (plainJSON) and every value a string or
// an integer, as in every token response this server writes; anything
// else is encoded by encoding/json.
func marshalTokenResponse(m map[string]any) ([]byte, error) {
	n := 2
	for k, v := range m {
		if !plainJSON(k) {
			return json.Marshal(m)
		}
		switch v := v.(type) {
		case string:
			if !plainJSON(v) {
				return json.Marshal(m)
			}
			n += len(k) + len(v) + 6
		case int64, int:
			n += len(k) + 24
		default:
			return json.Marshal(m)
		}
	}
	var buf [16]string
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, k := range sortedKeys(buf[:0], m) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		switch v := m[k].(type) {
		case string:
			b = appendJSONString(b, v)
		case int64:
			b = strconv.AppendInt(b, v, 10)
		case int:
			b = strconv.AppendInt(b, int64(v), 10)
		}
	}
	return append(b, '}'), nil
}
