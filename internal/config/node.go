package config

import (
	"path/filepath"
	"strings"
)

// NodeNeeded says why plugin p needs Node.js on the gateway's host, ""
// when it does not. host is true for a TypeScript/JavaScript plugin in the
// original's format (a folder with index.ts or index.js, a plugin.json
// without a run command that names no plugin built into beige): beige's
// Node plugin host runs it, with Node.js 22 or later (plugins.<name>.node,
// $BEIGE_NODE or node in PATH). Otherwise an external plugin whose run
// command starts node, npx, tsx, ts-node or a .js/.ts file needs a node in
// PATH. p.Manifest must have been read (Load does); builtins are the
// plugins built into beige (a folder whose plugin.json names one is
// served by it). Config validation and `beige doctor` both decide with it.
func NodeNeeded(p *Plugin, builtins map[string]*Manifest) (why string, host bool) {
	if p == nil || p.Path == "" || p.Manifest == nil {
		return "", false
	}
	m := p.Manifest
	if m.Run == nil {
		if _, builtin := builtins[m.Name]; builtin || !isScriptDir(p.Path) {
			return "", false
		}
		return "a TypeScript/JavaScript plugin", true
	}
	cmd := m.Run.Command
	if len(cmd) == 0 {
		return "", false
	}
	switch filepath.Base(cmd[0]) {
	case "node", "nodejs", "npx", "tsx", "ts-node":
		return "its command runs " + filepath.Base(cmd[0]), false
	}
	for _, a := range cmd {
		switch strings.ToLower(filepath.Ext(a)) {
		case ".ts", ".mts", ".cts", ".js", ".mjs", ".cjs":
			return "its command runs " + filepath.Base(a), false
		}
	}
	return "", false
}

// Confined reports whether p's host runs in the namespace jail
// (plugins.<name>.confine, default true).
func (p *Plugin) Confined() bool { return p.Confine == nil || *p.Confine }
