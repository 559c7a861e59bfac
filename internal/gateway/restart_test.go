package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/testutil"
)

// runningGateway is a gateway served by Run, as `beige gateway start` does,
// on a port of its own (restarts need a fixed address).
type runningGateway struct {
	*testGateway
	url  string
	log  *testutil.SyncBuffer
	done chan error
}

// runGatewayWith runs a test gateway with Run; reload is its Options.Reload
// (nil: a restart keeps the config).
func runGatewayWith(t *testing.T, s gatewaySetup, reload func(old *config.Config) (*config.Config, error)) *runningGateway {
	t.Helper()
	tg := setUpGateway(t, s)
	rg := &runningGateway{testGateway: tg, log: &testutil.SyncBuffer{}, done: make(chan error, 1)}
	tg.opts.Addr = ""
	tg.opts.Config.Gateway.Host = "127.0.0.1"
	tg.opts.Config.Gateway.Port = freePort(t)
	tg.opts.Logger = slog.New(slog.NewTextHandler(rg.log, nil))
	if reload != nil {
		old := tg.opts.Config
		tg.opts.Reload = func() (*config.Config, error) { return reload(old) }
	}
	rg.url = fmt.Sprintf("http://127.0.0.1:%d", tg.opts.Config.Gateway.Port)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { rg.done <- Run(ctx, tg.opts) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-rg.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return within 30 s of its context's end")
		}
		if t.Failed() {
			t.Logf("gateway log:\n%s", rg.log.String())
		}
	})
	if !rg.waitHealthy(t, 60*time.Second) {
		t.Fatalf("not healthy within 60 s:\n%s", rg.log.String())
	}
	return rg
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// health reads /api/health; code 0 when the gateway does not answer.
func (rg *runningGateway) health() (int, proto.Health) {
	var h proto.Health
	resp, err := http.Get(rg.url + "/api/health")
	if err != nil {
		return 0, h
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(&h)
	return resp.StatusCode, h
}

func (rg *runningGateway) waitHealthy(t *testing.T, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if code, _ := rg.health(); code == 200 {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func (rg *runningGateway) restart(t *testing.T) {
	t.Helper()
	resp, err := http.Post(rg.url+"/api/gateway/restart", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("restart: %d", resp.StatusCode)
	}
}

type promptOutcome struct {
	code int
	body string
}

// prompts sends n prompts at once, on sessions of their own; their outcomes
// arrive on the channel.
func (rg *runningGateway) prompts(n int) <-chan promptOutcome {
	out := make(chan promptOutcome, n)
	for i := range n {
		go func() {
			body := fmt.Sprintf(`{"message": "prompt %d", "sessionKey": "api:restart-%d"}`, i, i)
			resp, err := http.Post(rg.url+"/api/agents/"+rg.agents[0]+"/prompt", "application/json", strings.NewReader(body))
			if err != nil {
				out <- promptOutcome{0, err.Error()}
				return
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			out <- promptOutcome{resp.StatusCode, string(data)}
		}()
	}
	return out
}

func scriptedSetup(srv *llmtest.Server, name string) gatewaySetup {
	return gatewaySetup{
		names:     []string{name},
		providers: fmt.Sprintf("scripted: { api: 'anthropic-messages', baseUrl: %q, apiKey: 'k' }", srv.URL()),
		model:     "{ provider: 'scripted', model: 'test-model' }",
	}
}

// TestRestartDrainsInFlightPrompts: 20 prompts are in flight (each takes
// about a second) when a restart is asked for; the restart waits for them
// (RestartDrainTimeout, default 3 s), so every one is answered, and the
// gateway serves again.
func TestRestartDrainsInFlightPrompts(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.SetDefault(llmtest.Text("answer").WithDelay(150 * time.Millisecond))
	rg := runGatewayWith(t, scriptedSetup(srv, "drain"), nil)

	results := rg.prompts(20)
	if !srv.WaitInFlight(20, 20*time.Second) {
		t.Fatalf("only %d prompts reached the model", srv.InFlight())
	}
	rg.restart(t)
	for range 20 {
		o := <-results
		if o.code != 200 || !strings.Contains(o.body, `"response":"answer"`) {
			t.Errorf("a prompt in flight at the restart ended with %d %s", o.code, o.body)
		}
	}
	if n := srv.Cancelled(); n != 0 {
		t.Errorf("%d model calls were cut off by the restart", n)
	}
	// Health may still answer from the old gateway while it drains: wait
	// for the restart itself to be logged, then for health.
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(rg.log.String(), "msg=restarted"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no restart in the log within 20 s")
		}
	}
	if !rg.waitHealthy(t, 10*time.Second) {
		t.Fatal("not healthy again within 10 s of the restart")
	}
}

// TestRestartOntoTakenPortKeepsServing: the reloaded config moves the
// gateway to a port another program holds. The restart is refused before
// anything stops: a prompt in flight is answered, the gateway keeps
// serving on its port, and /api/health and the log say why.
func TestRestartOntoTakenPortKeepsServing(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	srv := llmtest.NewAnthropic(t)
	srv.SetDefault(llmtest.Text("answer").WithDelay(150 * time.Millisecond))
	rg := runGatewayWith(t, scriptedSetup(srv, "port"), func(old *config.Config) (*config.Config, error) {
		c := *old
		c.Gateway.Port = taken.Addr().(*net.TCPAddr).Port
		return &c, nil
	})

	results := rg.prompts(1)
	if !srv.WaitInFlight(1, 20*time.Second) {
		t.Fatal("the prompt did not reach the model")
	}
	rg.restart(t)
	var h proto.Health
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && h.Config == "" {
		time.Sleep(20 * time.Millisecond)
		_, h = rg.health()
	}
	if h.Status != "ok" || !strings.Contains(h.Config, "in use") {
		t.Errorf("health after a restart onto a taken port: %+v", h)
	}
	if o := <-results; o.code != 200 || !strings.Contains(o.body, `"response":"answer"`) {
		t.Errorf("the prompt in flight ended with %d %s", o.code, o.body)
	}
	if log := rg.log.String(); !strings.Contains(log, "restart refused") || !strings.Contains(log, "in use") || strings.Contains(log, "gateway stopped") {
		t.Errorf("the log does not say the restart was refused, or the gateway stopped:\n%s", log)
	}
	// Still serving, on the old port.
	if o := <-rg.prompts(1); o.code != 200 {
		t.Errorf("a prompt after the refused restart: %d %s", o.code, o.body)
	}
}

// TestRestartFallsBackWhenTheNewConfigFails: the reloaded config validates
// but does not start (a provider that cannot be built); the gateway starts
// again on the config that ran, serves, and says why in /api/health and
// the log (it once panicked here, on a nil error).
func TestRestartFallsBackWhenTheNewConfigFails(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.SetDefault(llmtest.Text("answer"))
	rg := runGatewayWith(t, scriptedSetup(srv, "fallback"), func(old *config.Config) (*config.Config, error) {
		c := *old
		c.LLM.Providers = map[string]*config.Provider{"broken": {API: "google-generative-ai", BaseURL: "ftp://nowhere"}}
		return &c, nil
	})
	rg.restart(t)
	var h proto.Health
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && h.Config == "" {
		time.Sleep(20 * time.Millisecond)
		_, h = rg.health()
	}
	if h.Status != "ok" || !strings.Contains(h.Config, `provider "broken"`) {
		t.Fatalf("health after a new config that failed to start: %+v", h)
	}
	if n := strings.Count(h.Config, `provider "broken"`); n != 1 {
		t.Errorf("the provider is named %d times: %s", n, h.Config)
	}
	if o := <-rg.prompts(1); o.code != 200 || !strings.Contains(o.body, `"response":"answer"`) {
		t.Errorf("a prompt on the old config: %d %s", o.code, o.body)
	}
	if log := rg.log.String(); !strings.Contains(log, "the new config did not start") {
		t.Errorf("the log does not say the new config failed:\n%s", log)
	}
}

// TestProviderErrorNamesTheProviderOnce: a provider that cannot be built is
// named once in the error, not `provider "x": provider "x": …`.
func TestProviderErrorNamesTheProviderOnce(t *testing.T) {
	for _, api := range []string{"anthropic-messages", "openai-completions", "google-generative-ai"} {
		g := &Gateway{cfg: &config.Config{LLM: config.LLM{Providers: map[string]*config.Provider{
			"google": {API: api, BaseURL: "ftp://nowhere"},
		}}}}
		err := g.openLLM()
		if err == nil || strings.Count(err.Error(), `provider "google"`) != 1 || !strings.Contains(err.Error(), "ftp://nowhere") {
			t.Errorf("%s: %v", api, err)
		}
	}
}

// OnListen reports the API's address at start and again after a restart
// moves it to the reloaded config's port (the CLI records it in
// gateway.addr, so that status and restart find the gateway there).
func TestOnListenFollowsARestartOntoANewPort(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	newPort := freePort(t)
	addrs := make(chan string, 4)
	s := scriptedSetup(srv, "moves")
	s.options = func(o *Options) { o.OnListen = func(addr string) { addrs <- addr } }
	rg := runGatewayWith(t, s, func(old *config.Config) (*config.Config, error) {
		c := *old
		c.Gateway.Port = newPort
		return &c, nil
	})
	if got := <-addrs; "http://"+got != rg.url {
		t.Errorf("OnListen at start: %q, want %s", got, rg.url)
	}
	rg.restart(t)
	select {
	case got := <-addrs:
		if want := fmt.Sprintf("127.0.0.1:%d", newPort); got != want {
			t.Errorf("OnListen after the restart: %q, want %q", got, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("OnListen was not called after the restart")
	}
	rg.url = fmt.Sprintf("http://127.0.0.1:%d", newPort)
	if !rg.waitHealthy(t, 60*time.Second) {
		t.Fatal("not healthy on the new port")
	}
}
