package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/sandbox"
	"github.com/beige-dev/beige/internal/toolclient"
	"github.com/beige-dev/beige/internal/tools"
)

// The tests of this file run the gateway on pipeRuntime, a sandbox runtime
// of their own: its exec answers "ran: <command>", and a command
// "tool: <tool> <args>" runs the in-sandbox tool client in-process, with
// the env the command got (its call token), against the agent's socket —
// as a launcher in /tools/bin would.

// pipeSecret is the provider key of the tests' config; the pipetest tool
// prints it on cue.
const pipeSecret = "sk-ant-pipetest-0123456789abcdef"

func init() {
	plugin.Register(plugin.Builtin{
		Name: "pipetest",
		Docs: fstest.MapFS{"plugin.json": {Data: []byte(`{"name": "pipetest", "description": "Pipeline tests only.", "provides": {"tools": ["pipetest", "pipetest.other"]}}`)}},
		New: func(plugin.Env) (plugin.Plugin, error) {
			return plugin.RegisterFunc(func(r *plugin.Registrar) error {
				echo := func(ctx context.Context, c *plugin.Call) (plugin.Result, error) {
					if slices.Equal(c.Args, []string{"secret"}) {
						return plugin.Result{Output: "key=" + pipeSecret + "\n", Stderr: "stderr " + pipeSecret}, errors.New("failed with " + pipeSecret)
					}
					return plugin.Result{Output: c.Tool + ": " + strings.Join(c.Args, " ") + "\n"}, nil
				}
				return errors.Join(
					r.Tool(plugin.Tool{Name: "pipetest", Handler: echo}),
					r.Tool(plugin.Tool{Name: "pipetest.other", Handler: echo}),
					// Any call with an argument "forbidden" is denied: an exec
					// whose command is that word, a plugin call with it.
					r.Hook(plugin.HookPreToolExec, plugin.PreToolExecHook(func(ctx context.Context, ev *plugin.PreToolExecEvent) error {
						if slices.Contains(ev.Args, "forbidden") {
							return errors.New("no forbidden args")
						}
						return nil
					})),
				)
			}), nil
		},
	})
}

// pipeRuntime is a sandbox runtime without containers (see above).
type pipeRuntime struct{ home home.Home }

func (r *pipeRuntime) Ensure(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return &pipeSandbox{agent: spec.Agent, socket: r.home.Socket(spec.Agent), files: map[string][]byte{}}, nil
}
func (r *pipeRuntime) Prune(context.Context, []string) ([]string, error) { return nil, nil }
func (r *pipeRuntime) Close() error                                      { return nil }

type pipeSandbox struct {
	agent, socket string
	mu            sync.Mutex
	files         map[string][]byte
}

func (s *pipeSandbox) ID() string { return "pipe-" + s.agent }

func (s *pipeSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	line, ok := strings.CutPrefix(req.Command, "tool: ")
	if !ok {
		out := []byte("ran: " + req.Command + "\n")
		return sandbox.ExecResult{Output: out, OutputBytes: int64(len(out))}, nil
	}
	env := func(k string) string {
		if k == toolclient.SocketEnv {
			return s.socket
		}
		return req.Env[k]
	}
	var out bytes.Buffer
	code := toolclient.Main(strings.Fields(line), env, &out, &out)
	return sandbox.ExecResult{Output: out.Bytes(), OutputBytes: int64(out.Len()), ExitCode: code}, nil
}

func (s *pipeSandbox) ReadFile(ctx context.Context, p string, max int64) ([]byte, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.files[p]
	if !ok {
		return nil, 0, fmt.Errorf("read %s: %w", p, sandbox.ErrNotExist)
	}
	size := int64(len(data))
	return data[:min(size, max)], size, nil
}

func (s *pipeSandbox) WriteFile(ctx context.Context, p string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[p] = bytes.Clone(data)
	return nil
}

type pipeGateway struct {
	*Gateway
	home  home.Home
	agent string
	model *llmtest.Server
}

// startPipeGateway starts a gateway on pipeRuntime with one agent that may
// use the tool pipetest (not pipetest.other) and the pipetest plugin's hook.
func startPipeGateway(t *testing.T) *pipeGateway {
	t.Helper()
	h := home.Home{Dir: t.TempDir()}
	if _, err := h.Setup(); err != nil {
		t.Fatal(err)
	}
	srv := llmtest.NewAnthropic(t)
	text := fmt.Sprintf(`{ llm: { providers: { pa: { api: "anthropic-messages", baseUrl: %q, apiKey: %q } } },
  plugins: { pipetest: {} },
  agents: { piper: { model: { provider: "pa", model: "m" }, tools: ["pipetest"], sandbox: { image: "beige-pipetest:none" } } } }`, srv.URL(), pipeSecret)
	path := filepath.Join(h.Dir, "config.json5")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, &config.LoadOptions{Builtins: plugin.Builtins()})
	if err != nil {
		t.Fatal(err)
	}
	g, err := Start(context.Background(), Options{Home: h, Config: cfg, Runtime: &pipeRuntime{home: h}, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Shutdown(context.Background()) })
	return &pipeGateway{Gateway: g, home: h, agent: "piper", model: srv}
}

