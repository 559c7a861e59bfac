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
