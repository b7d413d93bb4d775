package as

import (
	"context"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// TestVerifyJWSSkipsKeysOfAnotherAlgOrUse: keys of the kid that name
// another algorithm or an encryption use are passed over, and the next
// one is tried. Fails if the first such key ends the search.
func TestVerifyJWSSkipsKeysOfAnotherAlgOrUse(t *testing.T) {
	right, other := newIdPKey(t, "k1"), newIdPKey(t, "k1")
	wrongAlg := other.public()
	wrongAlg.Algorithm = "ES384"
	encKey := other.public()
	encKey.Use = "enc"
	jws := right.mint(t, "", map[string]any{"iss": "https://idp.example"})
	for name, keys := range map[string][]jose.JSONWebKey{
		"another alg first": {wrongAlg, right.public()},
		"an enc key first":  {encKey, right.public()},
	} {
		k := &issuerKeys{issuer: "https://idp.example", static: &jose.JSONWebKeySet{Keys: keys}}
		if _, _, err := k.verifyJWS(context.Background(), jws); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