func (g *pipeGateway) records(t *testing.T) []audit.Record {
	t.Helper()
	recs, err := audit.ReadFile(g.home.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// since runs f and returns the tool call records it added (not those of
// model calls).
func (g *pipeGateway) since(t *testing.T, f func()) []audit.Record {
	t.Helper()
	n := len(g.records(t))
	f()
	var out []audit.Record
	for _, r := range g.records(t)[n:] {
		if r.Type == audit.TypeCoreTool || r.Type == audit.TypeTool {
			out = append(out, r)
		}
	}
	return out
}

// viaModel has the model call exec with command, and returns the text of
// the tool result it was sent back.
func (g *pipeGateway) viaModel(t *testing.T, command string) string {
	t.Helper()
	g.model.Enqueue(llmtest.ToolCall("exec", map[string]any{"command": command}), llmtest.Text("done"))
	body, _ := json.Marshal(map[string]string{"message": "run it", "sessionKey": "api:pipe"})
	resp, err := http.Post(g.URL()+"/api/agents/"+g.agent+"/prompt", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("prompt: %d", resp.StatusCode)
	}
	last := g.model.Last()
	return last.AllText()
}

// viaExec runs exec with command through POST /api/agents/:name/exec.
func (g *pipeGateway) viaExec(t *testing.T, command string) proto.ToolResult {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"tool": "exec", "params": map[string]string{"command": command}})
	resp, err := http.Post(g.URL()+"/api/agents/"+g.agent+"/exec", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res proto.ToolResult
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&res) != nil {
		t.Fatalf("exec %q: %d", command, resp.StatusCode)
	}
	return res
}

// viaSocket runs the tool client on the host against the agent's socket.
func (g *pipeGateway) viaSocket(t *testing.T, args ...string) (code int, out string) {
	t.Helper()
	var b bytes.Buffer
	env := func(k string) string {
		if k == toolclient.SocketEnv {
			return g.home.Socket(g.agent)
		}
		return ""
	}
	code = toolclient.Main(args, env, &b, &b)
	return code, b.String()
}

// shape is a record without what differs between entries for the same
// outcome: time, duration, session, channel, model, attribution.
func shape(r audit.Record) audit.Record {
	r.Time, r.DurationMs = time.Time{}, nil
	r.Session, r.Channel, r.Model, r.Unattributed = "", "", "", false
	return r
}

// kind is a shape without what differs between a core and a plugin tool:
// the type, target, tool and args, and the tool's name in the error text
// (and the agent's).
func kind(r audit.Record) audit.Record {
	r = shape(r)
	r.Error = strings.ReplaceAll(r.Error, "'"+r.Tool+"'", "'TOOL'")
	r.Error = strings.ReplaceAll(r.Error, "'"+r.Agent+"'", "'AGENT'")
	r.Type, r.Target, r.Tool, r.Args, r.Agent = "", "", "", nil, ""
	return r
}

func shapes(rs []audit.Record, f func(audit.Record) audit.Record, tool string) []audit.Record {
	var out []audit.Record
	for _, r := range rs {
		if tool == "" || r.Tool == tool {
			out = append(out, f(r))
		}
	}
	return out
}

func recordsJSON(rs []audit.Record) string {
	b, _ := json.MarshalIndent(rs, "", "  ")
	return string(b)
}

