package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/beige-dev/beige/internal/atomicfile"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/gateway"
	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/logfile"
	"github.com/beige-dev/beige/internal/proto"
)

// ExitNotRunning is what `gateway status` exits with when no gateway runs
// (as LSB init scripts do).
const ExitNotRunning = 3

func (a *app) gatewayCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Start, stop and watch the gateway",
	}
	var foreground, daemon bool
	var timeout float64
	var logLevel string
	start := &cobra.Command{
		Use:   "start",
		Short: "Start the gateway (in the background unless --foreground)",
		Long: `Start loads and checks the config, prepares every agent's sandbox (creating
or re-attaching to the beige-<agent> containers), and serves the HTTP API on
gateway.host:gateway.port.

By default it starts the gateway in the background, writes its pid to
$BEIGE_HOME/gateway.pid, waits until /api/health answers (at most --timeout
seconds) and tells where the logs are.

With --foreground it runs until Ctrl-C or SIGTERM, which drains in-flight
calls (at most 10 s) and exits. The sandboxes are left running so that the
next start re-attaches to them at once; they are removed when their agent
is no longer in the config.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if foreground {
				return a.runForeground(cmd.Context(), logLevel, daemon)
			}
			return a.startBackground(logLevel, time.Duration(timeout*float64(time.Second)))
		},
	}
	start.Flags().BoolVarP(&foreground, "foreground", "F", false, "run in the foreground; Ctrl-C or SIGTERM stops it")
	start.Flags().Float64Var(&timeout, "timeout", 300, "seconds to wait for /api/health when starting in the background")
	start.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	start.Flags().BoolVar(&daemon, "daemon", false, "log to the log file only (used by the background start)")
	start.Flags().MarkHidden("daemon")

	var stopTimeout float64
	stop := &cobra.Command{
		Use:   "stop",
		Short: "Stop the background gateway (SIGTERM, then SIGKILL after --timeout)",
		Long: `Stop sends SIGTERM to the gateway of this home, which drains in-flight
calls and exits. The pid in $BEIGE_HOME/gateway.pid is believed only while
that process holds the lock on $BEIGE_HOME/gateway.lock (a stale pid file
whose pid was reused by another program is removed, and nothing is
signalled); after --timeout seconds it sends SIGKILL.
The sandboxes keep running for the next start. Stopping a gateway that does
not run is not an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.stopGateway(time.Duration(stopTimeout * float64(time.Second)))
		},
	}
	stop.Flags().Float64Var(&stopTimeout, "timeout", 15, "seconds to wait after SIGTERM before SIGKILL")

	status := &cobra.Command{
		Use:   "status",
		Short: "Show whether the gateway runs: pid, uptime, agents, sandboxes",
		Long: `Status prints the pid and uptime of the gateway, its API address, and each
agent's model and sandbox state. It exits 0 when the gateway runs and is
healthy, 1 when it runs but is not healthy, and 3 when it does not run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.gatewayStatus()
		},
	}

	restart := &cobra.Command{
		Use:   "restart",
		Short: "Restart the gateway gracefully (or start it if it does not run)",
		Long: `Restart asks a running gateway to restart in place (POST /api/gateway/restart):
it drains in-flight calls, reloads the config from disk and starts again,
keeping the running gateway when the new config does not validate. When no
gateway runs, it starts one in the background.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.restartGateway(logLevel, time.Duration(timeout*float64(time.Second)))
		},
	}
	restart.Flags().Float64Var(&timeout, "timeout", 300, "seconds to wait for /api/health")
	restart.Flags().StringVar(&logLevel, "log-level", "info", "log level when a new gateway is started")

	var follow bool
	var lines int
	logs := &cobra.Command{
		Use:   "logs",
		Short: "Print the gateway log (-f to follow it)",
		Long: `Logs prints the end of the gateway log ($BEIGE_HOME/logs/gateway.log, or
gateway.logFile) and, with -f, keeps printing new lines, across rotations,
until Ctrl-C.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.gatewayLogs(cmd.Context(), follow, lines)
		},
	}
	logs.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines")
	logs.Flags().IntVarP(&lines, "lines", "n", 100, "how many of the last lines to print first (0: all)")

	cmd.AddCommand(start, stop, status, restart, logs)
	return cmd
}

// runForeground runs the gateway until SIGINT or SIGTERM.
func (a *app) runForeground(ctx context.Context, level string, daemon bool) error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return exitf(ExitUsage, "--log-level: %v", err)
	}
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	h, err := a.home()
	if err != nil {
		return err
	}
	lock, err := acquireGatewayLock(h)
	if errors.Is(err, errLocked) {
		if pid, ok := runningPID(h); ok {
			return exitf(ExitFailure, "a gateway already runs (pid %d); stop it first: beige gateway stop", pid)
		}
		return exitf(ExitFailure, "a gateway already runs (%s is locked); stop it first: beige gateway stop", h.LockFile())
	}
	if err != nil {
		return exitf(ExitFailure, "%v", err)
	}
	defer lock.Release()
	logPath := logPathOf(cfg, h)
	logFile, err := logfile.Open(logPath, &logfile.Options{MaxSizeBytes: cfg.Gateway.Log.MaxSizeBytes, MaxFiles: cfg.Gateway.Log.MaxFiles})
	if err != nil {
		return exitf(ExitFailure, "gateway log: %v", err)
	}
	defer logFile.Close()
	var out io.Writer = io.MultiWriter(a.streams.Err, logFile)
	if daemon {
		// Nobody reads a daemon's stderr: what the Go runtime writes there
		// (a panic, a fatal error) and the last error Main prints go to the
		// gateway log too, following it across rotations.
		d := &daemonLog{File: logFile}
		d.follow()
		out = d
	}
	logger := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: lvl}))
	logger.Info("starting gateway", "config", cfg.File, "home", h.Dir, "log", logPath, "pid", os.Getpid())

	// The disk reserve first: a reserve left by the last run is what lets
	// this one write its PID file on a disk an agent filled. It is made
	// (or completed) in the background, by Watch.
	reserve := home.OpenReserve(h, &home.ReserveOptions{Logger: logger.With("component", "disk")})
	defer reserve.Close()
	if err := writePIDFile(h); err != nil {
		return exitf(ExitFailure, "write pid file: %v", err)
	}
	defer os.Remove(h.PIDFile())
	os.Remove(h.AddrFile()) // a killed gateway's; this one writes its own once it listens
	defer os.Remove(h.AddrFile())

	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go reserve.Watch(ctx, reserveWatchInterval)
	reload := func() (*config.Config, error) {
		c, err := config.Load(cfg.File, loadOptions())
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	onListen := func(addr string) {
		if err := writeAddrFile(h, addr); err != nil {
			logger.Warn("the API's address is not recorded; beige gateway status and restart will use the config's", "file", h.AddrFile(), "err", err)
		}
	}
	if err := gateway.Run(ctx, gateway.Options{Home: h, Config: cfg, Logger: logger, Reload: reload, Disk: reserve, OnListen: onListen}); err != nil {
		logger.Error("gateway failed", "err", err)
		return exitf(ExitFailure, "%v", err)
	}
	if !daemon {
		fmt.Fprintln(a.streams.Err, "beige: gateway stopped")
	}
	return nil
}

// reserveWatchInterval is how often a released disk reserve is made again
// when there is room.
const reserveWatchInterval = 30 * time.Second

// writePIDFile writes this process's pid to gateway.pid; on a full disk it
// releases the disk reserve and tries once more.
func writePIDFile(h home.Home) error {
	data := []byte(strconv.Itoa(os.Getpid()) + "\n")
	err := os.WriteFile(h.PIDFile(), data, 0o600)
	if home.ReleaseOnFull(err) {
		err = os.WriteFile(h.PIDFile(), data, 0o600)
	}
	return err
}

// openAppend opens the log at path for appending, as logfile does (the
// folder 0700, the file 0600).
func openAppend(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create log folder: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return f, nil
}

// daemonLog is a background gateway's log. After each write it checks
// that the process's stdout and stderr (file descriptors 1 and 2) are the
// current log file and, after a rotation, points them at the new one: the
// Go runtime writes a panic or a fatal error to descriptor 2, and nobody
// else would see it.
type daemonLog struct {
	*logfile.File
	mu  sync.Mutex
	dev uint64 // the file descriptors 1 and 2 are (0: not yet)
	ino uint64
}

func (d *daemonLog) Write(p []byte) (int, error) {
	n, err := d.File.Write(p)
	d.follow()
	return n, err
}

// follow points descriptors 1 and 2 at the log file, unless they are
// already. It does nothing when the file cannot be opened (the next write
// tries again).
func (d *daemonLog) follow() {
	d.mu.Lock()
	defer d.mu.Unlock()
	var st unix.Stat_t
	if err := unix.Stat(d.Path(), &st); err != nil {
		return
	}
	if uint64(st.Dev) == d.dev && st.Ino == d.ino {
		return
	}
	f, err := openAppend(d.Path())
	if err != nil {
		return
	}
	defer f.Close()
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return
	}
	if unix.Dup2(int(f.Fd()), 1) != nil || unix.Dup2(int(f.Fd()), 2) != nil {
		return
	}
	d.dev, d.ino = uint64(st.Dev), st.Ino
}

func logPathOf(cfg *config.Config, h home.Home) string {
	if cfg != nil && cfg.Gateway.LogFile != "" {
		return cfg.Gateway.LogFile
	}
	return h.GatewayLog()
}

// client talks to the running gateway: -g when given, else the address the
// running gateway recorded (gateway.addr: the config on disk may have been
// edited since it started), else the config's host and port; with the
// config's token.
type client struct {
	base  string
	token string
	http  *http.Client
}

func (a *app) client(cfg *config.Config, cmd *cobra.Command) *client {
	c := &client{base: strings.TrimSuffix(a.gatewayURL, "/"), http: &http.Client{Timeout: 10 * time.Second}}
	if cfg != nil {
		c.token = cfg.Gateway.AuthToken.Reveal()
		if !a.gatewayFlagSet {
			host := cfg.Gateway.Host
			if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
				host = "127.0.0.1"
			}
			c.base = "http://" + net.JoinHostPort(host, strconv.Itoa(cfg.Gateway.Port))
		}
	}
	if !a.gatewayFlagSet {
		if base, ok := a.runningBase(); ok {
			c.base = base
		}
	}
	return c
}

// runningBase is the base URL of the running gateway's API, from
// gateway.addr; false when no gateway runs or it recorded nothing usable.
func (a *app) runningBase() (string, bool) {
	h, err := a.home()
	if err != nil {
		return "", false
	}
	if _, ok := runningPID(h); !ok {
		return "", false
	}
	return readAddrFile(h)
}

// writeAddrFile records addr (the API listener's host:port) in gateway.addr.
func writeAddrFile(h home.Home, addr string) error {
	return atomicfile.Write(h.AddrFile(), []byte(addr+"\n"), 0o600)
}

// readAddrFile returns the base URL for the address in gateway.addr: an IP
// and a port, an unspecified IP (0.0.0.0, ::) meaning loopback.
func readAddrFile(h home.Home) (string, bool) {
	f, err := os.Open(h.AddrFile())
	if err != nil {
		return "", false
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return "", false
	}
	host, port, err := net.SplitHostPort(strings.TrimSpace(string(data)))
	if err != nil {
		return "", false
	}
	ip, err := netip.ParseAddr(host)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 || ip.Zone() != "" {
		return "", false
	}
	if ip.IsUnspecified() {
		if ip.Unmap().Is4() {
			ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		} else {
			ip = netip.IPv6Loopback()
		}
	}
	return "http://" + net.JoinHostPort(ip.String(), port), true
}

func (c *client) do(ctx context.Context, method, path string, body io.Reader, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 400 {
		var e proto.ErrorBody
		if json.Unmarshal(data, &e) == nil && e.Error != "" && out == nil {
			return resp.StatusCode, errors.New(e.Error)
		}
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// startBackground starts `beige gateway start --foreground --daemon` detached
// and waits for /api/health.
func (a *app) startBackground(level string, timeout time.Duration) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	h, err := a.home()
	if err != nil {
		return err
	}
	if pid, ok := runningPID(h); ok {
		return exitf(ExitFailure, "a gateway already runs (pid %d); see: beige gateway status", pid)
	}
	exe, err := os.Executable()
	if err != nil {
		return exitf(ExitFailure, "find the beige executable: %v", err)
	}
	args := []string{"-c", cfg.File, "gateway", "start", "--foreground", "--daemon", "--log-level", level}
	child := exec.Command(exe, args...)
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return exitf(ExitFailure, "%v", err)
	}
	defer devnull.Close()
	logPath := logPathOf(cfg, h)
	// The daemon's stdout and stderr go to its log from the start, so that
	// an error before its logger is set up (or a panic) is there for
	// `beige gateway logs` and for the tail printed below.
	stderr, err := openAppend(logPath)
	if err != nil {
		return exitf(ExitFailure, "gateway log: %v", err)
	}
	defer stderr.Close()
	child.Stdin, child.Stdout, child.Stderr = devnull, stderr, stderr
	if err := child.Start(); err != nil {
		return exitf(ExitFailure, "start the gateway: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	c := a.client(cfg, nil)
	fmt.Fprintf(a.streams.Err, "starting the gateway (pid %d), waiting for %s/api/health ...\n", child.Process.Pid, c.base)
	deadline := time.Now().Add(timeout)
	var last proto.Health
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			fmt.Fprintf(a.streams.Err, "the gateway exited (%v); the end of %s:\n", err, logPath)
			tail(a.streams.Err, logPath, 15)
			return &ExitError{Code: ExitFailure}
		case <-time.After(100 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		code, err := c.do(ctx, "GET", "/api/health", nil, &last)
		cancel()
		if err == nil && code == http.StatusOK {
			fmt.Fprintf(a.streams.Out, "gateway started: pid %d, API %s\nlogs: %s (beige gateway logs -f)\n", child.Process.Pid, c.base, logPath)
			return nil
		}
		if err == nil && last.Status == "degraded" {
			fmt.Fprintf(a.streams.Out, "gateway started but degraded: pid %d, API %s\n", child.Process.Pid, c.base)
			if last.Disk != "" {
				fmt.Fprintf(a.streams.Out, "  %s\n", last.Disk)
			}
			for agent, problem := range last.Agents {
				fmt.Fprintf(a.streams.Out, "  agent %s: %s\n", agent, problem)
			}
			for _, name := range slices.Sorted(maps.Keys(last.Plugins)) {
				fmt.Fprintf(a.streams.Out, "  plugin %s %s\n", name, pluginProblem(name, last.Plugins[name]))
			}
			fmt.Fprintf(a.streams.Out, "logs: %s\n", logPath)
			return &ExitError{Code: ExitFailure}
		}
	}
	return exitf(ExitFailure, "the gateway (pid %d) did not become healthy within %v; see %s", child.Process.Pid, timeout, logPath)
}

func (a *app) stopGateway(timeout time.Duration) error {
	h, err := a.home()
	if err != nil {
		return err
	}
	pid, ok := runningPID(h)
	if !ok {
		// A pid file without a held lock is stale: whatever process has that
		// pid now is not our gateway, and is left alone.
		if held, _ := lockHeld(h); !held {
			os.Remove(h.PIDFile())
		}
		fmt.Fprintln(a.streams.Out, "the gateway is not running")
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return exitf(ExitFailure, "signal pid %d: %v", pid, err)
	}
	fmt.Fprintf(a.streams.Err, "stopping the gateway (pid %d) ...\n", pid)
	if waitExit(h, pid, timeout) {
		fmt.Fprintln(a.streams.Out, "gateway stopped")
		return nil
	}
	// Check again that pid is still this home's gateway before killing it.
	if p, ok := runningPID(h); !ok || p != pid {
		fmt.Fprintln(a.streams.Out, "gateway stopped")
		return nil
	}
	fmt.Fprintf(a.streams.Err, "still running after %v: sending SIGKILL\n", timeout)
	syscall.Kill(pid, syscall.SIGKILL)
	if !waitExit(h, pid, 5*time.Second) {
		return exitf(ExitFailure, "pid %d did not exit after SIGKILL", pid)
	}
	os.Remove(h.PIDFile())
	fmt.Fprintln(a.streams.Out, "gateway killed")
	return nil
}

// waitExit waits up to d for the gateway pid to exit: the process is gone
// or a zombie, or no longer holds the home's lock.
func waitExit(h home.Home, pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return true
		}
		if p, ok := runningPID(h); !ok || p != pid {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// isZombie reports whether pid has exited but not been reaped (only its
// parent can reap it, and that may be us or nobody yet).
func isZombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(data), ')')
	return i > 0 && i+2 < len(data) && data[i+2] == 'Z'
}

func (a *app) gatewayStatus() error {
	cfg := a.loadClientConfig()
	h, err := a.home()
	if err != nil {
		return err
	}
	pid, ok := runningPID(h)
	if !ok {
		fmt.Fprintln(a.streams.Out, "gateway: not running")
		return &ExitError{Code: ExitNotRunning}
	}
	uptime := "?"
	if st, err := os.Stat(h.PIDFile()); err == nil {
		uptime = time.Since(st.ModTime()).Round(time.Second).String()
	}
	c := a.client(cfg, nil)
	fmt.Fprintf(a.streams.Out, "gateway: running, pid %d, up %s\nAPI:     %s\nlog:     %s\n", pid, uptime, c.base, logPathOf(cfg, h))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var health proto.Health
	if _, err := c.do(ctx, "GET", "/api/health", nil, &health); err != nil {
		fmt.Fprintf(a.streams.Out, "health:  no answer (%v)\n", err)
		return &ExitError{Code: ExitFailure}
	}
	fmt.Fprintf(a.streams.Out, "health:  %s\n", health.Status)
	if health.Stats != nil {
		fmt.Fprintf(a.streams.Out, "stats:   %s\n", headline(health.Stats))
	}
	if health.Disk != "" {
		fmt.Fprintf(a.streams.Out, "disk:    %s\n", health.Disk)
	}
	if health.Config != "" {
		fmt.Fprintf(a.streams.Out, "config:  the last reload was refused: %s\n", health.Config)
	}
	if len(health.Plugins) > 0 {
		fmt.Fprintln(a.streams.Out, "plugins that cannot run:")
		for _, name := range slices.Sorted(maps.Keys(health.Plugins)) {
			fmt.Fprintf(a.streams.Out, "  %-16s %s\n", name, pluginProblem(name, health.Plugins[name]))
		}
	}
	var agents proto.AgentList
	if _, err := c.do(ctx, "GET", "/api/agents", nil, &agents); err == nil {
		fmt.Fprintln(a.streams.Out, "agents:")
		for _, ag := range agents.Agents {
			state := "sandbox ready"
			if p, bad := health.Agents[ag.Name]; bad {
				state = "sandbox not ready: " + p
			}
			fmt.Fprintf(a.streams.Out, "  %-16s %s/%s, container beige-%s, %s\n", ag.Name, ag.Model.Provider, ag.Model.Model, ag.Name, state)
		}
	}
	if health.Status != "ok" {
		return &ExitError{Code: ExitFailure}
	}
	return nil
}

// headline is the line of `gateway status` with the figures of /metrics
// that matter most: tool calls, of them errors, cooldowns, the audit head.
func headline(s *proto.HealthStats) string {
	head := "unknown"
	if s.AuditHead != nil {
		head = strconv.FormatInt(*s.AuditHead, 10)
	}
	return fmt.Sprintf("%d tool calls, %d errors, %d models cooling down, audit head %s", s.ToolCalls, s.ToolErrors, s.Cooldowns, head)
}

func (a *app) restartGateway(level string, timeout time.Duration) error {
	cfg := a.loadClientConfig()
	h, err := a.home()
	if err != nil {
		return err
	}
	if _, ok := runningPID(h); !ok {
		fmt.Fprintln(a.streams.Err, "the gateway is not running; starting it")
		return a.startBackground(level, timeout)
	}
	c := a.client(cfg, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var resp struct {
		Status, Message string
	}
	code, err := c.do(ctx, "POST", "/api/gateway/restart", strings.NewReader("{}"), &resp)
	if err != nil || code != http.StatusAccepted {
		return exitf(ExitFailure, "restart request failed (%d): %v", code, err)
	}
	fmt.Fprintln(a.streams.Err, resp.Message)
	// Wait for the restart to take effect and the gateway to be healthy again.
	time.Sleep(200 * time.Millisecond)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if base, ok := a.runningBase(); ok && !a.gatewayFlagSet {
			c.base = base // the restarted gateway may listen elsewhere (a new gateway.port)
		}
		var health proto.Health
		hctx, hcancel := context.WithTimeout(context.Background(), 2*time.Second)
		code, err := c.do(hctx, "GET", "/api/health", nil, &health)
		hcancel()
		if err == nil && code == http.StatusOK {
			if health.Config != "" {
				return exitf(ExitFailure, "the new config was refused; the gateway runs on the old one: %s", health.Config)
			}
			fmt.Fprintln(a.streams.Out, "gateway restarted")
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return exitf(ExitFailure, "the gateway did not become healthy within %v after the restart", timeout)
}

// pluginProblem is a plugin's problem from /api/health for a line that
// names the plugin already: "is restarting: ..." rather than "plugin p is
// restarting: ..." after the name (the text its tools answer); another
// text as "- ...".
func pluginProblem(name, why string) string {
	if rest, ok := strings.CutPrefix(why, "plugin "+name+" "); ok {
		return rest
	}
	return "- " + why
}
