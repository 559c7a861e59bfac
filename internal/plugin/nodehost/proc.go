package nodehost

import (
	"bufio"
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/beige-dev/beige/internal/egress/trust"
	"github.com/beige-dev/beige/internal/plugin/jail"
)

//go:embed host.mjs
var hostScript string

// procSpec is how to start one plugin host process.
type procSpec struct {
	name string // the plugin's name, for messages
	node Node
	dir  string // the plugin's real folder (links resolved)
	// readRoot is the folder the plugin may read: dir, or the package
	// folder ($BEIGE_HOME/packages/<d>) dir is in.
	readRoot string
	dataDir  string // the plugin's data folder: readable and writable, cwd and HOME
	// allowRead and allowWrite are more host paths the plugin may use
	// (plugins.<name>.allowRead/allowWrite).
	allowRead, allowWrite []string
	tsx                   string // file: URL of the plugin's own tsx loader, or ""
	// egressSocket is the host path of the plugin's egress proxy socket
	// ("": the jailed host has no network at all).
	egressSocket string
	// unconfined runs the host without the namespace jail
	// (plugins.<name>.confine: false).
	unconfined bool
	// allowChildProcess passes --allow-child-process.
	allowChildProcess bool
	log               *slog.Logger
	// serve answers the host's ctx calls.
	// notify, when not nil, sends an event about this call to the host
	// before the answer (the text deltas of a streaming prompt).
	serve func(ctx context.Context, op string, args json.RawMessage, notify func(ev map[string]any)) (any, error)
}

// proc is one running plugin host.
type proc struct {
	spec *procSpec
	cmd  *exec.Cmd

	toHost   *os.File // fd 3 of the child
	fromHost *os.File // fd 4 of the child
	syncOut  *os.File // fd 5 of the child
	wmu      sync.Mutex
	smu      sync.Mutex

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan *frame

	inflight chan struct{} // one token per asynchronous ctx call running

	done    chan struct{} // closed when the process has exited
	exitErr error         // why, once done is closed
	killMu  sync.Mutex
	killWhy string // the reason it was killed, if it was
	cancel  context.CancelFunc
}

