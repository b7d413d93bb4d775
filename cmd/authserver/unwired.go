//go:build !wired

package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
)

// Temporary seam while as/ and storage/open land: built without the
// "wired" tag, the server commands report that they are unavailable.
var errNotWired = errors.New("this build has no server (build with -tags wired)")

func serve(context.Context, *config.Config, bool, *slog.Logger, env) error { return errNotWired }
func migrate(context.Context, *config.Config, string, env) error           { return errNotWired }
func rotateKey(context.Context, *config.Config, env) error                 { return errNotWired }
func gcOnce(context.Context, *config.Config, *slog.Logger, env) error      { return errNotWired }
