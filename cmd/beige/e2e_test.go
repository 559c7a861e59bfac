package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/sandbox/docker"
	"github.com/beige-dev/beige/internal/sandbox/docker/dockertest"
)

// e2e drives the real beige binary, as a user would.
type e2e struct {
	t     *testing.T
	bin   string
	home  string
	port  int
	agent string
	env   []string
}

func newE2E(t *testing.T) *e2e {
	t.Helper()
	return newE2EWith(t, `anthropic: { apiKey: "${ANTHROPIC_API_KEY}" }`, `{ provider: "anthropic", model: "claude-sonnet-4-6" }`)
}

// newE2EWith writes a config with the given providers and agent model.
func newE2EWith(t *testing.T, providers, model string) *e2e {
	t.Helper()
	dockertest.RequireDocker(t)
	e := &e2e{t: t, home: t.TempDir(), agent: "e2e-" + dockertest.Suffix()}
	e.bin = dockertest.StaticBinary(t, "./cmd/beige")
	helper := dockertest.HelperBinary(t)
	e.port = freePort(t)
	cfg := fmt.Sprintf(`{
  llm: { providers: { %s } },
  agents: { %q: { model: %s, sandbox: { image: %q } } },
  gateway: { port: %d },
}`, providers, e.agent, model, dockertest.Image(t), e.port)
	if err := os.WriteFile(filepath.Join(e.home, "config.json5"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	e.env = append(os.Environ(), "BEIGE_HOME="+e.home, "BEIGE_SANDBOX_BINARY="+helper,
		"ANTHROPIC_API_KEY=canary-123", "BEIGE_SANDBOX_INSTANCE=e2e-"+dockertest.Suffix())
	t.Cleanup(func() { dockertest.RemoveContainer(t, e.agent) })
	return e
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (e *e2e) url(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", e.port, path) }

// start runs `beige gateway start --foreground` and waits for /api/health.
func (e *e2e) start() *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(e.bin, "gateway", "start", "--foreground")
	cmd.Env = e.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if e.t.Failed() {
			e.t.Logf("gateway output:\n%s", out.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(e.url("/api/health"))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return cmd
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("gateway not healthy within 60 s:\n%s", out.String())
	return nil
}

func (e *e2e) exec(command string) (string, error) {
	body := fmt.Sprintf(`{"tool":"exec","params":{"command":%q}}`, command)
	resp, err := http.Post(e.url("/api/agents/"+e.agent+"/exec"), "application/json", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var res struct {
		Content []struct{ Text string }
		IsError bool
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || resp.StatusCode != 200 || len(res.Content) == 0 {
		return "", fmt.Errorf("exec %q: status %d, %v", command, resp.StatusCode, err)
	}
	return res.Content[0].Text, nil
}

func (e *e2e) containerID() string {
	e.t.Helper()
	c := dockertest.RequireDocker(e.t)
	res, err := c.ContainerInspect(context.Background(), docker.ContainerName(e.agent), client.ContainerInspectOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Container.ID
}

// TestRestartReattaches: a gateway killed with SIGKILL and started again
// re-attaches to the same container and serves exec at once.
func TestRestartReattaches(t *testing.T) {
	e := newE2E(t)
	gw := e.start()
	if out, err := e.exec("echo one > /workspace/marker; env; cat /proc/1/environ"); err != nil || strings.Contains(out, "canary") {
		t.Fatalf("%q %v", out, err)
	}
	id := e.containerID()
	gw.Process.Signal(syscall.SIGKILL)
	gw.Wait()

	e.start()
	healthy := time.Now()
	out, err := e.exec("cat /workspace/marker")
	if err != nil || !strings.Contains(out, "one") {
		t.Fatalf("exec after restart: %q %v", out, err)
	}
	if d := time.Since(healthy); d > time.Second {
		t.Errorf("first exec after restart took %v", d)
	}
	if got := e.containerID(); got != id {
		t.Errorf("container recreated: %s -> %s", id, got)
	}
}

// TestSigtermStopsPromptly: SIGTERM drains and exits well within a second
// when nothing is in flight, leaving the sandbox running for the next start.
func TestSigtermStopsPromptly(t *testing.T) {
	e := newE2E(t)
	gw := e.start()
	if _, err := e.exec("true"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	gw.Process.Signal(syscall.SIGTERM)
	err := gw.Wait()
	if d := time.Since(start); d > time.Second {
		t.Errorf("SIGTERM -> exit took %v", d)
	}
	if err != nil {
		t.Errorf("exit: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.home, "gateway.pid")); !os.IsNotExist(err) {
		t.Error("pid file left behind")
	}
	e.containerID() // still there
}

// TestSessionSurvivesSigkill: after a SIGKILL and a restart, the next
// prompt on the same session key carries the earlier history.
func TestSessionSurvivesSigkill(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	e := newE2EWith(t, fmt.Sprintf(`scripted: { api: "anthropic-messages", baseUrl: %q, apiKey: "${ANTHROPIC_API_KEY}" }`, srv.URL()), `{ provider: "scripted", model: "test-model" }`)
	gw := e.start()
	srv.Enqueue(llmtest.Text("noted: the password is swordfish"))
	if out := e.prompt(t, "remember: the password is swordfish"); out != "noted: the password is swordfish" {
		t.Fatalf("first prompt: %q", out)
	}
	gw.Process.Signal(syscall.SIGKILL)
	gw.Wait()
	e.start()
	srv.Enqueue(llmtest.Text("it is swordfish"))
	if out := e.prompt(t, "what is the password?"); out != "it is swordfish" {
		t.Fatalf("second prompt: %q", out)
	}
	if all := srv.Last().AllText(); !strings.Contains(all, "remember: the password is swordfish") || !strings.Contains(all, "noted: the password is swordfish") {
		t.Errorf("the model did not see the earlier history: %s", all)
	}
	if srv.Last().APIKey() != "canary-123" {
		t.Errorf("the provider got key %q", srv.Last().APIKey())
	}
	assertNoSecret(t, e.home, "canary-123")
}

func (e *e2e) prompt(t *testing.T, message string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"message": message, "sessionKey": "api:" + e.agent + ":default"})
	resp, err := http.Post(e.url("/api/agents/"+e.agent+"/prompt"), "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Response, Error string }
	json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != 200 {
		t.Fatalf("prompt: %d %s", resp.StatusCode, out.Error)
	}
	return out.Response
}

// TestGracefulRestart: 20 prompts in flight (about a second each) and a
// restart: the restart drains them (3 s at most), so each one is answered,
// the gateway is healthy again within 5 s, and a config change made before
// the restart is in effect. A config that no longer validates leaves the
// gateway running and says why.
func TestGracefulRestart(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	// The delay is per stream event: about a second per answer in all.
	srv.SetDefault(llmtest.Text("answer").WithDelay(150 * time.Millisecond))
	e := newE2EWith(t, fmt.Sprintf(`scripted: { api: "anthropic-messages", baseUrl: %q, apiKey: "${ANTHROPIC_API_KEY}" }`, srv.URL()), `{ provider: "scripted", model: "test-model" }`)
	e.start()

	type outcome struct {
		code int
		body string
	}
	results := make(chan outcome, 20)
	for i := range 20 {
		go func() {
			body := fmt.Sprintf(`{"message": "prompt %d", "sessionKey": "api:restart-%d"}`, i, i)
			resp, err := http.Post(e.url("/api/agents/"+e.agent+"/prompt"), "application/json", strings.NewReader(body))
			if err != nil {
				results <- outcome{0, err.Error()}
				return
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			results <- outcome{resp.StatusCode, string(data)}
		}()
	}
	if !srv.WaitInFlight(20, 10*time.Second) {
		t.Fatalf("only %d prompts reached the model", srv.InFlight())
	}

	// A config change, then the restart.
	cfgPath := filepath.Join(e.home, "config.json5")
	cfg := string(mustReadFile(t, cfgPath))
	os.WriteFile(cfgPath, []byte(strings.Replace(cfg, `model: "test-model"`, `model: "test-model-2"`, 1)), 0o600)
	resp, err := http.Post(e.url("/api/gateway/restart"), "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 202 || !strings.Contains(string(data), `"status":"restarting"`) {
		t.Fatalf("restart: %d %s", resp.StatusCode, data)
	}
	restarted := time.Now()
	for range 20 {
		if o := <-results; o.code != 200 || !strings.Contains(o.body, `"response":"answer"`) {
			t.Errorf("a prompt in flight at the restart ended with %d %s", o.code, o.body)
		}
	}
	if n := srv.Cancelled(); n != 0 {
		t.Errorf("%d model calls were cut off by the restart", n)
	}
	if !e.waitHealthy(5 * time.Second) {
		t.Fatal("not healthy within 5 s of the restart")
	}
	if d := time.Since(restarted); d > 5*time.Second {
		t.Errorf("healthy %v after the restart", d)
	}
	var agents struct {
		Agents []struct{ Model struct{ Model string } }
	}
	getJSON(t, e.url("/api/agents"), &agents)
	if len(agents.Agents) != 1 || agents.Agents[0].Model.Model != "test-model-2" {
		t.Errorf("the config change is not in effect: %+v", agents)
	}

	// A broken config: the gateway stays up on the old one and says why.
	os.WriteFile(cfgPath, []byte(strings.Replace(cfg, `agents:`, `agentz:`, 1)), 0o600)
	resp, err = http.Post(e.url("/api/gateway/restart"), "application/json", nil)
	if err != nil || resp.StatusCode != 202 {
		t.Fatalf("restart: %v", err)
	}
	resp.Body.Close()
	var health struct{ Status, Config string }
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && health.Config == "" {
		time.Sleep(50 * time.Millisecond)
		getJSON(t, e.url("/api/health"), &health)
	}
	if health.Status != "ok" || !strings.Contains(health.Config, "agentz") {
		t.Errorf("health after a broken reload: %+v", health)
	}
}

// TestRestartOntoTakenPort: the config moves the gateway to a port another
// program holds; `beige gateway restart` fails and says why, the gateway
// keeps serving on its port (a prompt in flight is answered), and
// gateway.log says the restart was refused.
func TestRestartOntoTakenPort(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.SetDefault(llmtest.Text("answer").WithDelay(150 * time.Millisecond))
	e := newE2EWith(t, fmt.Sprintf(`scripted: { api: "anthropic-messages", baseUrl: %q, apiKey: "${ANTHROPIC_API_KEY}" }`, srv.URL()), `{ provider: "scripted", model: "test-model" }`)
	e.start()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	inFlight := make(chan string, 1)
	go func() {
		resp, err := http.Post(e.url("/api/agents/"+e.agent+"/prompt"), "application/json", strings.NewReader(`{"message": "hi"}`))
		if err != nil {
			inFlight <- err.Error()
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		inFlight <- fmt.Sprint(resp.StatusCode, " ", string(data))
	}()
	if !srv.WaitInFlight(1, 10*time.Second) {
		t.Fatal("the prompt did not reach the model")
	}
	cfgPath := filepath.Join(e.home, "config.json5")
	cfg := string(mustReadFile(t, cfgPath))
	os.WriteFile(cfgPath, []byte(strings.Replace(cfg, fmt.Sprintf("port: %d", e.port), fmt.Sprintf("port: %d", taken.Addr().(*net.TCPAddr).Port), 1)), 0o600)
	// The CLI reads the new port from the config: -g points it at the gateway.
	cmd := exec.Command(e.bin, "-g", e.url(""), "gateway", "restart", "--timeout", "10")
	cmd.Env = e.env
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "in use") {
		t.Errorf("gateway restart onto a taken port: %v %s", err, out)
	}
	if o := <-inFlight; !strings.HasPrefix(o, "200 ") || !strings.Contains(o, `"response":"answer"`) {
		t.Errorf("the prompt in flight ended with %s", o)
	}
	var health struct{ Status, Config string }
	getJSON(t, e.url("/api/health"), &health)
	if health.Status != "ok" || !strings.Contains(health.Config, "in use") {
		t.Errorf("health after a restart onto a taken port: %+v", health)
	}
	log := string(mustReadFile(t, filepath.Join(e.home, "logs", "gateway.log")))
	if !strings.Contains(log, "restart refused") || !strings.Contains(log, "in use") {
		t.Errorf("gateway.log does not say the restart was refused:\n%s", log)
	}
}

func (e *e2e) waitHealthy(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		resp, err := http.Get(e.url("/api/health"))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(v)
}

func mustReadFile(t *testing.T, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestDaemon: from a fresh $BEIGE_HOME, `beige gateway start` detaches and
// waits for health, `status` describes it, `logs` shows its log, `stop`
// stops it; `status` then says it does not run.
func TestDaemon(t *testing.T) {
	dockertest.RequireDocker(t)
	bin := dockertest.StaticBinary(t, "./cmd/beige")
	home := filepath.Join(t.TempDir(), "fresh-home")
	port := freePort(t)
	env := append(os.Environ(), "BEIGE_HOME="+home, "BEIGE_SANDBOX_BINARY="+dockertest.HelperBinary(t),
		"ANTHROPIC_API_KEY=canary-123", "BEIGE_SANDBOX_INSTANCE=daemon-"+dockertest.Suffix())
	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	if out, code := run("setup"); code != 0 || !strings.Contains(out, "created") {
		t.Fatalf("setup: %d %s", code, out)
	}
	// Point the template at the test image and a free port; give the agent a unique name.
	agent := "daemon-" + dockertest.Suffix()
	cfgPath := filepath.Join(home, "config.json5")
	cfg := strings.NewReplacer("beige-sandbox:latest", dockertest.Image(t), "port: 7433", fmt.Sprintf("port: %d", port), "assistant:", fmt.Sprintf("%q:", agent)).Replace(string(mustReadFile(t, cfgPath)))
	os.WriteFile(cfgPath, []byte(cfg), 0o600)
	t.Cleanup(func() { dockertest.RemoveContainer(t, agent) })

	out, code := run("gateway", "start", "--timeout", "60")
	t.Cleanup(func() { run("gateway", "stop") })
	if code != 0 || !strings.Contains(out, "gateway started") || !strings.Contains(out, filepath.Join(home, "logs", "gateway.log")) {
		t.Fatalf("start: %d %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(home, "gateway.pid")); err != nil {
		t.Error("no pid file")
	}
	if out, code := run("gateway", "start"); code == 0 || !strings.Contains(out, "already runs") {
		t.Errorf("second start: %d %s", code, out)
	}
	if out, code := run("gateway", "status"); code != 0 || !strings.Contains(out, "running, pid") || !strings.Contains(out, agent) || !strings.Contains(out, "sandbox ready") {
		t.Errorf("status: %d %s", code, out)
	}
	if out, code := run("gateway", "logs", "-n", "50"); code != 0 || !strings.Contains(out, "gateway ready") {
		t.Errorf("logs: %d %s", code, out)
	}
	if out, code := run("gateway", "stop"); code != 0 || !strings.Contains(out, "gateway stopped") {
		t.Errorf("stop: %d %s", code, out)
	}
	if out, code := run("gateway", "status"); code != 3 || !strings.Contains(out, "not running") {
		t.Errorf("status after stop: %d %s", code, out)
	}
	assertNoSecret(t, home, "canary-123")
}

// assertNoSecret checks that no file of the home (the logs, the audit log,
// sessions, settings) holds secret.
func assertNoSecret(t *testing.T, home, secret string) {
	t.Helper()
	filepath.Walk(home, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			if data, _ := os.ReadFile(p); strings.Contains(string(data), secret) {
				t.Errorf("%s holds the API key", p)
			}
		}
		return nil
	})
}
