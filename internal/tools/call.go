// Package tools implements the four core tools every agent has — read,
// write, patch and exec — on top of a sandbox.Sandbox: strict decoding of
// their parameters (Decode), their JSON schemas for the model (Definitions),
// and their execution (Runner), the core tools' Tool in the one tool
// pipeline (internal/pipeline) that checks policy, audits and runs hooks.
package tools

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/beige-dev/beige/internal/sandbox"
)

// Names of the core tools.
const (
	ToolRead  = "read"
	ToolWrite = "write"
	ToolPatch = "patch"
	ToolExec  = "exec"
)

// Default exec timeouts: a command the model runs may take longer than one
// run through the HTTP API.
const (
	HTTPExecTimeout  = 120 * time.Second
	ModelExecTimeout = 900 * time.Second
)

// Bounds on parameters; past them a call is refused by Decode.
const (
	maxLine        = 100_000_000 // offset and limit
	maxTimeoutSecs = 24 * 60 * 60
	minTimeoutSecs = 0.001
	maxPathBytes   = 4096
)

// Call is one decoded core tool call: *ReadCall, *WriteCall, *PatchCall or
// *ExecCall. Build one with Decode, or directly (Runner.Run checks it again).
type Call interface {
	// Tool returns the tool's name ("read", …).
	Tool() string
	// check resolves relative paths and checks the bounds that Decode checks.
	check() error
	// auditArgs returns the call's args for the audit log and the hooks,
	// with bulk text replaced by its size.
	auditArgs() []string
}

// ReadCall reads a text file, or an image.
type ReadCall struct {
	Path   string // absolute, or relative to /workspace
	Offset int    // first line to show, from 1; 0 means 1
	Limit  int    // lines to show; 0 means the default (2000)
}

// WriteCall creates or replaces a file.
type WriteCall struct {
	Path    string
	Content string
}

// PatchCall replaces the one occurrence of OldText in a file with NewText.
type PatchCall struct {
	Path    string
	OldText string
	NewText string
}

// ExecCall runs a command with sh -c in the sandbox.
type ExecCall struct {
	Command string
	Timeout time.Duration // 0 means the invocation's default
}

func (*ReadCall) Tool() string  { return ToolRead }
func (*WriteCall) Tool() string { return ToolWrite }
func (*PatchCall) Tool() string { return ToolPatch }
func (*ExecCall) Tool() string  { return ToolExec }

func (c *ReadCall) check() error {
	p, err := resolvePath(c.Path)
	if err != nil {
		return err
	}
	c.Path = p
	// 0 means absent.
	if c.Offset != 0 {
		if err := checkLine("offset", float64(c.Offset)); err != nil {
			return err
		}
	}
	if c.Limit != 0 {
		return checkLine("limit", float64(c.Limit))
	}
	return nil
}

func (c *WriteCall) check() error {
	p, err := resolvePath(c.Path)
	c.Path = p
	return err
}

func (c *PatchCall) check() error {
	p, err := resolvePath(c.Path)
	if err != nil {
		return err
	}
	c.Path = p
	switch {
	case c.OldText == "":
		return paramErr("oldText", "must not be empty")
	case c.OldText == c.NewText:
		return paramErr("newText", "is the same as oldText; nothing would change")
	}
	return nil
}

func (c *ExecCall) check() error {
	switch {
	case strings.TrimSpace(c.Command) == "":
		return paramErr("command", "must not be empty")
	case strings.IndexByte(c.Command, 0) >= 0:
		return paramErr("command", "must not contain a NUL byte")
	case c.Timeout < 0:
		return paramErr("timeout", "must be positive")
	case c.Timeout > maxTimeoutSecs*time.Second:
		return paramErr("timeout", "must be at most %d seconds", maxTimeoutSecs)
	}
	return nil
}

// checkLine checks an offset or limit.
func checkLine(name string, n float64) error {
	switch {
	case n < 1 && name == "offset":
		return paramErr(name, "must be at least 1 (lines are numbered from 1)")
	case n < 1:
		return paramErr(name, "must be at least 1")
	case n > maxLine:
		return paramErr(name, "must be at most %d", maxLine)
	}
	return nil
}

// resolvePath makes p absolute (relative paths are relative to /workspace)
// and clean.
func resolvePath(p string) (string, error) {
	switch {
	case p == "":
		return "", paramErr("path", "must not be empty")
	case len(p) > maxPathBytes:
		return "", paramErr("path", "is longer than %d bytes", maxPathBytes)
	case strings.IndexByte(p, 0) >= 0:
		return "", paramErr("path", "must not contain a NUL byte")
	}
	if !path.IsAbs(p) {
		p = path.Join(sandbox.WorkspacePath, p)
	}
	return path.Clean(p), nil
}

// The audit args of the core tools are a JSON array of strings, the shape
// of the spec's audit format and of the original Beige's records, so a
// script that reads args as a list works for every type: [path] for read
// and patch, [path, "(N bytes)"] for write (the content's size, never the
// content), [command] for exec.

func (c *ReadCall) auditArgs() []string { return []string{c.Path} }

func (c *WriteCall) auditArgs() []string {
	return []string{c.Path, fmt.Sprintf("(%d bytes)", len(c.Content))}
}

func (c *PatchCall) auditArgs() []string { return []string{c.Path} }

func (c *ExecCall) auditArgs() []string { return []string{c.Command} }
