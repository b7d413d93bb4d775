package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/mcpauth/mcpauth/internal/yamlenv"
	"github.com/mcpauth/mcpauth/rsmiddleware"
)

const pinsUsage = "usage: mcpgateway pins list|diff NAME|approve NAME...|approve --all --config FILE"

// runPins manages the pins file named by the configuration's pins.file:
//
//	pins list          approved and pending definitions with their digests
//	pins diff NAME     the approved definition of NAME and its pending one, line by line
//	pins approve NAME  the pending definition of NAME becomes the approved one
//	pins approve --all every pending definition becomes approved
//
// Only pins.file is read from the configuration (its ${VAR} expanded), so
// the gateway's secrets need not be set. Running gateways read the new
// file within a second, or at once on SIGHUP.
func runPins(args []string, env Lookup, stdout io.Writer) error {
	var config string
	var all bool
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--config" || a == "-config":
			if i+1 == len(args) {
				return errors.New(pinsUsage)
			}
			config = args[i+1]
			i++
		case strings.HasPrefix(a, "--config=") || strings.HasPrefix(a, "-config="):
			_, config, _ = strings.Cut(a, "=")
		case a == "--all" || a == "-all":
			all = true
		case strings.HasPrefix(a, "-"):
			return fmt.Errorf("unknown flag %s; %s", a, pinsUsage)
		default:
			pos = append(pos, a)
		}
	}
	if config == "" || len(pos) == 0 {
		return errors.New(pinsUsage)
	}
	path, err := pinsFileOf(config, env)
	if err != nil {
		return err
	}
	switch cmd := pos[0]; {
	case cmd == "list" && len(pos) == 1 && !all:
		pf, err := rsmiddleware.ReadPinsFile(path)
		if err != nil {
			return err
		}
		for _, n := range rsmiddleware.Names(pf.Tools) {
			fmt.Fprintf(stdout, "%s\tapproved\t%s\n", n, pf.Tools[n].SHA256)
		}
		for _, n := range rsmiddleware.Names(pf.Pending) {
			state := "pending (new)"
			if _, ok := pf.Tools[n]; ok {
				state = "pending (changed)"
			}
			fmt.Fprintf(stdout, "%s\t%s\t%s\n", n, state, pf.Pending[n].SHA256)
		}
		return nil
	case cmd == "diff" && len(pos) == 2 && !all:
		pf, err := rsmiddleware.ReadPinsFile(path)
		if err != nil {
			return err
		}
		name := pos[1]
		p, ok := pf.Pending[name]
		if !ok {
			return fmt.Errorf("%q has no pending definition", name)
		}
		old, ok := pf.Tools[name]
		oldTitle := "approved " + name + " sha256:" + old.SHA256
		if !ok {
			oldTitle = "approved " + name + ": none"
		}
		fmt.Fprintf(stdout, "--- %s\n+++ pending %s sha256:%s\n", oldTitle, name, p.SHA256)
		for _, l := range diffLines(indented(old.Definition), indented(p.Definition)) {
			fmt.Fprintln(stdout, l)
		}
		return nil
	case cmd == "approve" && (all && len(pos) == 1 || !all && len(pos) > 1):
		done, err := rsmiddleware.Approve(path, pos[1:], all)
		if err != nil {
			return err
		}
		pf, err := rsmiddleware.ReadPinsFile(path)
		if err != nil {
			return err
		}
		for _, n := range done {
			fmt.Fprintf(stdout, "approved %s sha256:%s\n", n, pf.Tools[n].SHA256)
		}
		if len(done) == 0 {
			fmt.Fprintln(stdout, "nothing pending")
		}
		return nil
	}
	return errors.New(pinsUsage)
}

// pinsFileOf reads pins.file of the configuration file at config.
func pinsFileOf(config string, env Lookup) (string, error) {
	data, err := os.ReadFile(config)
	if err != nil {
		return "", err
	}
	root, err := yamlenv.Parse(data)
	if err != nil || root == nil || root.Kind != yaml.MappingNode {
		return "", fmt.Errorf("%s: not a configuration file", config)
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "pins" {
			continue
		}
		var pc PinsConfig
		n := root.Content[i+1]
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == "file" {
				if err := yamlenv.Expand(n.Content[j+1], env); err != nil {
					return "", fmt.Errorf("pins.file: %w", err)
				}
			}
		}
		if err := n.Decode(&pc); err != nil || pc.File == "" {
			return "", fmt.Errorf("%s: pins.file: not set", config)
		}
		return pc.File, nil
	}
	return "", fmt.Errorf("%s: no pins section", config)
}

// indented is the definition pretty-printed, one member per line.
func indented(def json.RawMessage) []string {
	if len(def) == 0 {
		return nil
	}
	var b bytes.Buffer
	if json.Indent(&b, def, "", "  ") != nil {
		return []string{string(def)}
	}
	return strings.Split(b.String(), "\n")
}

// diffLines is a line diff of a and b (longest common subsequence): common
// lines start with two spaces, removed ones with "- ", added ones "+ ".
func diffLines(a, b []string) []string {
	n, m := len(a), len(b)
	if n*m > 4<<20 {
		// Too long to align: the one whole, then the other.
		out := make([]string, 0, n+m)
		for _, l := range a {
			out = append(out, "- "+l)
		}
		for _, l := range b {
			out = append(out, "+ "+l)
		}
		return out
	}
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			out = append(out, "  "+a[i])
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			out = append(out, "+ "+b[j])
			j++
		default:
			out = append(out, "- "+a[i])
			i++
		}
	}
	return out
}
