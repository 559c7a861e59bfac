package tools

import (
	"bytes"
	"context"
	"fmt"
)

func (r *Runner) write(ctx context.Context, inv Invocation, c *WriteCall) (outcome, error) {
	unlock, err := r.locks.lock(ctx, inv.Sandbox, c.Path)
	if err != nil {
		return outcome{}, err
	}
	defer unlock()
	if err := inv.Sandbox.WriteFile(ctx, c.Path, []byte(c.Content)); err != nil {
		return fileError(ctx, "write", c.Path, err)
	}
	return textOutcome(fmt.Sprintf("Wrote %d bytes to %s", len(c.Content), c.Path), false), nil
}

func (r *Runner) patch(ctx context.Context, inv Invocation, c *PatchCall) (outcome, error) {
	// Hold the file from read to write-back, so that a concurrent patch or
	// write through this runner cannot be lost in between.
	unlock, err := r.locks.lock(ctx, inv.Sandbox, c.Path)
	if err != nil {
		return outcome{}, err
	}
	defer unlock()

	data, size, err := inv.Sandbox.ReadFile(ctx, c.Path, patchMaxBytes)
	if err != nil {
		return fileError(ctx, "patch", c.Path, err)
	}
	if int64(len(data)) < size || len(data) > patchMaxBytes {
		return textOutcome(fmt.Sprintf("patch %s: the file is %d bytes; patch edits files up to %d MB (use exec for larger files)",
			c.Path, max(size, int64(len(data))), patchMaxBytes>>20), true), nil
	}
	old := []byte(c.OldText)
	switch n := countOverlapping(data, old); {
	case n == 0:
		msg := "oldText not found in " + c.Path
		if bytes.Contains(data, []byte("\r\n")) && bytes.IndexByte(old, '\n') >= 0 && bytes.IndexByte(old, '\r') < 0 {
			msg += " (the file has CRLF line endings; oldText has LF only)"
		}
		return textOutcome(msg, true), nil
	case n > 1:
		return textOutcome(fmt.Sprintf("oldText occurs %d times in %s; it must occur exactly once (add surrounding lines to make it unique)",
			n, c.Path), true), nil
	}

	i := bytes.Index(data, old)
	patched := make([]byte, 0, len(data)-len(old)+len(c.NewText))
	patched = append(patched, data[:i]...)
	patched = append(patched, c.NewText...)
	patched = append(patched, data[i+len(old):]...)
	if err := inv.Sandbox.WriteFile(ctx, c.Path, patched); err != nil {
		return fileError(ctx, "patch", c.Path, err)
	}
	line := bytes.Count(data[:i], []byte{'\n'}) + 1
	return textOutcome(fmt.Sprintf("Patched %s at line %d: replaced %d bytes with %d bytes", c.Path, line, len(old), len(c.NewText)), false), nil
}

// countOverlapping counts the occurrences of sub in b, overlapping ones
// included: "aa" occurs twice in "aaa", which is as ambiguous as two apart.
func countOverlapping(b, sub []byte) int {
	n := 0
	for {
		i := bytes.Index(b, sub)
		if i < 0 {
			return n
		}
		n++
		b = b[i+1:]
	}
}
