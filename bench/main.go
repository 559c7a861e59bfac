// Command bench measures the gateway's overheads side by side with the
// obvious alternatives, in one run (timings on shared machines are noisy;
// the ratios are what to compare):
//
//   - an exec round trip through the HTTP API (the in-sandbox helper) against
//     `docker exec <container> true`;
//   - a no-op plugin tool called 100 times from inside the sandbox, through
//     its launcher, the tool client and the agent's socket;
//   - start -> /api/health ok, with the sandbox already running and when it
//     must be created; SIGTERM -> exit; the gateway's idle RSS.
//
// Run it from the repository root: go run ./bench [-n 300]. It needs a Docker
// engine and Debian's busybox-static (the image is made from it, offline).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/beige-dev/beige/internal/plugin/nodehost"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const image = "beige-bench:busybox"

func main() {
	n := flag.Int("n", 300, "exec round trips through the API")
	flag.Parse()
	if err := run(*n); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type bench struct {
	dir, bin, home, agent string
	port                  int
	env                   []string
}

func run(n int) error {
	dir, err := os.MkdirTemp("", "beige-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b := &bench{dir: dir, home: filepath.Join(dir, "home"), agent: "bench-" + strconv.Itoa(os.Getpid())}
	fmt.Fprintln(os.Stderr, "building beige and beige-sandbox (static)...")
	for _, pkg := range []string{"cmd/beige", "cmd/beige-sandbox", "bench/toolbench"} {
		// benchplugins builds in the noop tool, which times the bridge alone.
		cmd := exec.Command("go", "build", "-tags", "benchplugins", "-o", filepath.Join(dir, filepath.Base(pkg)), "./"+pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	b.bin = filepath.Join(dir, "beige")
	b.port, err = freePort()
	if err != nil {
		return err
	}
	b.env = append(os.Environ(), "BEIGE_HOME="+b.home, "BEIGE_SANDBOX_BINARY="+filepath.Join(dir, "beige-sandbox"), "ANTHROPIC_API_KEY=unused")
	if out, err := b.beige("sandbox", "build", "--busybox", "-t", image); err != nil {
		return fmt.Errorf("make the image: %v\n%s", err, out)
	}
	if out, err := b.beige("setup"); err != nil {
		return fmt.Errorf("setup: %v\n%s", err, out)
	}
	// Plugin tools: the built-in noop (benchmark builds only), and an
	// external plugin whose command is /bin/true, with a tool the agent may
	// not use.
	ext := filepath.Join(dir, "ext")
	os.MkdirAll(ext, 0o755)
	os.WriteFile(filepath.Join(ext, "plugin.json"), []byte(`{"name": "ext", "description": "Runs true.", "provides": {"tools": ["ext", "ext.denied"]}, "run": {"command": ["/bin/true"]}}`), 0o644)
	// A no-op TypeScript plugin in the original's format, run by the Node
	// plugin host, when a Node.js 22 is at hand ($BEIGE_NODE or PATH).
	tsPlugin, tsTool := "", ""
	if n, err := nodehost.FindNode(context.Background(), ""); err == nil {
		ts := filepath.Join(dir, "tsnoop")
		os.MkdirAll(ts, 0o755)
		os.WriteFile(filepath.Join(ts, "plugin.json"), []byte(`{"name": "tsnoop", "description": "Does nothing.", "provides": {"tools": ["tsnoop"]}}`), 0o644)
		os.WriteFile(filepath.Join(ts, "index.ts"), []byte(`export function createPlugin(config: Record<string, unknown>, ctx: unknown) {
  return { register(r: any): void { r.tool({ name: "tsnoop", description: "Does nothing.", handler: async () => ({ output: "", exitCode: 0 }) }); } };
}
`), 0o644)
		tsPlugin = fmt.Sprintf(", tsnoop: { path: %q, node: %q }", ts, n.Path)
		tsTool = `, "tsnoop"`
	} else {
		fmt.Fprintln(os.Stderr, "no Node.js 22 (scripts/ensure-node22.sh, BEIGE_NODE): the TypeScript plugin row is skipped:", err)
	}
	cfg := fmt.Sprintf(`{ llm: { providers: { anthropic: { apiKey: "${ANTHROPIC_API_KEY}" } } },
  plugins: { noop: {}, ext: { path: %q }%s },
  agents: { %q: { model: { provider: "anthropic", model: "claude-sonnet-4-6" }, tools: ["noop", "ext"%s],
    sandbox: { image: %q, extraMounts: [%q] } } },
  gateway: { port: %d } }`, ext, tsPlugin, b.agent, tsTool, image, filepath.Join(dir, "toolbench")+":/opt/toolbench:ro", b.port)
	if err := os.WriteFile(filepath.Join(b.home, "config.json5"), []byte(cfg), 0o600); err != nil {
		return err
	}
	defer exec.Command("docker", "rm", "-f", "beige-"+b.agent).Run()

	// Cold start: the sandbox must be created.
	exec.Command("docker", "rm", "-f", "beige-"+b.agent).Run()
	gw, cold, err := b.start()
	if err != nil {
		return err
	}
	// Warm up, then the exec round trips, with docker exec interleaved.
	for range 20 {
		if err := b.exec(); err != nil {
			return err
		}
	}
	var api, docker []time.Duration
	for i := range n {
		t0 := time.Now()
		if err := b.exec(); err != nil {
			return err
		}
		api = append(api, time.Since(t0))
		if i%5 == 0 {
			t0 = time.Now()
			if out, err := exec.Command("docker", "exec", "beige-"+b.agent, "true").CombinedOutput(); err != nil {
				return fmt.Errorf("docker exec: %v %s", err, out)
			}
			docker = append(docker, time.Since(t0))
		}
	}
	// Plugin tools from inside the sandbox, beside what any process start
	// costs there.
	inside := map[string]toolTimes{}
	cmds := []string{"/tools/bin/noop", "/tools/bin/ext", "/tools/bin/ext.denied", "/bin/sh -c true"}
	if tsTool != "" {
		cmds = append(cmds, "/tools/bin/tsnoop")
	}
	for _, c := range cmds {
		if inside[c], err = b.toolbench(c); err != nil {
			return err
		}
	}
	time.Sleep(500 * time.Millisecond)
	rss, anon := statusKB(gw.Process.Pid, "VmRSS"), statusKB(gw.Process.Pid, "RssAnon")
	stop, err := b.stop(gw)
	if err != nil {
		return err
	}

	// Warm starts: the sandbox is running; measured a few times.
	var warm []time.Duration
	var stops = []time.Duration{stop}
	for range 5 {
		gw, d, err := b.start()
		if err != nil {
			return err
		}
		warm = append(warm, d)
		if err := b.exec(); err != nil {
			return err
		}
		s, err := b.stop(gw)
		if err != nil {
			return err
		}
		stops = append(stops, s)
	}

	p := func(ds []time.Duration, q float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
	fmt.Printf("exec round trip of `true`             %10s %10s %10s\n", "p50", "p90", "p99")
	fmt.Printf("  beige HTTP API (n=%-4d)             %10s %10s %10s\n", len(api), ms(p(api, .5)), ms(p(api, .9)), ms(p(api, .99)))
	fmt.Printf("  docker exec <container> true (n=%-3d)%10s %10s %10s\n", len(docker), ms(p(docker, .5)), ms(p(docker, .9)), ms(p(docker, .99)))
	fmt.Printf("  docker exec / beige (p50)           %9.1fx\n", float64(p(docker, .5))/float64(p(api, .5)))
	us := func(v int64) string { return fmt.Sprintf("%.2f ms", float64(v)/1000) }
	fmt.Printf("from inside the sandbox (n=100)             p50        p90        p99\n")
	for _, row := range []struct{ what, cmd string }{
		{"no-op plugin tool (built-in noop)", "/tools/bin/noop"},
		{"no-op TypeScript plugin tool (node host)", "/tools/bin/tsnoop"},
		{"external plugin tool (/bin/true on host)", "/tools/bin/ext"},
		{"denied plugin tool", "/tools/bin/ext.denied"},
		{"baseline: sh -c true", "/bin/sh -c true"},
	} {
		tt, ok := inside[row.cmd]
		if !ok {
			continue
		}
		fmt.Printf("  %-40s %10s %10s %10s\n", row.what, us(tt.P50), us(tt.P90), us(tt.P99))
	}
	fmt.Printf("start -> /api/health ok\n")
	fmt.Printf("  sandbox already running (median of %d) %s\n", len(warm), ms(p(warm, .5)))
	fmt.Printf("  sandbox created                     %s\n", ms(cold))
	fmt.Printf("SIGTERM -> exit (median of %d)         %s\n", len(stops), ms(p(stops, .5)))
	fmt.Printf("gateway RSS when idle, after the runs   %.1f MB (%.1f MB anonymous; the rest is the binary's pages)\n", float64(rss)/1024, float64(anon)/1024)
	return nil
}

func (b *bench) beige(args ...string) ([]byte, error) {
	cmd := exec.Command(b.bin, args...)
	cmd.Env = b.env
	return cmd.CombinedOutput()
}

func (b *bench) url(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", b.port, path) }

// start starts the gateway and returns how long it took to answer /api/health with 200.
func (b *bench) start() (*exec.Cmd, time.Duration, error) {
	cmd := exec.Command(b.bin, "gateway", "start", "--foreground", "--log-level", "warn")
	cmd.Env = b.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	client := &http.Client{Timeout: time.Second}
	for time.Since(t0) < time.Minute {
		resp, err := client.Get(b.url("/api/health"))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return cmd, time.Since(t0), nil
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	cmd.Process.Kill()
	return nil, 0, fmt.Errorf("gateway not healthy within a minute:\n%s", out.String())
}

func (b *bench) stop(cmd *exec.Cmd) (time.Duration, error) {
	t0 := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	return time.Since(t0), err
}

var execBody = []byte(`{"tool":"exec","params":{"command":"true"}}`)

type toolTimes struct{ N, P50, P90, P99 int64 }

// toolbench times command 100 times from inside the sandbox.
func (b *bench) toolbench(command string) (toolTimes, error) {
	var tt toolTimes
	out, err := b.execOutput("/opt/toolbench 100 " + command)
	if err != nil {
		return tt, err
	}
	i := strings.IndexByte(out, '{')
	if i < 0 {
		return tt, fmt.Errorf("toolbench %s: %q", command, out)
	}
	if err := json.Unmarshal([]byte(out[i:]), &tt); err != nil {
		return tt, fmt.Errorf("toolbench %s: %v: %q", command, err, out)
	}
	return tt, nil
}

// execOutput runs command in the sandbox through the API and returns its output.
func (b *bench) execOutput(command string) (string, error) {
	body, _ := json.Marshal(map[string]any{"tool": "exec", "params": map[string]any{"command": command}})
	resp, err := http.Post(b.url("/api/agents/"+b.agent+"/exec"), "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var res struct {
		Content []struct{ Text string }
		IsError bool
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || len(res.Content) == 0 {
		return "", fmt.Errorf("exec %q: status %d, %v", command, resp.StatusCode, err)
	}
	if res.IsError {
		return "", fmt.Errorf("exec %q: %s", command, res.Content[0].Text)
	}
	return res.Content[0].Text, nil
}

func (b *bench) exec() error {
	resp, err := http.Post(b.url("/api/agents/"+b.agent+"/exec"), "application/json", bytes.NewReader(execBody))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var res struct{ IsError bool }
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || resp.StatusCode != 200 || res.IsError {
		return fmt.Errorf("exec: status %d, %v", resp.StatusCode, err)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// statusKB returns a "kB" field of /proc/<pid>/status.
func statusKB(pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}
