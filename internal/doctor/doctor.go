// Package doctor checks an installation and its config (`beige doctor`):
// the Docker engine and the sandbox image, the in-sandbox binary, Node for
// plugins that need it, the namespace jail of confined TypeScript plugins, the settings that give up a default's safety (an API
// open beyond loopback without a token, a secret written into the file, an
// agent with an open network, host root, no limits or a sensitive mount),
// the permissions of $BEIGE_HOME, the audit chain, the free disk space and,
// when asked, whether each provider accepts its key. Each finding has a
// severity, a stable id, a message and the fix.
//
// The checks read the operator's own files and ask the engine; they never
// run a program or follow a path an agent could have planted: the
// workspaces are only named, never read.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/home"
)

// Severity is how bad a finding is.
type Severity string

// Severities, from worst.
const (
	Error   Severity = "error"   // unsafe or broken: doctor exits 1
	Warning Severity = "warning" // a default's safety given up, or something to watch
	Info    Severity = "info"    // what was found (the engine's version, say)
)

func (s Severity) rank() int {
	switch s {
	case Error:
		return 0
	case Warning:
		return 1
	}
	return 2
}

// Finding is one thing doctor found, with what to do about it.
type Finding struct {
	Severity Severity `json:"severity"`
	// ID names the check ("engine.unreachable", "agent.network-open"); it
	// is stable, for scripts.
	ID      string `json:"id"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// Engine is what doctor asks of the container engine (the Docker
// runtime, internal/sandbox/docker, has these methods).
type Engine interface {
	// EngineVersion is the engine's version and the highest API version it serves.
	EngineVersion(ctx context.Context) (version, api string, err error)
	// HasImage reports whether the engine holds image (by name or ID).
	HasImage(ctx context.Context, image string) (bool, error)
}

// AuditReport is what an audit chain verification found.
type AuditReport struct {
	Records int64 // records checked
	Head    int64 // the chain's head sequence
	// Broken says where and why the chain breaks; "" when it holds.
	Broken string
}

// Options are what the checks look at. A nil func skips its check.
type Options struct {
	Config *config.Config // loaded and validated; nil when it did not load
	// ConfigErr is why the config did not load, when it did not.
	ConfigErr error
	Home      home.Home
	// Engine is the container engine; nil skips the engine and image checks
	// (the command's --no-engine).
	Engine Engine
	// HelperBinary finds the static beige-sandbox binary (gateway.FindHelperBinary).
	HelperBinary func() (string, error)
	// LookPath finds a program on $PATH (exec.LookPath), for the Node.js
	// of external plugins whose command runs node.
	LookPath func(string) (string, error)
	// Builtins are the plugins built into beige (plugin.Builtins): a
	// plugin folder whose plugin.json names one needs no Node.js.
	Builtins map[string]*config.Manifest
	// CheckNode checks the Node.js a TypeScript/JavaScript plugin runs
	// with (plugins.<name>.node, "" to look it up), as config validation
	// does (nil: not checked).
	CheckNode func(node string) error
	// JailProbe reports whether this machine can make the namespace jail
	// confined TypeScript/JavaScript plugins run in (jail.Probe; nil: not
	// checked).
	JailProbe func() error
	// ReadFile reads the kernel's settings under /proc, to say why there
	// is no jail (default os.ReadFile).
	ReadFile func(string) ([]byte, error)
	// AuditVerify verifies the audit chain of the logs folder (nil: not checked).
	AuditVerify func(dir string) (AuditReport, error)
	// DiskFree returns the bytes free for an unprivileged user on path's
	// filesystem (default statfs).
	DiskFree func(path string) (uint64, error)
	// UserHome is the operator's home folder, for ~/.ssh and ~/.aws
	// (default os.UserHomeDir).
	UserHome string
	// ProviderCheck, when set (--online), asks the provider named name
	// whether it accepts its key. It returns ErrKeyRejected (wrapped) when
	// the provider says no, another error when it could not tell.
	ProviderCheck func(ctx context.Context, name string, p *config.Provider) error
}

// ErrKeyRejected is what ProviderCheck returns when the provider refuses
// the key (HTTP 401 or 403).
var ErrKeyRejected = errors.New("doctor: the provider rejects the key")

// Disk space below which doctor reports an error or a warning.
const (
	DiskErrorBytes   = 256 << 20
	DiskWarningBytes = 2 << 30
)

// Run runs every check and returns the findings, worst first (in check
// order within a severity).
func Run(ctx context.Context, o Options) []Finding {
	var r report
	if o.DiskFree == nil {
		o.DiskFree = diskFree
	}
	if o.UserHome == "" {
		o.UserHome, _ = os.UserHomeDir()
	}
	if o.ReadFile == nil {
		o.ReadFile = os.ReadFile
	}
	if o.Config == nil {
		msg := "the config did not load"
		if o.ConfigErr != nil {
			msg += ": " + o.ConfigErr.Error()
		}
		r.add(Error, "config.invalid", msg, "fix what beige config validate reports")
	}
	checkEngine(ctx, &r, o)
	checkHelper(&r, o)
	checkHomePerms(&r, o)
	if o.Config != nil {
		checkNode(&r, o)
		checkJail(&r, o)
		checkAPI(&r, o.Config)
		checkSecrets(&r, o.Config)
		for _, name := range agentNames(o.Config) {
			checkAgent(&r, o, name, o.Config.Agents[name])
		}
		checkProviders(ctx, &r, o)
	}
	checkAudit(&r, o)
	checkDisk(&r, o)
	slices.SortStableFunc(r.list, func(a, b Finding) int { return a.Severity.rank() - b.Severity.rank() })
	return r.list
}

// Worst is the worst severity among fs; Info when there is none.
func Worst(fs []Finding) Severity {
	w := Info
	for _, f := range fs {
		if f.Severity.rank() < w.rank() {
			w = f.Severity
		}
	}
	return w
}

type report struct{ list []Finding }

func (r *report) add(s Severity, id, msg, fix string) {
	r.list = append(r.list, Finding{Severity: s, ID: id, Message: msg, Fix: fix})
}

func agentNames(cfg *config.Config) []string {
	if len(cfg.AgentOrder) == len(cfg.Agents) {
		return cfg.AgentOrder
	}
	names := make([]string, 0, len(cfg.Agents))
	for n := range cfg.Agents {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func checkEngine(ctx context.Context, r *report, o Options) {
	if o.Engine == nil {
		r.add(Info, "engine.skipped", "the container engine was not checked", "")
		return
	}
	v, api, err := o.Engine.EngineVersion(ctx)
	if err != nil {
		r.add(Error, "engine.unreachable", fmt.Sprintf("the Docker engine does not answer (DOCKER_HOST=%q): %v", os.Getenv("DOCKER_HOST"), err),
			"start dockerd (systemctl start docker), or point DOCKER_HOST at a running engine; without it no sandbox starts")
		return
	}
	r.add(Info, "engine.version", fmt.Sprintf("Docker engine %s, API %s", v, api), "")
	if o.Config == nil {
		return
	}
	var images []string
	for _, name := range agentNames(o.Config) {
		if a := o.Config.Agents[name]; a != nil && !slices.Contains(images, a.Sandbox.Image) {
			images = append(images, a.Sandbox.Image)
		}
	}
	for _, img := range images {
		ok, err := o.Engine.HasImage(ctx, img)
		switch {
		case err != nil:
			r.add(Error, "image.unknown", fmt.Sprintf("could not look up the sandbox image %s: %v", img, err), "check that the engine answers: docker image inspect "+img)
		case !ok:
			fix := "build it: beige sandbox build (or --busybox without a registry)"
			if img != config.DefaultSandboxImage {
				fix = "build or pull it: docker pull " + img
			}
			r.add(Error, "image.missing", fmt.Sprintf("the sandbox image %s is not on the engine: agents using it cannot start", img), fix)
		}
	}
}

func checkHelper(r *report, o Options) {
	if o.HelperBinary == nil {
		return
	}
	p, err := o.HelperBinary()
	if err != nil {
		r.add(Error, "helper.missing", err.Error(),
			"build it next to beige: CGO_ENABLED=0 go build -o bin/beige-sandbox ./cmd/beige-sandbox (or set BEIGE_SANDBOX_BINARY)")
		return
	}
	r.add(Info, "helper.found", "in-sandbox binary: "+p, "")
}

func pluginNames(cfg *config.Config) []string {
	names := make([]string, 0, len(cfg.Plugins))
	for n := range cfg.Plugins {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// checkNode checks the Node.js of every plugin that needs one, as
// config.NodeNeeded decides (the same function config validation uses).
func checkNode(r *report, o Options) {
	var need []string
	for _, n := range pluginNames(o.Config) {
		p := o.Config.Plugins[n]
		why, host := config.NodeNeeded(p, o.Builtins)
		switch {
		case why == "":
		case host:
			if o.CheckNode == nil {
				continue
			}
			if err := o.CheckNode(p.Node); err != nil {
				r.add(Error, "node.missing", fmt.Sprintf("plugin %s is a TypeScript/JavaScript plugin and needs Node.js 22 or later: %v", n, err),
					fmt.Sprintf("install Node.js 22 or later on the gateway's host, or set plugins.%s.node (or $BEIGE_NODE) to its path", n))
			}
		default:
			need = append(need, fmt.Sprintf("%s (%s)", n, why))
		}
	}
	if len(need) == 0 || o.LookPath == nil {
		return
	}
	if _, err := o.LookPath("node"); err != nil {
		r.add(Error, "node.missing", "Node.js is not on $PATH, and these plugins need it: "+strings.Join(need, ", "),
			"install Node.js on the gateway's host (apt-get install nodejs), or disable those plugins")
	}
}

// checkJail probes, when the config has confined TypeScript/JavaScript
// plugins, whether this machine can make their namespace jail, and says
// what is missing when it cannot; an unconfined plugin is a warning.
func checkJail(r *report, o Options) {
	var confined []string
	for _, n := range pluginNames(o.Config) {
		p := o.Config.Plugins[n]
		if _, host := config.NodeNeeded(p, o.Builtins); !host {
			continue
		}
		if p.Confined() {
			confined = append(confined, n)
			continue
		}
		r.add(Warning, "plugin.unconfined",
			fmt.Sprintf("plugin %s runs without its jail (plugins.%s.confine: false): it reaches the gateway's network and API, every Unix socket (the agents' tool sockets, Docker's) and whatever files Node's permissions leave it", n, n),
			fmt.Sprintf("remove plugins.%s.confine (default true) once beige doctor finds the jail available here", n))
	}
	if len(confined) == 0 || o.JailProbe == nil {
		return
	}
	err := o.JailProbe()
	if err == nil {
		r.add(Info, "jail.ok", "plugin jail available: "+strings.Join(confined, ", ")+" run in their own namespaces", "")
		return
	}
	msg := fmt.Sprintf("this machine cannot make the namespace jail that confined TypeScript/JavaScript plugins run in, so they do not start: %s (%v)", strings.Join(confined, ", "), err)
	var fixes []string
	for _, h := range jailHints(os.Geteuid(), runtime.GOOS, o.ReadFile) {
		msg += "; " + h.what
		fixes = append(fixes, h.fix)
	}
	fixes = append(fixes, "or set plugins.<name>.confine: false for a plugin you trust: that gives its confinement up (it runs with the gateway's network, API, sockets and files)")
	r.add(Error, "jail.unavailable", msg, strings.Join(fixes, "; "))
}

type jailHint struct{ what, fix string }

// capSysAdmin is CAP_SYS_ADMIN's bit in /proc/self/status's CapEff.
const capSysAdmin = 21

// jailHints says what keeps this machine from making the jail's
// namespaces, from the kernel's settings: user namespaces off (the jail
// needs one when the gateway is not root), AppArmor's restriction of them,
// a root without CAP_SYS_ADMIN or a seccomp filter (a container).
func jailHints(euid int, goos string, read func(string) ([]byte, error)) []jailHint {
	if goos != "linux" {
		return []jailHint{{"the jail needs Linux namespaces and this is " + goos, "run the gateway on Linux"}}
	}
	val := func(path string) string {
		b, err := read(path)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	var hs []jailHint
	if euid != 0 {
		if val("/proc/sys/user/max_user_namespaces") == "0" {
			hs = append(hs, jailHint{"user namespaces are disabled (user.max_user_namespaces = 0) and the gateway is not root",
				"sysctl -w user.max_user_namespaces=15000 (and in /etc/sysctl.d/ to keep it), or run the gateway as root"})
		}
		if val("/proc/sys/kernel/unprivileged_userns_clone") == "0" {
			hs = append(hs, jailHint{"unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0) and the gateway is not root",
				"sysctl -w kernel.unprivileged_userns_clone=1 (and in /etc/sysctl.d/ to keep it), or run the gateway as root"})
		}
		if val("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1" {
			hs = append(hs, jailHint{"AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)",
				"allow them to the beige binary with an AppArmor profile (profile beige /path/to/beige flags=(unconfined) { userns, }), or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"})
		}
	}
	var capEff, seccomp string
	for _, line := range strings.Split(val("/proc/self/status"), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			capEff = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			seccomp = strings.TrimSpace(v)
		}
	}
	if c, err := strconv.ParseUint(capEff, 16, 64); euid == 0 && err == nil && c&(1<<capSysAdmin) == 0 {
		hs = append(hs, jailHint{"the gateway runs as root without CAP_SYS_ADMIN (in a container, most likely), which making namespaces needs",
			"run the gateway on the host, or give its container CAP_SYS_ADMIN (docker run --cap-add SYS_ADMIN)"})
	}
	if seccomp == "2" {
		hs = append(hs, jailHint{"a seccomp filter applies to the gateway (a container's default profile refuses new namespaces)",
			"run the gateway on the host, or its container with a seccomp profile that allows unshare and clone with namespace flags (--security-opt seccomp=unconfined gives up the filter)"})
	}
	return hs
}

// loopback reports whether host (gateway.host) is a loopback name or address.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

func checkAPI(r *report, cfg *config.Config) {
	host := cfg.Gateway.Host
	if host == "" {
		host = config.DefaultHost
	}
	if !loopback(host) && cfg.Gateway.AuthToken == "" {
		r.add(Error, "api.open-without-token",
			fmt.Sprintf("the API listens on %s, beyond loopback, without gateway.authToken: anyone who reaches the port runs tools in every sandbox", host),
			`set gateway.authToken: "${BEIGE_TOKEN}" (and export BEIGE_TOKEN), or gateway.host: "127.0.0.1"`)
	}
	if l := cfg.Gateway.Metrics.Listen; l != "" && cfg.Gateway.AuthToken == "" {
		if h, _, err := net.SplitHostPort(l); err == nil && !loopback(h) {
			r.add(Error, "metrics.open-without-token",
				fmt.Sprintf("gateway.metrics.listen is %s, beyond loopback, without gateway.authToken: anyone who reaches it reads the agents', tools' and models' names and counts", l),
				`set gateway.authToken: "${BEIGE_TOKEN}", or gateway.metrics.listen: "127.0.0.1:9464"`)
		}
	}
}

// secretPaths lists the config's secrets by JSON path, with their values.
func secretPaths(cfg *config.Config) [][2]string {
	var out [][2]string
	names := make([]string, 0, len(cfg.LLM.Providers))
	for n := range cfg.LLM.Providers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if p := cfg.LLM.Providers[n]; p != nil {
			out = append(out, [2]string{"llm.providers." + n + ".apiKey", p.APIKey.Reveal()})
		}
	}
	out = append(out, [2]string{"gateway.authToken", cfg.Gateway.AuthToken.Reveal()})
	for _, an := range agentNames(cfg) {
		if a := cfg.Agents[an]; a != nil {
			for i, c := range a.Sandbox.Egress.Credentials {
				out = append(out, [2]string{fmt.Sprintf("agents.%s.sandbox.egress.credentials[%d].value", an, i), c.Value})
			}
		}
	}
	return out
}

// placeholderKeys are apiKey values that are not secrets (a local server's
// "none").
var placeholderKeys = []string{"none", "x", "-", "dummy", "unused", "not-needed", "ollama"}

func checkSecrets(r *report, cfg *config.Config) {
	// A value that came out of a ${VAR} reference is in Interpolated (by
	// its path, which has the loader's own spelling: compare values).
	fromEnv := map[string]bool{}
	for _, v := range cfg.Interpolated {
		fromEnv[v] = true
	}
	for _, s := range secretPaths(cfg) {
		path, v := s[0], s[1]
		if v == "" || fromEnv[v] || slices.Contains(placeholderKeys, strings.ToLower(v)) {
			continue
		}
		r.add(Warning, "secret.in-file",
			fmt.Sprintf("%s is written into %s instead of read from the environment: whoever reads the file (a backup, a shared screen) has it", path, cfg.File),
			fmt.Sprintf(`write %s: "${SOME_VAR}" and export SOME_VAR to the gateway`, path))
	}
}

// checkHomePerms reports $BEIGE_HOME, its sockets folder and the config
// when users other than the owner may read (or enter) them.
func checkHomePerms(r *report, o Options) {
	type item struct {
		path, what, id string
		dir            bool
	}
	items := []item{
		{o.Home.Dir, "$BEIGE_HOME", "perms.home", true},
		{o.Home.SocketsDir(), "the sockets folder", "perms.sockets", true},
	}
	cfgFile := o.Home.Config()
	if o.Config != nil && o.Config.File != "" {
		cfgFile = o.Config.File
	}
	items = append(items, item{cfgFile, "the config", "perms.config", false})
	for _, it := range items {
		fi, err := os.Lstat(it.path)
		if err != nil {
			if !os.IsNotExist(err) {
				r.add(Warning, it.id, fmt.Sprintf("cannot check %s (%s): %v", it.what, it.path, err), "")
			}
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if fi, err = os.Stat(it.path); err != nil {
				continue
			}
		}
		mode := fi.Mode().Perm()
		if mode&0o077 == 0 {
			continue
		}
		want := "0600"
		if it.dir {
			want = "0700"
		}
		sev := Warning
		if it.id == "perms.sockets" || (it.id == "perms.config" && mode&0o004 != 0) {
			// Other users reach the agents' tool sockets, or read the
			// config (its secrets, its token).
			sev = Error
		}
		r.add(sev, it.id, fmt.Sprintf("%s (%s) is mode %04o: other users of this machine can read it", it.what, it.path, mode),
			fmt.Sprintf("chmod %s %s", want, it.path))
	}
}

func checkAgent(r *report, o Options, name string, a *config.Agent) {
	if a == nil {
		return
	}
	s := &a.Sandbox
	p := "agents." + name + ".sandbox"
	switch {
	case s.Network == config.NetworkOpen || s.Network == config.NetworkBridge:
		r.add(Warning, "agent.network-open",
			fmt.Sprintf(`agent %s has %s.network: %q: its sandbox reaches the internet, the other agents and the host's services, and nothing of it is audited`, name, p, s.Network),
			fmt.Sprintf(`remove %s.network (default "proxy": only the egress proxy, audited), or use "none"`, p))
	case s.Network != "" && s.Network != config.NetworkProxy && s.Network != config.NetworkNone:
		r.add(Warning, "agent.network-open",
			fmt.Sprintf(`agent %s joins the Docker network %q, as open: nothing of its traffic is audited`, name, s.Network),
			fmt.Sprintf(`remove %s.network (default "proxy")`, p))
	}
	if s.User == "root" || s.User == "0:0" || strings.HasPrefix(s.User, "0:") {
		r.add(Warning, "agent.user-root",
			fmt.Sprintf("agent %s runs its code as root (%s.user: %q), which is host root without a user namespace: a container escape owns the host", name, p, s.User),
			fmt.Sprintf(`remove %s.user (default: the gateway's user, or 1000:1000)`, p))
	}
	if s.MemoryLimit <= 0 {
		r.add(Warning, "agent.no-memory-limit", fmt.Sprintf("agent %s has no memory limit: it can take the host's memory", name),
			fmt.Sprintf(`set %s.memoryLimit (default "3g")`, p))
	}
	if s.CPUs < 0 {
		r.add(Warning, "agent.no-cpu-limit", fmt.Sprintf("agent %s has no CPU limit (%s.cpus: -1): it can load every core of the host", name, p),
			fmt.Sprintf("set %s.cpus (default 1)", p))
	}
	if s.PidsLimit < 0 {
		r.add(Warning, "agent.no-pids-limit", fmt.Sprintf("agent %s has no process limit (%s.pidsLimit: -1): a fork bomb reaches the host's limit", name, p),
			fmt.Sprintf("set %s.pidsLimit (default 1024)", p))
	}
	ws := a.WorkspaceDir
	if ws == "" {
		ws = o.Home.Workspace(name)
	}
	for i, m := range s.ExtraMounts {
		mp := fmt.Sprintf("%s.extraMounts[%d]", p, i)
		if what := sensitiveMount(m.Source, o); what != "" {
			r.add(Error, "agent.mount-sensitive",
				fmt.Sprintf("agent %s mounts %s (%s) into its sandbox: %s", name, m.Source, mp, what),
				fmt.Sprintf("remove %s; mount only the folder the agent needs, read-only", mp))
			continue
		}
		if !m.ReadOnly && !within(m.Source, ws) {
			r.add(Warning, "agent.mount-rw-outside",
				fmt.Sprintf("agent %s may write to %s (%s), outside its workspace %s", name, m.Source, mp, ws),
				fmt.Sprintf("make %s read-only (readOnly: true, or \"host:container:ro\"), or mount a folder of the workspace", mp))
		}
	}
}

