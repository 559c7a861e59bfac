package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/sandbox"
	"github.com/beige-dev/beige/internal/sandbox/docker"
	"github.com/beige-dev/beige/internal/sandbox/docker/dockertest"
	"github.com/beige-dev/beige/internal/sandbox/memsandbox"
)

// testGateway is a gateway started in-process on a free port, with
// in-memory sandboxes (mem) or, when the test's subject is the sandbox,
// real ones of the test image.
type testGateway struct {
	*Gateway
	home     home.Home
	agents   []string
	opts     Options
	instance string
	mem      *memsandbox.Runtime // nil: Docker
}

// restart shuts the gateway down and starts a new one on the same home
// and config, as a restarted process would.
func (g *testGateway) restart(t *testing.T) {
	t.Helper()
	g.Shutdown(context.Background())
	g.opts.Runtime.Close() // as a stopped process's would be
	opts := g.opts
	if g.mem != nil {
		g.mem = g.mem.Reopen()
		opts.Runtime = g.mem
	} else {
		opts.Runtime = dockertest.NewRuntime(t, docker.Options{Instance: g.instance})
	}
	ng, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ng.Shutdown(context.Background()) })
	g.Gateway = ng
}

// startGateway starts a gateway with one agent per name (each given a
// random suffix, so that test processes do not collide) on in-memory
// sandboxes.
func startGateway(t *testing.T, names ...string) *testGateway {
	return startGatewayWith(t, gatewaySetup{names: names})
}

// startDockerGateway is startGateway with real sandboxes; it skips the
// test when no Docker engine answers.
func startDockerGateway(t *testing.T, names ...string) *testGateway {
	return startGatewayWith(t, gatewaySetup{names: names, docker: true})
}

// gatewaySetup shapes the config of a test gateway.
type gatewaySetup struct {
	names     []string
	providers string            // the text of the providers object; default anthropic with key 'k'
	model     string            // each agent's model object; default anthropic/m
	plugins   string            // the text of the plugins object, e.g. "git: {}"
	extra     map[string]string // agent name (without suffix) -> more keys of that agent
	sandbox   map[string]string // agent name -> more keys of its sandbox
	// rename replaces placeholders in the config by the agents' full
	// names: {"AGENT": "tg"} puts tg's suffixed name where AGENT stands.
	rename map[string]string

	options func(*Options) // changes the gateway's options before it starts

	// docker runs the agents in real sandboxes (the test skips without an
	// engine): for tests whose subject is the sandbox. Otherwise they run
	// in memsandbox, whose commands go to exec (default its interpreter).
	docker bool
	exec   memsandbox.ExecFunc
}

func startGatewayWith(t testing.TB, s gatewaySetup) *testGateway {
	t.Helper()
	tg := setUpGateway(t, s)
	g, err := Start(context.Background(), tg.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Shutdown(context.Background()) })
	tg.Gateway = g
	return tg
}