// nodeArgs are the flags that confine the host: the permission model with
// the plugin's folder readable and its data folder writable, nothing else
// (no child processes, workers, addons or WASI).
func nodeArgs(n Node, s *procSpec) []string {
	args := []string{
		"--permission",
		"--allow-fs-read=" + cmp.Or(s.readRoot, s.dir),
		"--allow-fs-read=" + s.dataDir,
		"--allow-fs-write=" + s.dataDir,
		"--disable-warning=ExperimentalWarning",
		// Node's own proxying (NODE_USE_ENV_PROXY, the jail's way out)
		// warns on every start that its agent is experimental: noise in
		// the gateway's log, nothing the user can act on.
		"--disable-warning=UNDICI-EHPA",
	}
	for _, d := range s.allowRead {
		args = append(args, "--allow-fs-read="+d)
	}
	for _, d := range s.allowWrite {
		args = append(args, "--allow-fs-read="+d, "--allow-fs-write="+d)
	}
	if s.allowChildProcess {
		args = append(args, "--allow-child-process")
	}
	if n.needsStripFlag() {
		args = append(args, "--experimental-strip-types")
	}
	if s.tsx != "" {
		// tsx registers its loader on a hooks thread (node:module register).
		args = append(args, "--allow-worker", "--import", s.tsx)
		// It looks for the package.json nearest the entry (its "type"),
		// up to /: existsSync of a path the permission model does not
		// grant throws instead of answering false. Only those files are
		// granted (in the jail they do not exist).
		for d := filepath.Dir(s.dir); ; d = filepath.Dir(d) {
			args = append(args, "--allow-fs-read="+filepath.Join(d, "package.json"))
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return append(args, "--input-type=module", "--eval", hostScript)
}

// startProc starts the host and its reader. It does not initialise the
// plugin (see init).
func startProc(spec *procSpec) (*proc, error) {
	if err := os.MkdirAll(spec.dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data folder: %w", err)
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err1 := pipe()
	outR, outW, err2 := pipe()
	syR, syW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		closeAll()
		return nil, fmt.Errorf("create pipes: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd, err := hostCommand(ctx, spec)
	if err != nil {
		cancel()
		closeAll()
		return nil, err
	}
	cmd.ExtraFiles = []*os.File{inR, outW, syR}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	stdout := &logWriter{log: spec.log, stream: "stdout"}
	stderr := &logWriter{log: spec.log, stream: "stderr"}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		cancel()
		closeAll()
		return nil, fmt.Errorf("start %s: %w", spec.node.Path, err)
	}
	inR.Close()
	outW.Close()
	syR.Close()
	p := &proc{
		spec: spec, cmd: cmd, toHost: inW, fromHost: outR, syncOut: syW,
		pending: map[uint64]chan *frame{}, done: make(chan struct{}), cancel: cancel,
		inflight: make(chan struct{}, maxInflight),
	}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		p.readLoop()
	}()
	go func() {
		err := cmd.Wait()
		// The pipes to the host are closed only now: a write to a dead
		// host fails instead of blocking.
		p.toHost.Close()
		p.syncOut.Close()
		<-readerDone
		p.fromHost.Close()
		stdout.flush()
		stderr.flush()
		p.killMu.Lock()
		why := p.killWhy
		p.killMu.Unlock()
		switch {
		case why != "":
			p.exitErr = errors.New(why)
		case err != nil:
			p.exitErr = fmt.Errorf("the plugin host exited: %v", err)
		default:
			p.exitErr = errors.New("the plugin host exited")
		}
		cancel()
		p.mu.Lock()
		for id, ch := range p.pending {
			close(ch)
			delete(p.pending, id)
		}
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// hostCommand is the command of the host: node in the plugin's jail, or
// node itself when the plugin is unconfined.
func hostCommand(ctx context.Context, spec *procSpec) (*exec.Cmd, error) {
	env := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + spec.dataDir,
		"NODE_ENV=production",
		"LANG=C.UTF-8",
		"TZ=" + tzName(),
	}
	if spec.tsx != "" {
		// tsx's compile cache is a folder in os.tmpdir(), which the
		// permission model does not let the host write: compile anew.
		env = append(env, "TSX_DISABLE_CACHE=1")
	}
	if spec.unconfined {
		cmd := exec.CommandContext(ctx, spec.node.Path, nodeArgs(spec.node, spec)...)
		cmd.Dir = spec.dataDir
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd, nil
	}
	if err := jailAvailable(); err != nil {
		return nil, fmt.Errorf("no plugin jail available, so the plugin does not start (plugins.%s.confine: false runs it with the gateway's network and files): %w", spec.name, err)
	}
	readOnly := cleanAll(cmp.Or(spec.readRoot, spec.dir), spec.allowRead)
	if spec.egressSocket != "" {
		proxy := "http://" + jail.ProxyAddr
		env = append(env, "HTTP_PROXY="+proxy, "HTTPS_PROXY="+proxy, "http_proxy="+proxy, "https_proxy="+proxy, "NO_PROXY="+jail.ProxyAddr, "no_proxy="+jail.ProxyAddr)
		if useEnvProxy {
			env = append(env, "NODE_USE_ENV_PROXY=1")
		}
		// With plugins.<p>.egress.credentials the proxy terminates TLS
		// with the home's CA, whose certificate the gateway writes beside
		// the socket: Node trusts it in addition to its own roots.
		ca := filepath.Join(filepath.Dir(spec.egressSocket), egressCAFile)
		if fi, err := os.Lstat(ca); err == nil && fi.Mode().IsRegular() {
			readOnly = append(readOnly, ca)
			env = append(env, "NODE_EXTRA_CA_CERTS="+ca)
		}
		// The bundle (the host's roots and the CA) is for the host's
		// children: curl, git, Go and Python programs read these.
		bundle := filepath.Join(filepath.Dir(spec.egressSocket), egressBundleFile)
		if fi, err := os.Lstat(bundle); err == nil && fi.Mode().IsRegular() {
			readOnly = append(readOnly, bundle)
			for _, k := range trust.Env {
				env = append(env, k+"="+bundle)
			}
		}
	}
	cmd, err := jail.Command(ctx, jail.Spec{
		Path: spec.node.Path, Args: nodeArgs(spec.node, spec), Env: env, Dir: spec.dataDir,
		ReadOnly:     readOnly,
		ReadWrite:    cleanAll(spec.dataDir, spec.allowWrite),
		EgressSocket: spec.egressSocket,
	})
	if err != nil {
		return nil, fmt.Errorf("confine the plugin host (plugins.%s.confine: false runs it unconfined): %w", spec.name, err)
	}
	return cmd, nil
}

// egressCAFile is the egress CA certificate's name beside a plugin's
// egress socket (gateway.EgressCAFile).
const egressCAFile = "egress-ca.pem"

// egressBundleFile is the CA bundle beside a plugin's egress socket
// (gateway.PluginCABundleFile).
const egressBundleFile = "ca-bundle.pem"

// useEnvProxy sets NODE_USE_ENV_PROXY=1 for a host with egress (a
// variable for tests: without it Node 22.23 acts as a Node older than
// 22.21, whose fetch and global agents know no proxy, and host.mjs
// installs its own agents).
var useEnvProxy = true

// jailAvailable reports whether hosts can be jailed here (a variable for
// tests).
var jailAvailable = jail.Available

func cleanAll(first string, rest []string) []string {
	out := []string{filepath.Clean(first)}
	for _, p := range rest {
		out = append(out, filepath.Clean(p))
	}
	return out
}

func tzName() string {
	if tz := os.Getenv("TZ"); tz != "" && !strings.ContainsAny(tz, "/.") {
		return tz
	}
	return "UTC"
}

// kill ends the host's whole process group, giving why as the reason the
// calls in flight fail with. Only the first reason is kept.
func (p *proc) kill(why string) {
	p.killMu.Lock()
	if p.killWhy == "" {
		p.killWhy = why
	}
	p.killMu.Unlock()
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	p.cancel()
}

// readLoop reads the host's frames until it closes fd 4 or breaks the
// protocol (then it is killed).
func (p *proc) readLoop() {
	r := bufio.NewReaderSize(p.fromHost, 64<<10)
	for {
		line, err := readLine(r, MaxFrame)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				p.spec.log.Error("plugin host broke the protocol; killing it", "err", err)
				p.kill("the plugin host broke the protocol: " + err.Error())
			}
			return
		}
		f, err := parseFrame(line)
		if err != nil {
			p.spec.log.Error("plugin host broke the protocol; killing it", "err", err)
			p.kill("the plugin host broke the protocol: " + err.Error())
			return
		}
		switch f.T {
		case "res":
			p.mu.Lock()
			ch := p.pending[f.ID]
			delete(p.pending, f.ID)
			p.mu.Unlock()
			if ch != nil {
				ch <- f
			}
		case "log":
			logPlugin(p.spec.log, f.Level, f.Msg)
		case "req":
			switch {
			case f.Sync:
				// The host's JavaScript thread waits for this answer, so it
				// sends nothing else meanwhile: answer in order, here.
				p.answer(f, true)
			default:
				select {
				case p.inflight <- struct{}{}:
					go func() {
						defer func() { <-p.inflight }()
						p.answer(f, false)
					}()
				default:
					p.refuse(f, fmt.Sprintf("beige: more than %d ctx calls of this plugin at once", maxInflight))
				}
			}
		}
	}
}

// answer runs a ctx call of the host and writes the answer: on fd 5 for a
// synchronous call, on fd 3 otherwise.
func (p *proc) answer(f *frame, sync bool) {
	ctx, cancel := context.WithTimeout(context.Background(), ctxCallTimeout)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	var notify func(map[string]any)
	if !sync {
		notify = func(ev map[string]any) {
			ev["t"], ev["id"] = "ev", f.ID
			data, err := json.Marshal(ev)
			if err != nil {
				return
			}
			p.wmu.Lock()
			_, _ = p.toHost.Write(append(data, '\n'))
			p.wmu.Unlock()
		}
	}
	res, err := p.spec.serve(ctx, f.Op, f.Args, notify)
	out := map[string]any{"t": "res", "id": f.ID}
	if err != nil {
		out["error"] = err.Error()
	} else {
		out["result"] = res
	}
	data, err := json.Marshal(out)
	if err != nil {
		data, _ = json.Marshal(map[string]any{"t": "res", "id": f.ID, "error": "beige: encode answer: " + err.Error()})
	}
	data = append(data, '\n')
	if sync {
		p.smu.Lock()
		_, err = p.syncOut.Write(data)
		p.smu.Unlock()
	} else {
		p.wmu.Lock()
		_, err = p.toHost.Write(data)
		p.wmu.Unlock()
	}
	if err != nil {
		p.spec.log.Debug("answer to the plugin host not delivered", "op", f.Op, "err", err)
	}
}

// refuse answers an asynchronous ctx call with an error, at once.
func (p *proc) refuse(f *frame, msg string) {
	data, _ := json.Marshal(map[string]any{"t": "res", "id": f.ID, "error": msg})
	p.wmu.Lock()
	_, _ = p.toHost.Write(append(data, '\n'))
	p.wmu.Unlock()
}

// maxInflight bounds the asynchronous ctx calls (prompts, say) one plugin
// host has running at once.
const maxInflight = 64

// ctxCallTimeout bounds one ctx call of a plugin (a prompt of a sub-agent
// can take long).
const ctxCallTimeout = 30 * time.Minute

// call sends a request to the host and waits for its answer, ctx's end or
// the host's exit. An error answer of the plugin is a *pluginError.
func (p *proc) call(ctx context.Context, op string, args any) (json.RawMessage, error) {
	a, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("encode %s request: %w", op, err)
	}
	ch := make(chan *frame, 1)
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		return nil, p.exitErr
	default:
	}
	p.nextID++
	id := p.nextID
	p.pending[id] = ch
	p.mu.Unlock()
	data, err := json.Marshal(frame{T: "req", ID: id, Op: op, Args: a})
	if err != nil {
		return nil, fmt.Errorf("encode %s request: %w", op, err)
	}
	p.wmu.Lock()
	_, err = p.toHost.Write(append(data, '\n'))
	p.wmu.Unlock()
	if err != nil {
		p.drop(id)
		select {
		case <-p.done:
			return nil, p.exitErr
		default:
		}
		return nil, fmt.Errorf("send %s request: %w", op, err)
	}
	select {
	case f, ok := <-ch:
		if !ok {
			<-p.done
			return nil, p.exitErr
		}
		if f.Error != nil {
			return nil, &pluginError{msg: *f.Error, code: f.Code}
		}
		return f.Result, nil
	case <-ctx.Done():
		p.drop(id)
		return nil, ctx.Err()
	}
}

