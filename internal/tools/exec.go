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
		OutputLimit: execOutputLimit + redactSlack, // see formatExec
	})
	if err != nil {
		if ctx.Err() != nil {
			return outcome{}, ctx.Err()
		}
		return outcome{}, fmt.Errorf("exec: %w", err)
	}
	o := formatExec(res, timeout, r.pipe.Redact)
	if res.TimedOut {
		o.errMsg = "timed out after " + seconds(timeout)
	}
	return o, nil
}

// redactSlack is how much more output than execOutputLimit the sandbox
// keeps, so that a secret that starts before the cut is whole when the
// output is redacted (secrets up to this long).
const redactSlack = 16 << 10

// formatExec makes exec's outcome, whose result is "Exit code: N", then a
// timeout notice, then the output, then a truncation notice. The output is
// redacted (redact, when not nil) before it is cut at execOutputLimit: cut
// first, a secret running over the cut would leave its first bytes visible,
// which redacting the cut text cannot match. The outcome says it is
// redacted, so the pipeline's redaction step does not scan it again.
func formatExec(res sandbox.ExecResult, timeout time.Duration, redact func(string) string) outcome {
	out := res.Output
	total := max(res.OutputBytes, int64(len(out)))
	truncated := int64(len(out)) < total
	if redact != nil {
		out = []byte(redact(string(out)))
	}
	if len(out) > execOutputLimit { // the slack, or a sandbox that kept more than asked
		out = out[:execOutputLimit]
		truncated = true
	}
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
	return outcome{
		res:         proto.TextResult(b.String(), res.ExitCode != 0 || res.TimedOut),
		exitCode:    res.ExitCode,
		outputBytes: total,
		redacted:    redact != nil,
	}
}

// seconds formats d as "120s", "1.5s".
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}