// setUpGateway makes the home, config and options of a test gateway
// without starting it (g.Gateway is nil).
func setUpGateway(t testing.TB, s gatewaySetup) *testGateway {
	t.Helper()
	image := "beige-memsandbox" // never pulled or run: memsandbox only records it
	if s.docker {
		dockertest.RequireDocker(t)
		image = dockertest.Image(t)
	}
	h := home.Home{Dir: t.TempDir()}
	if _, err := h.Setup(); err != nil {
		t.Fatal(err)
	}
	var agents []string
	var b strings.Builder
	if s.providers == "" {
		s.providers = "anthropic: { apiKey: 'k' }"
	}
	if s.model == "" {
		s.model = "{ provider: 'anthropic', model: 'm' }"
	}
	fmt.Fprintf(&b, "{ llm: { providers: { %s } }, plugins: { %s }, agents: {\n", s.providers, s.plugins)
	for _, n := range s.names {
		a := n + "-" + dockertest.Suffix()
		agents = append(agents, a)
		fmt.Fprintf(&b, "  %q: { model: %s, sandbox: { image: %q, %s }, %s },\n", a, s.model, image, s.sandbox[n], s.extra[n])
		if s.docker {
			t.Cleanup(func() { dockertest.RemoveContainer(t, a) })
		}
	}
	b.WriteString("} }")
	text := b.String()
	for placeholder, name := range s.rename {
		for _, a := range agents {
			if strings.HasPrefix(a, name+"-") {
				text = strings.ReplaceAll(text, placeholder, a)
			}
		}
	}
	path := filepath.Join(h.Dir, "config.json5")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, &config.LoadOptions{Builtins: plugin.Builtins()})
	if err != nil {
		t.Fatal(err)
	}
	tg := &testGateway{home: h, agents: agents}
	tg.opts = Options{Home: h, Config: cfg, Addr: "127.0.0.1:0"}
	if s.docker {
		tg.instance = "test-" + dockertest.Suffix()
		tg.opts.HelperBinary = dockertest.HelperBinary(t)
		tg.opts.Runtime = dockertest.NewRuntime(t, docker.Options{Instance: tg.instance})
	} else {
		tg.mem = memsandbox.New(memsandbox.Options{Exec: s.exec})
		tg.opts.Runtime = tg.mem
	}
	if s.options != nil {
		s.options(&tg.opts)
	}
	return tg
}

// workspaceFile reads a file of agent's workspace as the host sees it
// (rel is relative to the workspace).
func (g *testGateway) workspaceFile(t testing.TB, agent, rel string) ([]byte, error) {
	t.Helper()
	if g.mem == nil {
		return os.ReadFile(filepath.Join(g.home.Workspace(agent), rel))
	}
	sb := g.mem.Sandbox(agent)
	if sb == nil {
		return nil, fmt.Errorf("agent %q has no sandbox", agent)
	}
	data, ok := sb.Peek(path.Join(sandbox.WorkspacePath, rel))
	if !ok {
		return nil, fmt.Errorf("%s: %w", rel, os.ErrNotExist)
	}
	return data, nil
}