func (p *proc) drop(id uint64) {
	p.mu.Lock()
	delete(p.pending, id)
	p.mu.Unlock()
}

// pluginError is an error the plugin's code threw.
type pluginError struct {
	msg, code string
}

func (e *pluginError) Error() string { return e.msg }

// accessDenied reports whether the plugin was refused by Node's permission
// model (it tried to read or write outside its folders).
func (e *pluginError) accessDenied() bool { return e.code == "ERR_ACCESS_DENIED" }

// accessHint says, for a refusal of Node's permission model, which of
// plugin name's config keys would allow what was refused: Node's own text
// names its command-line flags ("Use --allow-child-process to manage
// permissions"), which a beige user does not set. "" for other errors.
func (e *pluginError) accessHint(name string) string {
	if !e.accessDenied() {
		return ""
	}
	switch {
	case strings.Contains(e.msg, "--allow-child-process"):
		return fmt.Sprintf(" (plugin %s may not start programs: plugins.%s.allowChildProcess: true allows it)", name, name)
	case strings.Contains(e.msg, "--allow-fs-write"):
		return fmt.Sprintf(" (plugin %s writes only its data folder: plugins.%s.allowWrite lists more)", name, name)
	case strings.Contains(e.msg, "--allow-fs-read"):
		return fmt.Sprintf(" (plugin %s reads only its own folders: plugins.%s.allowRead lists more)", name, name)
	case strings.Contains(e.msg, "--allow-worker"):
		return fmt.Sprintf(" (plugin %s may not start worker threads)", name)
	}
	return ""
}

