package tools

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/sandbox"
)

func (r *Runner) exec(ctx context.Context, inv Invocation, c *ExecCall) (outcome, error) {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = inv.ExecTimeout
	}
	if timeout <= 0 {
		timeout = HTTPExecTimeout
	}
	env := inv.Session.Env()
	// The command's tool calls are attributed to this session by a secret
	// valid while it runs, never by the BEIGE_* variables (which it can change).
	if r.callTokens != nil {
		if token, release := r.callTokens(inv.Agent, inv.Session); token != "" {
			defer release()
			env[proto.CallTokenEnv] = token
		}
	}
	res, err := inv.Sandbox.Exec(ctx, sandbox.ExecRequest{
		Command:     c.Command, // one argument of sh -c, never re-quoted
		Env:         env,
		Timeout:     timeout,
		OutputLimit: execOutputLimit,
	})
	if err != nil {
		if ctx.Err() != nil {
			return outcome{}, ctx.Err()
		}
		return outcome{}, fmt.Errorf("exec: %w", err)
	}
	o := outcome{
		res:         formatExec(res, timeout),
		exitCode:    res.ExitCode,
		outputBytes: max(res.OutputBytes, int64(len(res.Output))),
	}
	if res.TimedOut {
		o.errMsg = "timed out after " + seconds(timeout)
	}
	return o, nil
}

// formatExec makes exec's result: "Exit code: N", then a timeout notice,
// then the output, then a truncation notice.
func formatExec(res sandbox.ExecResult, timeout time.Duration) proto.ToolResult {
	out := res.Output
	total := max(res.OutputBytes, int64(len(out)))
	if len(out) > execOutputLimit { // a sandbox that kept more than asked
		out = out[:execOutputLimit]
	}
	truncated := int64(len(out)) < total
	if truncated {
		out = trimPartialRune(out)
	}

	var b strings.Builder
	b.Grow(len(out) + 128)
	b.WriteString("Exit code: ")
	b.WriteString(strconv.Itoa(res.ExitCode))
	if res.TimedOut {
		b.WriteString("\nCommand timed out after " + seconds(timeout))
	}
	if len(out) > 0 {
		b.WriteByte('\n')
		b.WriteString(strings.ToValidUTF8(string(out), "\uFFFD"))
	}
	if truncated {
		if len(out) > 0 && out[len(out)-1] != '\n' {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "\n[output truncated: showed %d of %d bytes]", len(out), total)
	}
	return proto.TextResult(b.String(), res.ExitCode != 0 || res.TimedOut)
}

// seconds formats d as "120s", "1.5s".
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}