// TestPipelineAuditEquivalence (issue #11): the same outcome gives the
// same audit records whichever entry a call came in by — the model's tool
// calls, POST /exec, the socket (from the host and from a launcher run by
// an exec) —, and a preToolExec hook denies an exec from the model, from
// /exec and a plugin call from a launcher, each audited once as denied with
// the hook's reason.
func TestPipelineAuditEquivalence(t *testing.T) {
	g := startPipeGateway(t)
	a := g.agent
	hookDenied := func(tool string) string {
		return fmt.Sprintf("Permission denied: tool '%s' blocked for agent '%s': no forbidden args", tool, a)
	}

	// Allowed exec: the model and /exec write the same records.
	var modelText string
	modelOK := g.since(t, func() { modelText = g.viaModel(t, "echo hi") })
	if !strings.Contains(modelText, "Exit code: 0\nran: echo hi") {
		t.Errorf("the model got %q", modelText)
	}
	var res proto.ToolResult
	execOK := g.since(t, func() { res = g.viaExec(t, "echo hi") })
	if res.IsError || res.Text() != "Exit code: 0\nran: echo hi\n" {
		t.Errorf("/exec gave %+v", res)
	}
	if got, want := shapes(execOK, shape, ""), shapes(modelOK, shape, ""); len(got) != 2 || !slices.EqualFunc(got, want, recordEqual) {
		t.Errorf("allowed exec: /exec records\n%s\nthe model's\n%s", recordsJSON(got), recordsJSON(want))
	}

	// Hook-denied exec: one started and one finished record, denied with
	// the hook's reason, the same from the model and from /exec.
	modelDenied := g.since(t, func() { modelText = g.viaModel(t, "forbidden") })
	if !strings.Contains(modelText, hookDenied("exec")) {
		t.Errorf("the model got %q", modelText)
	}
	execDenied := g.since(t, func() { res = g.viaExec(t, "forbidden") })
	if !res.IsError || res.Text() != hookDenied("exec") {
		t.Errorf("/exec gave %+v", res)
	}
	for name, rs := range map[string][]audit.Record{"model": modelDenied, "/exec": execDenied} {
		checkDeniedOnce(t, name, rs, hookDenied("exec"))
	}
	if got, want := shapes(execDenied, shape, ""), shapes(modelDenied, shape, ""); !slices.EqualFunc(got, want, recordEqual) {
		t.Errorf("denied exec: /exec records\n%s\nthe model's\n%s", recordsJSON(got), recordsJSON(want))
	}

	// Plugin calls on the socket: from the host, and from a launcher the
	// model's exec runs; allowed, hook-denied, policy-denied.
	code, out := 0, ""
	sockOK := g.since(t, func() { code, out = g.viaSocket(t, "pipetest", "hi") })
	if code != 0 || out != "pipetest: hi\n" {
		t.Errorf("socket: %d %q", code, out)
	}
	launcherOK := g.since(t, func() { modelText = g.viaModel(t, "tool: pipetest hi") })
	if !strings.Contains(modelText, "Exit code: 0\npipetest: hi") {
		t.Errorf("launcher: the model got %q", modelText)
	}
	if got, want := shapes(launcherOK, shape, "pipetest"), shapes(sockOK, shape, ""); len(got) != 2 || !slices.EqualFunc(got, want, recordEqual) {
		t.Errorf("allowed plugin call: launcher records\n%s\nhost socket's\n%s", recordsJSON(got), recordsJSON(want))
	}
	// The launcher's call belongs to the model's session (its exec's call token).
	if r := shapes(launcherOK, func(r audit.Record) audit.Record { return r }, "pipetest")[0]; r.Session != "api:pipe" || r.Unattributed {
		t.Errorf("launcher call attributed as %+v", r)
	}

	sockDenied := g.since(t, func() { code, out = g.viaSocket(t, "pipetest", "forbidden") })
	if code != 1 || out != hookDenied("pipetest")+"\n" {
		t.Errorf("socket, hook: %d %q", code, out)
	}
	launcherDenied := g.since(t, func() { modelText = g.viaModel(t, "tool: pipetest forbidden") })
	if !strings.Contains(modelText, "Exit code: 1\n"+hookDenied("pipetest")) {
		t.Errorf("launcher, hook: the model got %q", modelText)
	}
	checkDeniedOnce(t, "socket", sockDenied, hookDenied("pipetest"))
	checkDeniedOnce(t, "launcher", shapes(launcherDenied, shape, "pipetest"), hookDenied("pipetest"))
	if got, want := shapes(launcherDenied, shape, "pipetest"), shapes(sockDenied, shape, ""); !slices.EqualFunc(got, want, recordEqual) {
		t.Errorf("hook-denied plugin call: launcher records\n%s\nhost socket's\n%s", recordsJSON(got), recordsJSON(want))
	}
	// A hook denial is the same record for a core tool and a plugin tool.
	if got, want := shapes(sockDenied, kind, ""), shapes(execDenied, kind, ""); !slices.EqualFunc(got, want, recordEqual) {
		t.Errorf("hook denial: plugin records\n%s\ncore records\n%s", recordsJSON(got), recordsJSON(want))
	}

	policyDenied := fmt.Sprintf("Permission denied: tool 'pipetest.other' not allowed for agent '%s'", a)
	sockPolicy := g.since(t, func() { code, out = g.viaSocket(t, "pipetest.other", "hi") })
	if code != 1 || out != policyDenied+"\n" {
		t.Errorf("socket, policy: %d %q", code, out)
	}
	launcherPolicy := g.since(t, func() { modelText = g.viaModel(t, "tool: pipetest.other hi") })
	if got, want := shapes(launcherPolicy, shape, "pipetest.other"), shapes(sockPolicy, shape, ""); len(got) != 1 || !slices.EqualFunc(got, want, recordEqual) {
		t.Errorf("policy-denied plugin call: launcher records\n%s\nhost socket's\n%s", recordsJSON(got), recordsJSON(want))
	}
	if r := sockPolicy[0]; r.Phase != audit.PhaseFinished || r.Decision != audit.DecisionDenied || r.ExitCode == nil || *r.ExitCode != 1 || r.Error != policyDenied {
		t.Errorf("policy denial: %+v", r)
	}
	// A policy denial of a core tool (an agent the policy does not know,
	// as no entry can make one) is the same one record.
	coreRecs := g.since(t, func() {
		sb, _ := g.agents[a].ensure(context.Background())
		g.runner.Run(context.Background(), toolsInvocation("ghost", sb))
	})
	if got, want := shapes(coreRecs, kind, ""), shapes(sockPolicy, kind, ""); len(got) != 1 || !slices.EqualFunc(got, want, recordEqual) {
		t.Errorf("policy denial: core records\n%s\nplugin records\n%s", recordsJSON(got), recordsJSON(want))
	}
}

