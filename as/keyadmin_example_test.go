package as_test

import (
	"context"
	"fmt"
	"time"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// The operations behind `authserver keys`: list the stored keys, retire the
// one that signs (a new one takes over), prune what has expired.
func ExampleListKeys() {
	ctx := context.Background()
	store := memory.New()
	secret := []byte("0123456789abcdef0123456789abcdef-example")
	first, _ := as.RotateKey(ctx, store, secret, "ES256")

	second, _ := as.RetireKey(ctx, store, secret, first, "EdDSA")
	keys, _ := as.ListKeys(ctx, store, secret)
	for _, k := range keys {
		fmt.Println(k.Algorithm, "signing:", k.Signing, "retired:", k.RetiredAt != nil, "loadable:", k.Loadable, "new:", k.ID == second)
	}
	// With a retention of zero, the retired key is past it.
	deleted, _ := as.PruneKeys(ctx, store, secret, -time.Second, false)
	fmt.Println("pruned the first key:", len(deleted) == 1 && deleted[0] == first)

	// A secret that opens none of the keys is refused, never pruning them.
	_, err := as.PruneKeys(ctx, store, []byte("another-secret-another-secret-01234"), time.Hour, true)
	fmt.Println(err != nil)
	// Output:
	// EdDSA signing: true retired: false loadable: true new: true
	// ES256 signing: false retired: true loadable: true new: false
	// pruned the first key: true
	// true
}
