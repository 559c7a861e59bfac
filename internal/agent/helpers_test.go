package agent

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/llm/llmtest"
	_ "github.com/beige-dev/beige/internal/llm/providers"
	"github.com/beige-dev/beige/internal/pipeline"
	"github.com/beige-dev/beige/internal/sandbox"
	"github.com/beige-dev/beige/internal/testutil"
	"github.com/beige-dev/beige/internal/tools"
)

const testAgent = "travel"

// fakeSandbox is an in-memory sandbox.Sandbox: files in a map, and exec
// answered by execFn (default: "ran: <command>").
type fakeSandbox struct {
	execFn func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error)

	mu    sync.Mutex
	files map[string][]byte
	execs []string
}

var _ sandbox.Sandbox = (*fakeSandbox)(nil)

func newFakeSandbox() *fakeSandbox { return &fakeSandbox{files: map[string][]byte{}} }

func (f *fakeSandbox) ID() string { return "fake" }

func (f *fakeSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	f.mu.Lock()
	f.execs = append(f.execs, req.Command)
	fn := f.execFn
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx, req)
	}
	out := []byte("ran: " + req.Command)
	return sandbox.ExecResult{Output: out, OutputBytes: int64(len(out))}, nil
}

func (f *fakeSandbox) ReadFile(ctx context.Context, p string, max int64) ([]byte, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, ok := f.files[p]
	if !ok {
		return nil, 0, fmt.Errorf("read %s: %w", p, sandbox.ErrNotExist)
	}
	size := int64(len(data))
	if size > max {
		data = data[:max]
	}
	return append([]byte(nil), data...), size, nil
}

func (f *fakeSandbox) WriteFile(ctx context.Context, p string, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[path.Clean(p)] = append([]byte(nil), data...)
	return nil
}

func (f *fakeSandbox) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.execs...)
}

// env is a Manager over a scripted provider server, with the core tools on
// a fake sandbox through a real tools.Runner.
type env struct {
	t      *testing.T
	srv    *llmtest.Server
	dir    string // sessions folder
	sb     *fakeSandbox
	runner *tools.Runner
	model  llm.Model
	prov   llm.Provider
	logs   *testutil.SyncBuffer
	logger *slog.Logger
	audit  string // the audit log's file

	mu    sync.Mutex
	setup AgentSetup // Model and Tools are filled in by newEnv
	m     *Manager
}

type wireKind int

const (
	wireAnthropic wireKind = iota
	wireOpenAI
)

func newEnv(t *testing.T, w wireKind) *env {
	t.Helper()
	e := &env{t: t, dir: filepath.Join(t.TempDir(), "sessions"), sb: newFakeSandbox(), logs: &testutil.SyncBuffer{}}
	e.logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := llm.ProviderConfig{Name: "anthropic", API: llm.APIAnthropicMessages, APIKey: "k"}
	e.model = llm.Model{ID: "claude-test", Name: "Claude Test", API: llm.APIAnthropicMessages, Provider: "anthropic",
		Input: []string{"text"}, ContextWindow: 200000, MaxTokens: 4096}
	if w == wireOpenAI {
		e.srv = llmtest.NewOpenAI(t)
		cfg = llm.ProviderConfig{Name: "openai", API: llm.APIOpenAICompletions, APIKey: "k"}
		e.model = llm.Model{ID: "gpt-test", Name: "GPT Test", API: llm.APIOpenAICompletions, Provider: "openai",
			Input: []string{"text"}, ContextWindow: 128000, MaxTokens: 4096}
	} else {
		e.srv = llmtest.NewAnthropic(t)
	}
	cfg.BaseURL = e.srv.URL()
	e.model.BaseURL = e.srv.URL()
	p, err := llm.NewProvider(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.prov = p
	e.audit = filepath.Join(t.TempDir(), "audit.jsonl")
	al, err := audit.Open(e.audit, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { al.Close() })
	allowAll := pipeline.PolicyFunc(func(string, string) error { return nil })
	e.runner = tools.NewRunner(pipeline.New(pipeline.Options{Audit: al, Policy: allowAll, Logger: e.logger}), e.logger)
	e.setup = AgentSetup{
		Model: ProviderModel{Provider: p, Model: e.model},
		Tools: testCoreTools(e.runner, func(context.Context) (sandbox.Sandbox, error) { return e.sb, nil }, testAgent),
	}
	e.m = e.newManager()
	return e
}

// newManager starts a Manager over the env's sessions folder (a restart).
func (e *env) newManager() *Manager {
	e.t.Helper()
	m, err := NewManager(ManagerConfig{SessionsDir: e.dir, Agents: e.agents, Logger: e.logger})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { m.Close() })
	return m
}

// restart closes the Manager and starts another on the same folder.
func (e *env) restart() {
	e.t.Helper()
	e.m.Close()
	e.m = e.newManager()
}

