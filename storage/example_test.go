package storage_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// Backends report conditions with the package's sentinel errors, which
// callers compare with errors.Is (backends may wrap them).
func ExampleClientStore() {
	ctx := context.Background()
	var s storage.Store = memory.New()

	_, err := s.GetClient(ctx, "demo-app")
	fmt.Println(errors.Is(err, storage.ErrNotFound))

	c := &storage.Client{ID: "demo-app", Source: "dcr", RedirectURIs: []string{"http://127.0.0.1:7777/callback"}}
	fmt.Println(s.CreateClient(ctx, c))
	fmt.Println(errors.Is(s.CreateClient(ctx, c), storage.ErrAlreadyExists))
	// Output:
	// true
	// <nil>
	// true
}

// A transaction travels in the context (fosite's storage.Transactional
// shape); the work of a rolled-back transaction is invisible afterwards.
func ExampleTransactional() {
	ctx := context.Background()
	var s storage.Store = memory.New()

	tx, _ := s.BeginTX(ctx)
	_ = s.CreateClient(tx, &storage.Client{ID: "made-in-tx", Source: "dcr"})
	_ = s.Rollback(tx)

	_, err := s.GetClient(ctx, "made-in-tx")
	fmt.Println(errors.Is(err, storage.ErrNotFound))
	// Output: true
}
