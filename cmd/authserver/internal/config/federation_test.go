package config

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

const federation = `
client_assertions:
  accept_token_endpoint_audience: true
enterprise:
  idps:
    - issuer: https://idp.example.com
      jwks: {"keys": [{"kty": "EC", "crv": "P-256", "kid": "idp-1", "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}
      clients: [ci-bot]
      link_by_email: true
workload:
  issuers:
    - issuer: https://kubernetes.example.com
      rules:
        - subject: "system:serviceaccount:prod:*"
          claims:
            ns: prod
          client_id: k8s-prod
          resources: [https://MCP.example.com/mcp]
          scopes: [mcp:tools]
    - issuer: spiffe://example.org
      jwks:
        keys:
          - kty: EC
            crv: P-256
            kid: sp-1
            x: f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU
            y: x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0
      rules:
        - subject: spiffe://example.org/ns/prod/sa/api
          client_id: spiffe-api
          resources: [https://other.example.com/api]
          scopes: [read]
`

// fedBase is base with ci-bot, the IdP's client, allowed the jwt-bearer grant.
var fedBase = strings.Replace(base, "    grant_types: [client_credentials]\n", "    grant_types: [client_credentials, "+GrantJWTBearer+"]\n", 1)

func TestParseFederation(t *testing.T) {
	c, err := Parse([]byte(fedBase+federation), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !c.ClientAssertions.AcceptTokenEndpointAudience {
		t.Error("client_assertions.accept_token_endpoint_audience not read")
	}
	d := c.Enterprise.IdPs[0]
	if d.Issuer != "https://idp.example.com" || !d.LinkByEmail || d.Clients[0] != "ci-bot" {
		t.Errorf("idp %+v", d)
	}
	// The JWK Set, written in JSON flow style or as YAML, is a JWK Set again.
	for _, set := range []JWKS{d.JWKS, c.Workload.Issuers[1].JWKS} {
		b, err := json.Marshal(set)
		if err != nil || !strings.Contains(string(b), `"kty":"EC"`) || !strings.Contains(string(b), `"keys":[`) {
			t.Errorf("jwks %s %v", b, err)
		}
	}
	r := c.Workload.Issuers[0].Rules[0]
	if r.Subject != "system:serviceaccount:prod:*" || r.Claims["ns"] != "prod" || r.ClientID != "k8s-prod" ||
		r.Resources[0] != "https://mcp.example.com/mcp" {
		t.Errorf("rule %+v (resources canonicalised?)", r)
	}
}

func TestParseRejectsBadFederation(t *testing.T) {
	cases := []struct{ name, edit, want string }{
		{"an http IdP", strings.Replace(federation, "issuer: https://idp.example.com", "issuer: http://idp.example.com", 1), "config: enterprise.idps[0].issuer: must be an https URL"},
		{"an IdP without keys", strings.Replace(federation, "      jwks: {\"keys\"", "      x_jwks: {\"keys\"", 1), "config: enterprise.idps[0].x_jwks: unknown key"},
		{"an IdP client that is not configured", strings.Replace(federation, "clients: [ci-bot]", "clients: [nobody]", 1), "config: enterprise.idps[0].clients[0]: \"nobody\" is not a configured confidential client"},
		{"a public IdP client", strings.Replace(federation, "clients: [ci-bot]", "clients: [demo-app]", 1), "config: enterprise.idps[0].clients[0]: \"demo-app\" is not a configured confidential client"},
		{"jwks that is not a mapping", strings.Replace(federation, "      jwks: {\"keys\"", "      jwks: \"x\"\n      x: {\"keys\"", 1), "config: enterprise.idps[0].jwks: expected a mapping"},
		{"an http jwks_uri", strings.Replace(federation, "    - issuer: https://kubernetes.example.com\n", "    - issuer: https://kubernetes.example.com\n      jwks_uri: http://k8s/jwks\n", 1), "config: workload.issuers[0].jwks_uri: must be an https URL"},
		{"a spiffe issuer without jwks", strings.Replace(federation, "    - issuer: https://kubernetes.example.com", "    - issuer: spiffe://k8s", 1), "config: workload.issuers[0].issuer: must be an https URL unless jwks is given"},
		{"a rule client_id of a configured client", strings.Replace(federation, "client_id: k8s-prod", "client_id: ci-bot", 1), "config: workload.issuers[0].rules[0].client_id: \"ci-bot\" is a configured client"},
		{"a rule resource not configured", strings.Replace(federation, "resources: [https://MCP.example.com/mcp]", "resources: [https://nope.example.com]", 1), "config: workload.issuers[0].rules[0].resources[0]:"},
		{"a rule scope of another resource", strings.Replace(federation, "scopes: [mcp:tools]", "scopes: [read]", 1), "config: workload.issuers[0].rules[0].scopes[0]: scope \"read\""},
		{"a rule without subject", strings.Replace(federation, "        - subject: \"system:serviceaccount:prod:*\"\n          claims", "        - claims", 1), "config: workload.issuers[0].rules[0].subject: required"},
		{"a claim value that is a list", strings.Replace(federation, "ns: prod", "ns: [prod]", 1), "config: workload.issuers[0].rules[0].claims.ns: expected a string"},
		{"an issuer listed twice", strings.Replace(federation, "issuer: spiffe://example.org", "issuer: https://kubernetes.example.com", 1), "config: workload.issuers[1].issuer: \"https://kubernetes.example.com\" is listed twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(fedBase+tc.edit), envOf(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v; want %q", err, tc.want)
			}
		})
	}
}

