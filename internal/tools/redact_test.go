package tools

import (
	"context"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/pipeline"
	"github.com/beige-dev/beige/internal/redact"
	"github.com/beige-dev/beige/internal/sandbox"
)

// A configured secret in a tool's output does not reach the caller (the
// model, or POST /exec).
func TestRunRedactsResult(t *testing.T) {
	const key = "sk-ant-api03-secretsecret"
	red := redact.New([]redact.Secret{{Name: "llm.providers.anthropic.apiKey", Value: key}})
	e := newEnv(t, nil)
	e.runner = NewRunner(pipeline.New(pipeline.Options{Audit: e.audit, Policy: pipeline.PolicyFunc(func(string, string) error { return nil }), Redact: red.String}), nil)
	e.sb.execFn = func(context.Context, sandbox.ExecRequest) (sandbox.ExecResult, error) {
		out := "ANTHROPIC_API_KEY=" + key + "\n"
		return sandbox.ExecResult{Output: []byte(out), OutputBytes: int64(len(out))}, nil
	}
	res := e.run(t, &ExecCall{Command: "env"})
	if want := "Exit code: 0\nANTHROPIC_API_KEY=[redacted:llm.providers.anthropic.apiKey]\n"; res.Text() != want {
		t.Errorf("exec result %q, want %q", res.Text(), want)
	}
	e.sb.put("/workspace/k.txt", "key: "+key)
	res = e.run(t, &ReadCall{Path: "k.txt"})
	if strings.Contains(res.Text(), key) || !strings.Contains(res.Text(), "[redacted:llm.providers.anthropic.apiKey]") {
		t.Errorf("read result %q", res.Text())
	}
}

// Output cut in the middle of a secret does not show the secret's first
// bytes: the output is redacted before it is cut.
func TestExecTruncationDoesNotLeakASecretPrefix(t *testing.T) {
	const key = "sk-ant-api03-PREFIXLEAKsecretsecretsecret"
	red := redact.New([]redact.Secret{{Name: "llm.providers.anthropic.apiKey", Value: key}})
	for _, at := range []int{1, 5, 13, len(key) - 1} { // secret bytes before the cut
		t.Run(key[:at], func(t *testing.T) {
			e := newEnv(t, nil)
			e.runner = NewRunner(pipeline.New(pipeline.Options{Audit: e.audit, Policy: pipeline.PolicyFunc(func(string, string) error { return nil }), Redact: red.String}), nil)
			full := strings.Repeat("x", execOutputLimit-at) + key + "\n" + strings.Repeat("y", 1000)
			e.sb.execFn = func(_ context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
				out := full[:min(len(full), req.OutputLimit)] // as the sandbox keeps it
				return sandbox.ExecResult{Output: []byte(out), OutputBytes: int64(len(full))}, nil
			}
			res := e.run(t, &ExecCall{Command: "cat big"})
			text := res.Text()
			end := strings.LastIndex(text, "\n\n[output truncated: showed ")
			if end < 0 {
				t.Fatalf("no truncation notice: %q", text[len(text)-100:])
			}
			visible := strings.TrimSpace(text[strings.LastIndex(text[:end], "x")+1 : end])
			if strings.Contains(visible, key[:at]) || visible != "" && strings.HasPrefix(key, visible) {
				t.Errorf("the cut output shows the secret's first bytes: %q", text[end-20:])
			}
		})
	}
}

// exec's output is redacted once, in formatExec before the cut, not again
// by the pipeline (a second scan of up to 50 KB of output per call).
func TestExecOutputRedactedOnce(t *testing.T) {
	const key = "sk-ant-api03-secretsecret"
	red := redact.New([]redact.Secret{{Name: "llm.providers.anthropic.apiKey", Value: key}})
	var scans int
	count := func(s string) string {
		if strings.Contains(s, "MARK") {
			scans++
		}
		return red.String(s)
	}
	e := newEnv(t, nil)
	e.runner = NewRunner(pipeline.New(pipeline.Options{Audit: e.audit, Policy: pipeline.PolicyFunc(func(string, string) error { return nil }), Redact: count}), nil)
	e.sb.execFn = func(context.Context, sandbox.ExecRequest) (sandbox.ExecResult, error) {
		out := "MARK " + key + "\n"
		return sandbox.ExecResult{Output: []byte(out), OutputBytes: int64(len(out))}, nil
	}
	res := e.run(t, &ExecCall{Command: "env"})
	if want := "Exit code: 0\nMARK [redacted:llm.providers.anthropic.apiKey]\n"; res.Text() != want {
		t.Errorf("exec result %q, want %q", res.Text(), want)
	}
	if scans != 1 {
		t.Errorf("the output was redacted %d times, want 1", scans)
	}
	e.sb.put("/workspace/k.txt", "MARK "+key) // other tools: the pipeline, once
	scans = 0
	if res := e.run(t, &ReadCall{Path: "k.txt"}); strings.Contains(res.Text(), key) || scans != 1 {
		t.Errorf("read result %q redacted %d times, want 1", res.Text(), scans)
	}
}

// BenchmarkExecLargeOutputRedacted: an exec call whose output fills the
// limit, with one configured secret (compare before/after the single scan).
func BenchmarkExecLargeOutputRedacted(b *testing.B) {
	red := redact.New([]redact.Secret{{Name: "llm.providers.anthropic.apiKey", Value: "sk-ant-api03-secretsecret"}})
	e := newEnv(b, nil)
	e.runner = NewRunner(pipeline.New(pipeline.Options{Audit: e.audit, Policy: pipeline.PolicyFunc(func(string, string) error { return nil }), Redact: red.String}), nil)
	out := []byte(strings.Repeat("a line of ordinary build output\n", execOutputLimit/32))
	e.sb.execFn = func(context.Context, sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{Output: out, OutputBytes: int64(len(out))}, nil
	}
	for b.Loop() {
		e.run(b, &ExecCall{Command: "make"})
	}
}
