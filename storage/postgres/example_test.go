package postgres_test

import (
	"context"
	"errors"
	"log"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/postgres"
)

func ExampleOpen() {
	ctx := context.Background()
	// search_path (and any other parameter pgx does not know) becomes a
	// session setting of every pooled connection.
	s, err := postgres.Open(ctx, "postgres://authserver@db.internal:5432/authserver?search_path=mcpauth", postgres.Options{MaxConns: 32})
	if errors.Is(err, storage.ErrUnavailable) {
		log.Fatal("database down: ", err)
	}
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	// Several instances may migrate at once: an advisory lock serialises them.
	if _, err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
}