func TestParseClientKeys(t *testing.T) {
	jwks := `{"keys": [{"kty": "EC", "crv": "P-256", "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`
	keyed := strings.Replace(base, "    secret: 0123456789abcdef0123\n", "    jwks: "+jwks+"\n", 1)
	c, err := Parse([]byte(keyed), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(c.Clients[0].JWKS); !strings.Contains(string(b), `"crv":"P-256"`) {
		t.Errorf("jwks %s", b)
	}
	cases := []struct{ name, config, want string }{
		{"a secret and keys", strings.Replace(base, "    secret: 0123456789abcdef0123\n", "    secret: 0123456789abcdef0123\n    jwks: "+jwks+"\n", 1), "config: clients[0].jwks: a client authenticates with a secret or with keys"},
		{"jwks and jwks_uri", strings.Replace(keyed, "    jwks: ", "    jwks_uri: https://ci.example/jwks\n    jwks: ", 1), "config: clients[0].jwks: set jwks or jwks_uri, not both"},
		{"an http jwks_uri", strings.Replace(base, "    secret: 0123456789abcdef0123\n", "    jwks_uri: http://ci.example/jwks\n", 1), "config: clients[0].jwks_uri: must be an https URL"},
		{"keys on a public client", strings.Replace(base, "    public: true\n", "    public: true\n    jwks: "+jwks+"\n", 1), "config: clients[1].jwks: a public client has no keys"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse([]byte(tc.config), envOf(nil)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v; want %q", err, tc.want)
			}
		})
	}
}

// Fails if a public client may list the jwt-bearer grant.
func TestParseJWTBearerGrantNeedsAConfidentialClient(t *testing.T) {
	text := strings.Replace(base, "    public: true\n", "    public: true\n    grant_types: [authorization_code, "+GrantJWTBearer+"]\n", 1)
	_, err := Parse([]byte(text), envOf(nil))
	if want := "config: clients[1].grant_types[1]: a public client cannot use " + GrantJWTBearer; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err %v; want %q", err, want)
	}
}

// A client named by an enterprise IdP is given the jwt-bearer grant, so a
// configuration that lists it only under enterprise.idps still starts and
// its ID-JAGs are redeemed; other clients do not get the grant.
func TestIdPClientsAreGivenTheJWTBearerGrant(t *testing.T) {
	c, err := Parse([]byte(base+federation), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range c.Clients {
		has := slices.Contains(cl.GrantTypes, GrantJWTBearer)
		if want := cl.ID == "ci-bot"; has != want {
			t.Errorf("client %s grant_types %v: jwt-bearer listed %t, want %t", cl.ID, cl.GrantTypes, has, want)
		}
		if cl.ID == "ci-bot" && !slices.Contains(cl.GrantTypes, "client_credentials") {
			t.Errorf("ci-bot lost its configured grant: %v", cl.GrantTypes)
		}
	}
	// Listed already: not listed twice.
	c, err = Parse([]byte(fedBase+federation), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range c.Clients {
		n := 0
		for _, g := range cl.GrantTypes {
			if g == GrantJWTBearer {
				n++
			}
		}
		if n > 1 {
			t.Errorf("client %s lists jwt-bearer %d times", cl.ID, n)
		}
	}
}