// checkDeniedOnce checks that rs are one call denied by a hook: a started
// record and a finished one, the only one denied, with the reason.
func checkDeniedOnce(t *testing.T, entry string, rs []audit.Record, reason string) {
	t.Helper()
	var denied []audit.Record
	for _, r := range rs {
		if r.Decision == audit.DecisionDenied {
			denied = append(denied, r)
		}
	}
	if len(rs) != 2 || rs[0].Phase != audit.PhaseStarted || len(denied) != 1 || denied[0].Phase != audit.PhaseFinished ||
		denied[0].Error != reason || denied[0].ExitCode == nil || *denied[0].ExitCode != 1 {
		t.Errorf("%s: records of a hook-denied call:\n%s", entry, recordsJSON(rs))
	}
}

func recordEqual(a, b audit.Record) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// TestPipelineRedactsPluginResults (issue #11): a configured secret that a
// plugin tool prints, on stdout, stderr or in its error, reaches neither
// the sandbox nor the audit log.
func TestPipelineRedactsPluginResults(t *testing.T) {
	g := startPipeGateway(t)
	const mark = "[redacted:llm.providers.pa.apiKey]"
	var code int
	var out string
	recs := g.since(t, func() { code, out = g.viaSocket(t, "pipetest", "secret") })
	if code != 1 || strings.Contains(out, pipeSecret) || out != "key="+mark+"\nstderr "+mark+"\nfailed with "+mark+"\n" {
		t.Errorf("the sandbox got %d %q", code, out)
	}
	data, err := os.ReadFile(g.home.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(pipeSecret)) || len(recs) != 2 || recs[1].Error != "failed with "+mark {
		t.Errorf("audit: %s", recordsJSON(recs))
	}
	// Through a launcher, what the model is sent is clean too.
	if text := g.viaModel(t, "tool: pipetest secret"); strings.Contains(text, pipeSecret) || !strings.Contains(text, "key="+mark) {
		t.Errorf("the model got %q", text)
	}
}

func toolsInvocation(agent string, sb sandbox.Sandbox) tools.Invocation {
	return tools.Invocation{Agent: agent, Sandbox: sb, Call: &tools.ExecCall{Command: "echo hi"}}
}

// TestPipelineAuditDown (issue #11): when the started record cannot be
// written, every entry refuses the call with the same message, and nothing
// runs.
func TestPipelineAuditDown(t *testing.T) {
	g := startPipeGateway(t)
	g.audit.Close()
	notRun := func(tool string) string {
		return fmt.Sprintf("beige: tool '%s' was not run: the audit log cannot be written", tool)
	}
	if text := g.viaModel(t, "echo hi"); !strings.Contains(text, notRun("exec")) || strings.Contains(text, "ran: echo hi") {
		t.Errorf("the model got %q", text)
	}
	body := `{"tool":"exec","params":{"command":"echo hi"}}`
	code, out := g.post(t, "/api/agents/"+g.agent+"/exec", body)
	if code != http.StatusServiceUnavailable || out["error"] != notRun("exec") {
		t.Errorf("/exec: %d %v", code, out)
	}
	if code, text := g.viaSocket(t, "pipetest", "hi"); code != 1 || text != notRun("pipetest")+"\n" {
		t.Errorf("socket: %d %q", code, text)
	}
}

// post sends body to path and decodes the JSON answer.
func (g *pipeGateway) post(t *testing.T, path, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(g.URL()+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}