// putWorkspaceFile writes a file into agent's workspace from the host.
func (g *testGateway) putWorkspaceFile(t testing.TB, agent, rel string, data []byte) {
	t.Helper()
	var err error
	if g.mem == nil {
		err = os.WriteFile(filepath.Join(g.home.Workspace(agent), rel), data, 0o644)
	} else if sb := g.mem.Sandbox(agent); sb == nil {
		err = fmt.Errorf("agent %q has no sandbox", agent)
	} else {
		err = sb.Put(path.Join(sandbox.WorkspacePath, rel), data)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// post sends body to path and decodes the JSON answer.
func (g *testGateway) post(t *testing.T, path, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(g.URL()+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s: not JSON: %s", path, data)
	}
	return resp.StatusCode, out
}

// tool runs a core tool through POST /api/agents/:name/exec.
func (g *testGateway) tool(t *testing.T, agent, tool string, params any) (text string, isError bool) {
	t.Helper()
	p, _ := json.Marshal(params)
	code, out := g.post(t, "/api/agents/"+agent+"/exec", fmt.Sprintf(`{"tool":%q,"params":%s}`, tool, p))
	if code != 200 {
		t.Fatalf("%s %s: %d %v", tool, p, code, out)
	}
	var res proto.ToolResult
	raw, _ := json.Marshal(out)
	json.Unmarshal(raw, &res)
	return res.Text(), res.IsError
}

// TestSpecExamples runs the examples of http-api.md in memory and, when an
// engine answers, in a real sandbox.
func TestSpecExamples(t *testing.T) {
	eachRuntime(t, func(t *testing.T, docker bool) {
		specExamples(t, startGatewayWith(t, gatewaySetup{names: []string{"assistant"}, docker: docker}))
	})
}

func specExamples(t *testing.T, g *testGateway) {
	a := g.agents[0]

	// The three curl examples of http-api.md, verbatim but for the agent name.
	text, isErr := g.tool(t, a, "write", map[string]any{"path": "/workspace/output.txt", "content": "Hello, world!"})
	if isErr || !strings.Contains(text, "13 bytes") {
		t.Errorf("write: %q", text)
	}
	if data, err := g.workspaceFile(t, a, "output.txt"); err != nil || string(data) != "Hello, world!" {
		t.Errorf("file on host: %q %v", data, err)
	}
	if text, isErr := g.tool(t, a, "read", map[string]any{"path": "/workspace/output.txt"}); isErr || text != "Hello, world!" {
		t.Errorf("read: %q", text)
	}
	if text, isErr := g.tool(t, a, "exec", map[string]any{"command": "ls -la /workspace"}); isErr || !strings.HasPrefix(text, "Exit code: 0") || !strings.Contains(text, "output.txt") {
		t.Errorf("exec: %q", text)
	}

	// patch: unique works, non-unique fails saying how many.
	g.tool(t, a, "write", map[string]any{"path": "notes.txt", "content": "a b a"})
	if text, isErr := g.tool(t, a, "patch", map[string]any{"path": "notes.txt", "oldText": "a", "newText": "c"}); !isErr || !strings.Contains(text, "2 times") {
		t.Errorf("non-unique patch: %v %q", isErr, text)
	}
	if _, isErr := g.tool(t, a, "patch", map[string]any{"path": "notes.txt", "oldText": "b", "newText": "B"}); isErr {
		t.Error("unique patch failed")
	}
	if data, _ := g.workspaceFile(t, a, "notes.txt"); string(data) != "a B a" {
		t.Errorf("after patch: %q", data)
	}

	// The session key reaches the command as BEIGE_* variables; the default is tui:<agent>:default.
	text, _ = g.tool(t, a, "exec", map[string]any{"command": "echo $BEIGE_AGENT_NAME $BEIGE_CHANNEL $BEIGE_SESSION_KEY"})
	if !strings.Contains(text, a+" tui tui:"+a+":default") {
		t.Errorf("session env: %q", text)
	}

	// GET endpoints.
	for _, path := range []string{"/api/health", "/api/agents", "/api/config"} {
		resp, err := http.Get(g.URL() + path)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", path, resp, err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !json.Valid(data) || bytes.Contains(data, []byte(`"k"`)) {
			t.Errorf("%s: %s", path, data)
		}
	}
}

// eachRuntime runs f in memory and, when an engine answers, in real
// sandboxes: for tests whose subject is both the gateway and the sandbox.
func eachRuntime(t *testing.T, f func(t *testing.T, docker bool)) {
	for _, docker := range []bool{false, true} {
		t.Run(map[bool]string{false: "mem", true: "docker"}[docker], func(t *testing.T) { f(t, docker) })
	}
}

// The host's env (here a provider key) reaches no sandbox: not through
// the spec's env nor the exec's (mem), nor any process's (Docker).
func TestNoHostSecretsInSandbox(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "canary-123")
	eachRuntime(t, noHostSecrets)
}

func noHostSecrets(t *testing.T, docker bool) {
	g := startGatewayWith(t, gatewaySetup{names: []string{"secrets"}, docker: docker})
	a := g.agents[0]
	for _, cmd := range []string{"env", "cat /proc/1/environ", "cat /proc/self/environ"} {
		text, _ := g.tool(t, a, "exec", map[string]any{"command": cmd})
		if strings.Contains(text, "canary") {
			t.Errorf("%s shows the host's secret: %q", cmd, text)
		}
	}
}

func TestExecTimeoutKillsTheCommand(t *testing.T) { eachRuntime(t, execTimeout) }

func execTimeout(t *testing.T, docker bool) {
	g := startGatewayWith(t, gatewaySetup{names: []string{"timeout"}, docker: docker})
	a := g.agents[0]
	start := time.Now()
	text, isErr := g.tool(t, a, "exec", map[string]any{"command": "sleep 100", "timeout": 1})
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
	if !isErr || !strings.Contains(text, "timed out") {
		t.Errorf("%v %q", isErr, text)
	}
	if !docker {
		return // no processes to list
	}
	text, _ = g.tool(t, a, "exec", map[string]any{"command": "ps"})
	if strings.Contains(text, "sleep 100") {
		t.Errorf("leftover process:\n%s", text)
	}
}

