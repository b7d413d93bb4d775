package as

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// marshalClaims is json.Marshal(c), byte for byte, without reflection for
// the claims every access token has: it appends the members in the order
// of accessClaims. Strings that encoding/json would escape (anything but
// printable ASCII other than '"', '\\', '<', '>', '&') and the act claim
// are encoded by encoding/json itself.
func marshalClaims(c *accessClaims) ([]byte, error) {
	if c.Act != nil || c.Email != "" || c.Groups != nil || c.Tenant != "" {
		return json.Marshal(c)
	}
	for _, s := range []string{c.Issuer, c.Subject, c.Audience, c.ClientID, c.Scope, c.ID} {
		if !plainJSON(s) {
			return json.Marshal(c)
		}
	}
	if c.Status != nil && !plainJSON(c.Status.StatusList.URI) || c.Cnf != nil && !plainJSON(c.Cnf.JKT) {
		return json.Marshal(c)
	}
	b := make([]byte, 0, 256+len(c.Issuer)+len(c.Subject)+len(c.Audience)+len(c.ClientID)+len(c.Scope)+len(c.ID)+statusLen(c))
	b = appendMember(b, `{"iss":`, c.Issuer)
	b = appendMember(b, `,"sub":`, c.Subject)
	b = appendMember(b, `,"aud":`, c.Audience)
	b = appendMember(b, `,"client_id":`, c.ClientID)
	if c.Scope != "" {
		b = appendMember(b, `,"scope":`, c.Scope)
	}
	b = append(b, `,"iat":`...)
	b = strconv.AppendInt(b, c.IssuedAt, 10)
	b = append(b, `,"exp":`...)
	b = strconv.AppendInt(b, c.ExpiresAt, 10)
	b = appendMember(b, `,"jti":`, c.ID)
	if c.Status != nil {
		b = append(b, `,"status":{"status_list":{"idx":`...)
		b = strconv.AppendInt(b, c.Status.StatusList.Idx, 10)
		b = appendMember(b, `,"uri":`, c.Status.StatusList.URI)
		b = append(b, "}}"...)
	}
	if c.Cnf != nil {
		b = appendMember(b, `,"cnf":{"jkt":`, c.Cnf.JKT)
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

func statusLen(c *accessClaims) int {
	if c.Status == nil {
		return 0
	}
	return len(c.Status.StatusList.URI)
}

func appendMember(b []byte, key, s string) []byte {
	b = append(b, key...)
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// plainJSON reports whether encoding/json writes s as itself between
// quotes: printable ASCII without '"', '\\' and the HTML characters it
// escapes.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
