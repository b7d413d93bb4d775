package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/mcpauth/mcpauth/internal/auditchain"
)

// errChainBroken: audit verify found a line out of its chain.
var errChainBroken = errors.New("audit verify: the audit chain is broken")

// auditCommand runs `mcpgateway audit verify --config FILE LOG...`: it
// checks the chained audit lines of the files LOG (a rotated series,
// oldest first) under the key derived from audit.chain_key, ignoring the
// lines that carry no chain. It prints "ok N" and each instance's last
// position, or the first line changed, removed, inserted or reordered and
// then fails.
func auditCommand(args []string, env Lookup, stdout, stderr io.Writer) error {
	const usage = "usage: mcpgateway audit verify --config FILE LOG..."
	if len(args) == 0 || args[0] != "verify" {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet("mcpgateway audit verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "the gateway's configuration file (YAML), for audit.chain_key")
	var logs []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		logs = append(logs, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if *path == "" || len(logs) == 0 {
		return errors.New(usage)
	}
	data, err := os.ReadFile(*path)
	if err != nil {
		return err
	}
	cfg, err := ParseConfig(data, env)
	if err != nil {
		return err
	}
	if cfg.Audit.ChainKey == "" {
		return errors.New("audit verify: the configuration has no audit.chain_key: its audit lines carry no chain")
	}
	key, err := auditchain.DeriveKey([]byte(cfg.Audit.ChainKey), ChainPurpose)
	if err != nil {
		return err
	}
	res, err := auditchain.VerifyFiles(key, logs)
	var f *auditchain.Failure
	if errors.As(err, &f) {
		fmt.Fprintln(stdout, f.Error())
		return errChainBroken
	}
	if err != nil {
		return err
	}
	res.Report(stdout)
	return nil
}
