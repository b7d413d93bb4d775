package upstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/upstream"
)

// TestCheckResponseIssuer: RFC 9207 §2.4. An iss parameter must be the
// issuer exactly; a response without one is refused only when discovery
// says the provider sends it.
func TestCheckResponseIssuer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		supported any // authorization_response_iss_parameter_supported; nil: absent
		iss       string
		want      error
	}{
		{name: "no iss from a provider that does not send it", supported: nil, iss: ""},
		{name: "no iss from a provider that says it does not send it", supported: false, iss: ""},
		{name: "no iss from a provider that says it sends it", supported: true, iss: "", want: upstream.ErrWrongIssuer},
		{name: "the issuer", supported: true, iss: "ISSUER"},
		{name: "the issuer from a provider that did not say", supported: nil, iss: "ISSUER"},
		{name: "another provider's issuer", supported: true, iss: "https://login.partner.example", want: upstream.ErrWrongIssuer},
		{name: "another issuer from a provider that did not say", supported: nil, iss: "https://login.partner.example", want: upstream.ErrWrongIssuer},
		{name: "the issuer with a trailing slash", supported: true, iss: "ISSUER/", want: upstream.ErrWrongIssuer},
		{name: "the issuer in capitals", supported: true, iss: "UPPER", want: upstream.ErrWrongIssuer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp := newFakeProvider(t)
			if tc.supported != nil {
				fp.set(func(fp *fakeProvider) { fp.meta["authorization_response_iss_parameter_supported"] = tc.supported })
			}
			iss := tc.iss
			switch {
			case strings.HasPrefix(iss, "ISSUER"):
				iss = fp.issuer + strings.TrimPrefix(iss, "ISSUER")
			case iss == "UPPER":
				iss = strings.ToUpper(fp.issuer)
			}
			err := fp.relyingParty(nil).CheckResponseIssuer(context.Background(), iss)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("CheckResponseIssuer(%q) = %v, want %v", iss, err, tc.want)
			}
		})
	}
	t.Run("no iss and the provider unreachable", func(t *testing.T) {
		fp := newFakeProvider(t)
		p := fp.relyingParty(nil)
		fp.srv.Close()
		if err := p.CheckResponseIssuer(context.Background(), ""); !errors.Is(err, upstream.ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
	})
}