// The sandbox cuts the output (memsandbox as Docker, see its conformance
// test); the gateway marks the cut and audits the true size.
func TestHugeOutputIsCutButAuditedWhole(t *testing.T) {
	g := startGatewayWith(t, gatewaySetup{names: []string{"output"},
		exec: func(ctx context.Context, sb *memsandbox.Sandbox, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
			if req.Command != "head -c 1048576 /dev/zero | tr '\\0' x" {
				return memsandbox.Interpret(ctx, sb, req)
			}
			return sandbox.ExecResult{Output: bytes.Repeat([]byte("x"), 1<<20)}, nil
		}})
	a := g.agents[0]
	text, _ := g.tool(t, a, "exec", map[string]any{"command": "head -c 1048576 /dev/zero | tr '\\0' x"})
	if len(text) > 60<<10 || !strings.Contains(text, "truncated") {
		t.Errorf("output of %d bytes, marker missing or not cut", len(text))
	}
	recs, err := audit.ReadFile(g.home.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1]
	if last.Phase != audit.PhaseFinished || last.OutputBytes == nil || *last.OutputBytes != 1<<20 {
		t.Errorf("audit: %+v", last)
	}
}

func TestConcurrentExecAcrossAgents(t *testing.T) {
	g := startGateway(t, "c1", "c2", "c3", "c4")
	before, _ := audit.ReadFile(g.home.AuditLog())
	var wg sync.WaitGroup
	errs := make(chan string, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := g.agents[i%4]
			body := fmt.Sprintf(`{"tool":"exec","params":{"command":"echo call-%d"}}`, i)
			resp, err := http.Post(g.URL()+"/api/agents/"+a+"/exec", "application/json", strings.NewReader(body))
			if err != nil {
				errs <- err.Error()
				return
			}
			defer resp.Body.Close()
			var res proto.ToolResult
			json.NewDecoder(resp.Body).Decode(&res)
			if resp.StatusCode != 200 || res.IsError || !strings.Contains(res.Text(), fmt.Sprintf("call-%d\n", i)) {
				errs <- fmt.Sprintf("call %d: %d %+v", i, resp.StatusCode, res)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	after, err := audit.ReadFile(g.home.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(after) - len(before); n != 400 {
		t.Errorf("%d new audit lines, want 400", n)
	}
}

func TestBadInput(t *testing.T) {
	g := startGateway(t, "bad")
	a := g.agents[0]
	cases := []struct {
		path, body string
		code       int
	}{
		{"/api/agents/" + a + "/exec", `{"tool":`, 400},
		{"/api/agents/" + a + "/exec", `{"tool":"nope","params":{}}`, 400},
		{"/api/agents/" + a + "/exec", `{"tool":"read","params":{}}`, 400},
		{"/api/agents/" + a + "/exec", `{"tool":"exec","params":{"command":5}}`, 400},
		{"/api/agents/nobody/exec", `{"tool":"exec","params":{"command":"true"}}`, 404},
	}
	for _, tc := range cases {
		code, out := g.post(t, tc.path, tc.body)
		if code != tc.code || out["error"] == nil {
			t.Errorf("%s %s: %d %v", tc.path, tc.body, code, out)
		}
	}
	resp, err := http.Post(g.URL()+"/api/agents/"+a+"/exec", "application/json", io.MultiReader(strings.NewReader(`{"tool":"write","params":{"path":"x","content":"`), io.LimitReader(neverEnding('a'), 11<<20)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("oversize body: %d", resp.StatusCode)
	}
	if h := g.Health(context.Background()); h.Status != "ok" {
		t.Errorf("health after bad input: %+v", h)
	}
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}