// sensitiveMount says why mounting source into a sandbox exposes the host,
// or "". A source is sensitive when it is, lies under or contains one of the
// sensitive paths (mounting /home contains ~/.ssh), before and after
// resolving symlinks.
func sensitiveMount(source string, o Options) string {
	type sp struct{ path, why string }
	list := []sp{
		{"/var/run/docker.sock", "the Docker socket: root on the host"},
		{"/run/docker.sock", "the Docker socket: root on the host"},
		{"/run/containerd", "the container runtime's sockets: root on the host"},
		{"/etc/shadow", "the host's password hashes"},
		{"/proc", "the host's processes"},
		{"/sys", "the host's kernel settings"},
		{"/dev", "the host's devices"},
		{"/boot", "the host's kernel"},
	}
	if o.UserHome != "" {
		for _, d := range []string{".ssh", ".aws", ".gnupg", ".kube", ".docker", ".config/gcloud", ".azure", ".netrc"} {
			list = append(list, sp{filepath.Join(o.UserHome, d), "the operator's credentials"})
		}
	}
	if o.Home.Dir != "" {
		list = append(list, sp{o.Home.Dir, "$BEIGE_HOME: the config's secrets and every agent's sockets and sessions"})
	}
	srcs := []string{filepath.Clean(source)}
	if real, err := filepath.EvalSymlinks(source); err == nil && real != srcs[0] {
		srcs = append(srcs, real)
	}
	for _, src := range srcs {
		if src == "/" {
			return "the host's whole filesystem"
		}
		for _, s := range list {
			if within(src, s.path) || within(s.path, src) {
				return s.why
			}
		}
	}
	return ""
}

