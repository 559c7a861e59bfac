package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm/llmtest"
	"github.com/beige-dev/beige/internal/sandbox/docker/dockertest"
)

// BenchmarkChatStream measures the LLM proxy, side by side in one run:
// the time to the first byte of a stream straight from the loopback
// provider and through POST /api/chat/stream (the difference is what the
// gateway adds); then 1,000 concurrent streams, which must all complete;
// and the gateway's peak RSS. The gateway is the real beige binary, run as
// its own process, so that its RSS is its own.
//
//	go test -run '^$' -bench ChatStream -benchtime 1x ./internal/gateway
//
// (Not under -race: the race detector caps live goroutines below what
// 1,000 concurrent streams need.)
func BenchmarkChatStream(b *testing.B) {
	srv := llmtest.NewAnthropic(b)
	srv.SetDefault(llmtest.Text("a short answer for the benchmark"))
	gw := startGatewayProcess(b, srv)

	body := fmt.Sprintf(`{"provider":"p","modelId":"m","context":{"messages":[{"role":"user","content":"Hello!"}]},"agentName":%q}`, gw.agent)
	direct := `{"model":"m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"Hello!"}]}`
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2000}}
	ttfb := func(url, body string, hdr map[string]string) time.Duration {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			data, _ := io.ReadAll(resp.Body)
			b.Fatalf("%s: %d %s", url, resp.StatusCode, data)
		}
		r := bufio.NewReader(resp.Body)
		if _, err := r.ReadByte(); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		io.Copy(io.Discard, r)
		return d
	}
	anthropic := map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}
	var viaDirect, viaGateway []time.Duration
	for i := 0; i < 200; i++ {
		viaDirect = append(viaDirect, ttfb(srv.URL()+"/v1/messages", direct, anthropic))
		viaGateway = append(viaGateway, ttfb(gw.url+"/api/chat/stream", body, nil))
	}
	p50 := func(ds []time.Duration) time.Duration { s := slices.Clone(ds); slices.Sort(s); return s[len(s)/2] }
	b.ReportMetric(float64(p50(viaDirect).Microseconds()), "direct-ttfb-p50-µs")
	b.ReportMetric(float64(p50(viaGateway).Microseconds()), "gateway-ttfb-p50-µs")
	b.ReportMetric(float64((p50(viaGateway) - p50(viaDirect)).Microseconds()), "added-ttfb-p50-µs")

	// 1,000 concurrent streams.
	const n = 1000
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	start := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Post(gw.url+"/api/chat/stream", "application/json", strings.NewReader(body))
			ok := err == nil && resp.StatusCode == 200
			if ok {
				data, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				ok = strings.Contains(string(data), `"type":"done"`)
			}
			if !ok {
				mu.Lock()
				failed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failed > 0 {
		b.Fatalf("%d of %d concurrent streams failed", failed, n)
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "1000-streams-ms")
	b.ReportMetric(float64(procStatusKB(b, gw.cmd.Process.Pid, "VmHWM"))/1024, "gateway-peak-rss-MB")
}

type gatewayProcess struct {
	cmd   *exec.Cmd
	url   string
	agent string
}

// startGatewayProcess runs `beige gateway start --foreground` on a config
// whose one agent, bench, uses srv as its provider.
func startGatewayProcess(b *testing.B, srv *llmtest.Server) *gatewayProcess {
	b.Helper()
	bin := dockertest.StaticBinary(b, "./cmd/beige")
	helper := dockertest.HelperBinary(b)
	image := dockertest.Image(b)
	home := b.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	agent := "bench-" + dockertest.Suffix()
	cfg := fmt.Sprintf(`{ llm: { providers: { p: { api: "anthropic-messages", baseUrl: %q, apiKey: "k" } } },
  agents: { bench: { model: { provider: "p", model: "m" }, sandbox: { image: %q } } },
  gateway: { port: %d } }`, srv.URL(), image, port)
	cfg = strings.Replace(cfg, "bench:", fmt.Sprintf("%q:", agent), 1)
	os.WriteFile(filepath.Join(home, "config.json5"), []byte(cfg), 0o600)
	b.Cleanup(func() { dockertest.RemoveContainer(b, agent) })
	cmd := exec.Command(bin, "gateway", "start", "--foreground", "--log-level", "warn")
	cmd.Env = append(os.Environ(), "BEIGE_HOME="+home, "BEIGE_SANDBOX_BINARY="+helper, "BEIGE_SANDBOX_INSTANCE=bench-"+dockertest.Suffix())
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	gw := &gatewayProcess{cmd: cmd, url: fmt.Sprintf("http://127.0.0.1:%d", port)}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(gw.url + "/api/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				gw.agent = agent
				return gw
			}
		}
	}
	b.Fatal("the gateway did not become healthy")
	return nil
}

// procStatusKB reads a "kB" field of /proc/<pid>/status.
func procStatusKB(b *testing.B, pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}
