package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/beige-dev/beige/internal/sandbox"
	"github.com/beige-dev/beige/internal/sandbox/docker"
	"github.com/beige-dev/beige/internal/sandbox/docker/dockertest"
)

// A sandbox killed, stopped or removed behind the gateway's back is
// started or recreated by the next call, which succeeds: within 2 s after a
// kill or a stop, or, when the shared engine is slow, within 1 s more than
// the engine itself takes to start the container (measured after each
// fault); after a removal within twice that.
func TestSandboxRecoversFromFaults(t *testing.T) {
	g := startDockerGateway(t, "phoenix")
	a := g.agents[0]
	c := dockertest.RequireDocker(t)
	name := docker.ContainerName(a)
	if text, isErr := g.tool(t, a, "exec", map[string]any{"command": "echo up"}); isErr || !strings.Contains(text, "up") {
		t.Fatalf("first call: %q", text)
	}
	ctx := context.Background()
	waitStopped := func() {
		for range 100 { // the engine has acted on it
			info, err := c.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
			if err != nil || !info.Container.State.Running {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// engineStart is how long the engine takes to start the killed container.
	engineStart := func() time.Duration {
		if _, err := c.ContainerKill(ctx, name, client.ContainerKillOptions{}); err != nil {
			t.Fatal(err)
		}
		waitStopped()
		start := time.Now()
		if _, err := c.ContainerStart(ctx, name, client.ContainerStartOptions{}); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	for _, fault := range []struct {
		name   string
		do     func() error
		limit  time.Duration
		starts time.Duration // how many engine starts the recovery may take
	}{
		{"docker kill", func() error { _, err := c.ContainerKill(ctx, name, client.ContainerKillOptions{}); return err }, 2 * time.Second, 1},
		{"docker stop", func() error {
			timeout := 1
			_, err := c.ContainerStop(ctx, name, client.ContainerStopOptions{Timeout: &timeout})
			return err
		}, 2 * time.Second, 1},
		{"docker rm -f", func() error {
			_, err := c.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true})
			return err
		}, 2 * time.Second, 2},
	} {
		if err := fault.do(); err != nil {
			t.Fatalf("%s: %v", fault.name, err)
		}
		waitStopped()
		start := time.Now()
		text, isErr := g.tool(t, a, "exec", map[string]any{"command": "echo back"})
		took := time.Since(start)
		if isErr || !strings.Contains(text, "back") {
			t.Errorf("after %s: the next call failed: %q", fault.name, text)
		}
		if h := g.Health(ctx); h.Status != "ok" {
			t.Errorf("after %s: health %+v", fault.name, h)
		}
		engine := engineStart()
		limit := max(fault.limit, fault.starts*engine+time.Second)
		if took > limit {
			t.Errorf("after %s: the next call took %v, want at most %v (the engine starts the container in %v)", fault.name, took, limit, engine)
		} else {
			t.Logf("after %s: the next call took %v (the engine starts the container in %v)", fault.name, took, engine)
		}
	}
}

// downEngine is a runtime whose engine does not answer.
type downEngine struct{ sandbox.Runtime }

func (downEngine) Ping(context.Context) error {
	return errors.New("cannot connect to the Docker daemon")
}

// An engine that is down makes the health degraded, with the reason, even
// for an agent whose sandbox was ready.
func TestHealthEngineDown(t *testing.T) {
	g := startGateway(t, "lonely")
	ctx := context.Background()
	if h := g.Health(ctx); h.Status != "ok" {
		t.Fatalf("health = %+v", h)
	}
	rt := g.runtime
	g.runtime = downEngine{rt}
	h := g.Health(ctx)
	g.runtime = rt
	if h.Status != "degraded" || !strings.Contains(h.Agents[g.agents[0]], "sandbox engine: cannot connect to the Docker daemon") {
		t.Errorf("health with the engine down = %+v", h)
	}
}

// The gateway's recovery without an engine: a sandbox killed or removed
// behind the gateway's back is started or recreated by the next call,
// which succeeds on the same workspace; while it cannot be started, calls
// fail saying why, and so does /api/health, until it can.
func TestSandboxRecoveryInMemory(t *testing.T) {
	g := startGateway(t, "phoenix")
	a := g.agents[0]
	ctx := context.Background()
	if _, isErr := g.tool(t, a, "write", map[string]any{"path": "keep.txt", "content": "kept"}); isErr {
		t.Fatal("write failed")
	}
	first := g.mem.Sandbox(a).ID()
	for _, fault := range []struct {
		name string
		do   func(string) error
	}{{"kill", g.mem.Kill}, {"remove", g.mem.Remove}} {
		if err := fault.do(a); err != nil {
			t.Fatal(err)
		}
		if text, isErr := g.tool(t, a, "exec", map[string]any{"command": "cat keep.txt"}); isErr || !strings.Contains(text, "kept") {
			t.Errorf("after %s: the next call: %v %q", fault.name, isErr, text)
		}
		if h := g.Health(ctx); h.Status != "ok" {
			t.Errorf("after %s: health %+v", fault.name, h)
		}
	}
	if g.mem.Sandbox(a).ID() == first {
		t.Error("a removed sandbox was not recreated")
	}

	g.mem.SetEnsureError(errors.New("no space left on device"))
	g.mem.Kill(a)
	code, out := g.post(t, "/api/agents/"+a+"/exec", `{"tool":"exec","params":{"command":"echo up"}}`)
	if code == 200 && out["isError"] != true || !strings.Contains(fmt.Sprint(out), "no space left on device") {
		t.Errorf("a call while the sandbox cannot start: %d %v", code, out)
	}
	if h := g.Health(ctx); h.Status != "degraded" || !strings.Contains(h.Agents[a], "no space left on device") {
		t.Errorf("health while the sandbox cannot start: %+v", h)
	}
	g.mem.SetEnsureError(nil)
	if text, isErr := g.tool(t, a, "exec", map[string]any{"command": "echo up"}); isErr || !strings.Contains(text, "up") {
		t.Errorf("once the sandbox can start: %v %q", isErr, text)
	}
	if h := g.Health(ctx); h.Status != "ok" {
		t.Errorf("health once the sandbox runs: %+v", h)
	}
}