// within reports whether path is dir or lies under it (lexically).
func within(path, dir string) bool {
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

func checkProviders(ctx context.Context, r *report, o Options) {
	if o.ProviderCheck == nil {
		return
	}
	names := make([]string, 0, len(o.Config.LLM.Providers))
	for n := range o.Config.LLM.Providers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		err := o.ProviderCheck(ctx, n, o.Config.LLM.Providers[n])
		switch {
		case err == nil:
			r.add(Info, "provider.ok", fmt.Sprintf("provider %s accepts its key", n), "")
		case errors.Is(err, ErrKeyRejected):
			r.add(Error, "provider.key-rejected", fmt.Sprintf("provider %s rejects its key: %v", n, err),
				fmt.Sprintf("set a valid key in the variable llm.providers.%s.apiKey names, and restart the gateway", n))
		default:
			r.add(Warning, "provider.unchecked", fmt.Sprintf("could not check provider %s: %v", n, err), "check the network and the provider's baseUrl")
		}
	}
}

func checkAudit(r *report, o Options) {
	if o.AuditVerify == nil {
		r.add(Info, "audit.unchecked", "the audit chain was not verified (this build cannot)", "")
		return
	}
	if _, err := os.Stat(o.Home.AuditLog()); os.IsNotExist(err) {
		return // no audit log yet
	}
	rep, err := o.AuditVerify(o.Home.LogsDir())
	switch {
	case err != nil:
		r.add(Error, "audit.unreadable", fmt.Sprintf("the audit chain could not be verified: %v", err), "check "+o.Home.LogsDir()+" (beige audit verify)")
	case rep.Broken != "":
		r.add(Error, "audit.chain-broken", "the audit chain is broken: "+rep.Broken,
			"records were changed, removed or reordered: keep the files for investigation, see beige audit verify")
	default:
		r.add(Info, "audit.ok", fmt.Sprintf("audit chain holds: %d records, head %d", rep.Records, rep.Head), "")
	}
}

func checkDisk(r *report, o Options) {
	if o.Home.Dir == "" {
		return
	}
	dir := o.Home.Dir
	if _, err := os.Stat(dir); err != nil {
		dir = filepath.Dir(dir)
	}
	free, err := o.DiskFree(dir)
	if err != nil {
		r.add(Warning, "disk.unknown", fmt.Sprintf("cannot tell the free space for %s: %v", o.Home.Dir, err), "")
		return
	}
	msg := fmt.Sprintf("%d MB free for $BEIGE_HOME (%s)", free>>20, o.Home.Dir)
	fix := "free space on that filesystem, or move $BEIGE_HOME (the audit log, sessions and, by default, the workspaces live there)"
	switch {
	case free < DiskErrorBytes:
		r.add(Error, "disk.low", msg+": the audit log and sessions are about to fail", fix)
	case free < DiskWarningBytes:
		r.add(Warning, "disk.low", msg, fix)
	default:
		r.add(Info, "disk.ok", msg, "")
	}
}