func logPlugin(log *slog.Logger, level, msg string) {
	msg = cut(msg, maxLogLine)
	switch level {
	case "error":
		log.Error(msg)
	case "warn":
		log.Warn(msg)
	default:
		log.Info(msg)
	}
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// logWriter logs what a plugin host prints, a line at a time, each line cut
// at maxLogLine, at most maxLogLines lines a minute (the rest is counted and
// dropped, so that a plugin cannot flood the gateway's log).
type logWriter struct {
	log    *slog.Logger
	stream string
	mu     sync.Mutex
	buf    []byte
	drop   bool // the current line is too long: drop until its end

	window  time.Time // start of the current minute
	lines   int       // lines logged in it
	dropped int       // lines dropped in it
}

// maxLogLines bounds the lines a minute logged from one stream of a host.
const maxLogLines = 600

func (w *logWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := strings.IndexByte(string(b), '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if !w.drop {
			room := maxLogLine - len(w.buf)
			if len(part) > room {
				w.buf = append(w.buf, part[:room]...)
				w.emit(true)
				w.drop = true
			} else {
				w.buf = append(w.buf, part...)
			}
		}
		if i < 0 {
			break
		}
		if !w.drop {
			w.emit(false)
		}
		w.drop = false
		b = b[i+1:]
	}
	return n, nil
}

func (w *logWriter) emit(cutOff bool) {
	s := string(w.buf)
	w.buf = w.buf[:0]
	if cutOff {
		s += "…"
	}
	now := time.Now()
	if now.Sub(w.window) >= time.Minute {
		if w.dropped > 0 {
			w.log.Warn("plugin output dropped: too many lines", "stream", w.stream, "lines", w.dropped)
		}
		w.window, w.lines, w.dropped = now, 0, 0
	}
	if w.lines >= maxLogLines {
		w.dropped++
		return
	}
	w.lines++
	w.log.Info(s, "stream", w.stream)
}

func (w *logWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 && !w.drop {
		w.emit(false)
	}
}
