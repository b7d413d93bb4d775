package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
	"github.com/mcpauth/mcpauth/internal/secret"
)

// serverSecret returns the key material the AS derives its keys from.
//
//   - secret set in the configuration: that.
//   - sqlite storage: PATH.secret next to the database, created (mode 0600)
//     with a new random value on first start, so restarts can read what they
//     sealed.
//   - memory storage: a new random value per run.
//   - postgres: the configuration must set it (config.Validate refuses).
//
// source says where the secret came from, for the start-up log.
func serverSecret(cfg *config.Config) (key []byte, source string, err error) {
	if cfg.Secret != "" {
		return []byte(cfg.Secret), "configuration", nil
	}
	kind, path := cfg.StorageKind()
	switch kind {
	case "memory":
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return nil, "", err
		}
		return b, "random, for this run only", nil
	case "sqlite":
		return fileSecret(path + ".secret")
	}
	return nil, "", errors.New("config: secret: required with postgres storage")
}

// fileSecret reads the secret file at p, creating it when absent. Two
// processes starting at once agree: O_EXCL lets one create it, the other
// reads what was written.
func fileSecret(p string) ([]byte, string, error) {
	for range 3 {
		b, err := os.ReadFile(p)
		if err == nil {
			s := strings.TrimSpace(string(b))
			if len(s) < 32 {
				// Possibly being written right now by another process.
				time.Sleep(100 * time.Millisecond)
				continue
			}
			if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o077 != 0 {
				return nil, "", fmt.Errorf("secret file %s is readable by others (mode %v); chmod 600 it", p, fi.Mode().Perm())
			}
			return []byte(s), p, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, "", fmt.Errorf("reading secret file: %w", err)
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("creating secret file: %w", err)
		}
		s := secret.Generate()
		_, werr := f.WriteString(s + "\n")
		if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
			os.Remove(p)
			return nil, "", fmt.Errorf("writing secret file: %w", err)
		}
		return []byte(s), p + " (new)", nil
	}
	return nil, "", fmt.Errorf("secret file %s holds fewer than 32 bytes", p)
}
