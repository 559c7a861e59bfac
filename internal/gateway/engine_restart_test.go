package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/sandbox/docker"
	"github.com/beige-dev/beige/internal/sandbox/docker/dockertest"
	"github.com/beige-dev/beige/internal/testutil"
)

// After the Docker engine restarts (its containers die with it), the next
// call recreates or restarts the agent's sandbox, with a log line saying
// why, and succeeds within 5 s of the engine answering again; while it is
// down, health is degraded naming the engine and calls fail promptly with
// a clear error. The engine is a private dockerd the test starts; the
// machine's engine is never touched.
func TestGatewayRecoversFromEngineRestart(t *testing.T) {
	eng := dockertest.StartEngine(t)
	image := eng.Image()
	t.Setenv("DOCKER_HOST", eng.Host) // docker.New reads it

	h := home.Home{Dir: t.TempDir()}
	if _, err := h.Setup(); err != nil {
		t.Fatal(err)
	}
	agent := "phoenix-" + dockertest.Suffix()
	text := fmt.Sprintf("{ llm: { providers: { anthropic: { apiKey: 'k' } } }, agents: { %q: { model: { provider: 'anthropic', model: 'm' }, sandbox: { image: %q } } } }", agent, image)
	path := filepath.Join(h.Dir, "config.json5")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, &config.LoadOptions{Builtins: plugin.Builtins()})
	if err != nil {
		t.Fatal(err)
	}
	var logs testutil.SyncBuffer
	rt, err := docker.New(docker.Options{Instance: "test-" + dockertest.Suffix()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	g, err := Start(context.Background(), Options{
		Home:         h,
		Config:       cfg,
		HelperBinary: dockertest.HelperBinary(t),
		Runtime:      rt,
		Addr:         "127.0.0.1:0",
		Logger:       slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Shutdown(context.Background()) })

	hc := &http.Client{Timeout: 20 * time.Second}
	// exec runs echo through the API; it reports the HTTP status, whether
	// the tool failed, and the text of the result or error.
	exec := func(word string) (code int, ok bool, text string) {
		t.Helper()
		body := fmt.Sprintf(`{"tool":"exec","params":{"command":"echo %s"}}`, word)
		resp, err := hc.Post(g.URL()+"/api/agents/"+agent+"/exec", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("exec: %v", err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return resp.StatusCode, false, string(data)
		}
		var res proto.ToolResult
		if err := json.Unmarshal(data, &res); err != nil {
			t.Fatalf("exec: not a tool result: %s", data)
		}
		return resp.StatusCode, !res.IsError && strings.Contains(res.Text(), word), res.Text()
	}
	health := func() (int, proto.Health) {
		t.Helper()
		resp, err := hc.Get(g.URL() + "/api/health")
		if err != nil {
			t.Fatalf("health: %v", err)
		}
		defer resp.Body.Close()
		var h proto.Health
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			t.Fatalf("health: %v", err)
		}
		return resp.StatusCode, h
	}

	if code, ok, text := exec("up"); !ok {
		t.Fatalf("first call: %d %q", code, text)
	}
	if code, h := health(); code != http.StatusOK || h.Status != "ok" {
		t.Fatalf("health before the restart: %d %+v", code, h)
	}

	for _, fault := range []struct {
		name string
		do   func()
		// dead: the containers die with the engine, so calls fail while it
		// is down. After a crash (SIGKILL) they may run on in their shims,
		// and a call may still reach the in-sandbox helper.
		dead bool
	}{
		{"engine stopped (SIGTERM)", eng.Stop, true},
		{"engine crashed (SIGKILL)", eng.Kill, false},
	} {
		fault.do()

		// Down: health is degraded and says it is the engine; a call does
		// not hang, and fails with an error that says so.
		if code, h := health(); code != http.StatusServiceUnavailable || h.Status != "degraded" || !strings.Contains(h.Agents[agent], "sandbox engine") {
			t.Errorf("%s: health with the engine down: %d %+v", fault.name, code, h)
		}
		start := time.Now()
		code, ok, text := exec("down")
		took := time.Since(start)
		if ok && fault.dead {
			t.Errorf("%s: a call with the engine down succeeded: %q", fault.name, text)
		}
		if !ok && !strings.Contains(strings.ToLower(text), "connect to the docker") {
			t.Errorf("%s: a call with the engine down: %d %q, want an error naming the sandbox engine", fault.name, code, text)
		}
		if took > 10*time.Second {
			t.Errorf("%s: a call with the engine down took %v, want it to end promptly", fault.name, took)
		}
		t.Logf("%s: a call with the engine down took %v: %d ok=%v %q", fault.name, took.Round(time.Millisecond), code, ok, text)
		if code, h := health(); h.Status != "degraded" {
			t.Errorf("%s: health after a call with the engine down: %d %+v", fault.name, code, h)
		}

		// Back: the very next call restarts the sandbox and succeeds
		// (retries only tell how long it took otherwise).
		answered := eng.Start()
		var recovered time.Duration
		for attempt := 1; ; attempt++ {
			code, ok, text := exec("back")
			if ok {
				recovered = time.Since(answered)
				break
			}
			if attempt == 1 {
				t.Errorf("%s: the first call after the engine answered again failed: %d %q", fault.name, code, text)
			}
			if time.Since(answered) > 10*time.Second {
				t.Fatalf("%s: no call succeeded within 10 s of the engine answering again; last: %d %q\ngateway log:\n%s", fault.name, code, text, logs.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		if recovered > 5*time.Second {
			t.Errorf("%s: the first successful call came %v after the engine answered again, want at most 5 s", fault.name, recovered)
		} else {
			t.Logf("%s: a call succeeded %v after the engine answered again", fault.name, recovered.Round(time.Millisecond))
		}
		if code, h := health(); code != http.StatusOK || h.Status != "ok" {
			t.Errorf("%s: health after the recovery: %d %+v", fault.name, code, h)
		}
	}
	if log := logs.String(); strings.Count(log, "sandbox is not running") < 2 || !strings.Contains(log, agent) {
		t.Errorf("the gateway log does not say, after each restart, why the sandbox was restarted:\n%s", log)
	}
}