func (e *env) agents(_ context.Context, name string) (*AgentSetup, error) {
	if name != testAgent {
		return nil, ErrUnknownAgent
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.setup
	return &s, nil
}

func (e *env) configure(f func(s *AgentSetup)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f(&e.setup)
}

// prompt sends a message to the default session and fails on error.
func (e *env) prompt(msg string) *Result {
	e.t.Helper()
	res, err := e.m.Prompt(context.Background(), testAgent, "", msg, nil)
	if err != nil {
		e.t.Fatalf("Prompt(%q): %v", msg, err)
	}
	return res
}

// toolRes is a tool result as a request carried it.
type toolRes struct {
	ID      string
	Text    string
	IsError bool
}

// toolResults returns the tool results of the last message(s) of a
// request, in order, for either wire format.
func toolResults(r llmtest.Recorded) []toolRes {
	var out []toolRes
	for _, m := range r.Messages() {
		switch m["role"] {
		case "tool": // OpenAI
			id, _ := m["tool_call_id"].(string)
			out = append(out, toolRes{ID: id, Text: textOf(m["content"])})
		case "user": // Anthropic
			blocks, _ := m["content"].([]any)
			for _, b := range blocks {
				bm, _ := b.(map[string]any)
				if bm["type"] != "tool_result" {
					continue
				}
				id, _ := bm["tool_use_id"].(string)
				isErr, _ := bm["is_error"].(bool)
				out = append(out, toolRes{ID: id, Text: textOf(bm["content"]), IsError: isErr})
			}
		}
	}
	return out
}

// toolCallIDs returns the ids of the tool calls the assistant messages of
// a request carry, in order.
func toolCallIDs(r llmtest.Recorded) []string {
	var ids []string
	for _, m := range r.Messages() {
		if m["role"] != "assistant" {
			continue
		}
		if calls, ok := m["tool_calls"].([]any); ok {
			for _, c := range calls {
				cm, _ := c.(map[string]any)
				id, _ := cm["id"].(string)
				ids = append(ids, id)
			}
		}
		if blocks, ok := m["content"].([]any); ok {
			for _, b := range blocks {
				bm, _ := b.(map[string]any)
				if bm["type"] == "tool_use" {
					id, _ := bm["id"].(string)
					ids = append(ids, id)
				}
			}
		}
	}
	return ids
}

func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var parts []string
		for _, e := range x {
			parts = append(parts, textOf(e))
		}
		return strings.Join(parts, "\n")
	case map[string]any:
		if t, ok := x["text"].(string); ok {
			return t
		}
		return textOf(x["content"])
	}
	return ""
}

// roles lists the roles of messages.
func roles(msgs []llm.Message) string {
	var rs []string
	for _, m := range msgs {
		rs = append(rs, m.Role())
	}
	return strings.Join(rs, " ")
}

// testCoreTools are the core tools over runner, as the gateway gives them to
// the loop (the gateway's own adapter lives in internal/gateway, which this
// package must not import).
func testCoreTools(runner *tools.Runner, sandboxFn func(ctx context.Context) (sandbox.Sandbox, error), agentName string) Tools {
	var defs []llm.Tool
	for _, d := range tools.Definitions() {
		defs = append(defs, llm.Tool{Name: d.Name, Description: d.Description, Parameters: d.Parameters})
	}
	return &testTools{runner: runner, sandbox: sandboxFn, agent: agentName, defs: defs}
}

type testTools struct {
	runner  *tools.Runner
	sandbox func(ctx context.Context) (sandbox.Sandbox, error)
	agent   string
	defs    []llm.Tool
}

func (t *testTools) Definitions() []llm.Tool { return t.defs }

func (t *testTools) Run(ctx context.Context, call ToolCall) ToolOutcome {
	if call.InvalidArguments != "" {
		return InvalidJSONOutcome(call.Name, call.InvalidArguments)
	}
	c, err := tools.Decode(call.Name, call.Arguments)
	if err != nil {
		if strings.HasPrefix(err.Error(), "unknown tool") {
			return UnknownToolOutcome(call.Name, t.defs)
		}
		return ErrorOutcome("invalid arguments for %s: %v", call.Name, err)
	}
	sb, err := t.sandbox(ctx)
	if err != nil {
		return ErrorOutcome("%s not run: the sandbox is not available: %v", call.Name, err)
	}
	res, err := t.runner.Run(ctx, tools.Invocation{Agent: t.agent, Sandbox: sb, Call: c, Session: call.Session,
		Model: call.Model, ExecTimeout: tools.ModelExecTimeout, NoImages: !call.Images})
	if err != nil {
		if ctx.Err() != nil {
			return ErrorOutcome("%s aborted: %v", call.Name, context.Cause(ctx))
		}
		return ErrorOutcome("%s failed: %v", call.Name, err)
	}
	return FromToolResult(res)
}
