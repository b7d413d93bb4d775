package migrations_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcpauth/mcpauth/migrations"
)

func ExampleRunner() {
	dir, _ := os.MkdirTemp("", "migrations")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "authserver.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()

	ctx := context.Background()
	r, err := migrations.New(db, migrations.SQLite)
	if err != nil {
		panic(err)
	}
	before, _ := r.Status(ctx)
	fmt.Println("pending", before.Pending)
	applied, err := r.Up(ctx)
	fmt.Println("applied", applied, err)
	after, _ := r.Status(ctx)
	fmt.Println("current", after.Current(), "pending", after.Pending)
	// Output:
	// pending [1 2 3 4 5 7]
	// applied [1 2 3 4 5 7] <nil>
	// current 7 pending []
}
