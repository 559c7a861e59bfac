// Package docker is the sandbox.Runtime over the Docker Engine API: it
// creates, re-attaches, recreates and removes one hardened container per
// agent, and runs commands and file operations inside it, through a
// long-lived in-sandbox helper (the fast path) or per-call exec (the
// fallback).
package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/beige-dev/beige/internal/sandbox"
)

// More errors of the Docker runtime.
var (
	ErrNoImage = errors.New("sandbox: image not found")
	ErrClosed  = errors.New("sandbox: runtime closed")
	// ErrNameTaken: a container named beige-<agent> exists that this
	// gateway does not own (another $BEIGE_HOME's, or not beige's); it is
	// left alone.
	ErrNameTaken = errors.New("sandbox: container name taken")
)

// dockerAPI is the part of the Docker SDK the runtime uses; tests fake it.
type dockerAPI interface {
	Ping(ctx context.Context, options client.PingOptions) (client.PingResult, error)
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ImageRemove(ctx context.Context, image string, options client.ImageRemoveOptions) (client.ImageRemoveResult, error)
	ImageBuild(ctx context.Context, buildContext io.Reader, options client.ImageBuildOptions) (client.ImageBuildResult, error)
	imageImporter
	ContainerList(ctx context.Context, options client.ContainerListOptions) (client.ContainerListResult, error)
	ContainerInspect(ctx context.Context, id string, options client.ContainerInspectOptions) (client.ContainerInspectResult, error)
	ContainerCreate(ctx context.Context, options client.ContainerCreateOptions) (client.ContainerCreateResult, error)
	ContainerStart(ctx context.Context, id string, options client.ContainerStartOptions) (client.ContainerStartResult, error)
	ContainerRemove(ctx context.Context, id string, options client.ContainerRemoveOptions) (client.ContainerRemoveResult, error)
	ContainerPause(ctx context.Context, id string, options client.ContainerPauseOptions) (client.ContainerPauseResult, error)
	ContainerUnpause(ctx context.Context, id string, options client.ContainerUnpauseOptions) (client.ContainerUnpauseResult, error)
	ExecCreate(ctx context.Context, id string, options client.ExecCreateOptions) (client.ExecCreateResult, error)
	ExecAttach(ctx context.Context, execID string, options client.ExecAttachOptions) (client.ExecAttachResult, error)
	ExecInspect(ctx context.Context, execID string, options client.ExecInspectOptions) (client.ExecInspectResult, error)
	Close() error
}

var _ dockerAPI = (*client.Client)(nil)

// Options configures New. The zero value is the default.
type Options struct {
	// Logger receives the runtime's logs; nil discards them.
	Logger *slog.Logger
	// DisableHelper makes every call a per-call docker exec (≈60 ms) instead
	// of a request to the long-lived in-sandbox helper (≈1 ms).
	DisableHelper bool
	// Instance is stored in the LabelInstance label of every container this
	// runtime creates; Prune and Ensure touch only the containers of the
	// same instance. When empty it is InstanceOf(Home); set it to share
	// or split sandboxes otherwise (tests use one per test).
	Instance string
	// Home is the gateway's $BEIGE_HOME, stored in the LabelHome label (so
	// that a name clash can say whose container it is) and the default of
	// Instance.
	Home string
	// BuildNetwork is the network of RUN steps in BuildImage ("none" for a
	// build that needs no network); "" is the engine's default bridge.
	BuildNetwork string
	// OnHelperRestart, if set, is told of every in-sandbox helper started
	// again after the agent's previous one died or hung; OnExecFallback of
	// every call made by a per-call docker exec because the helper was not
	// available (the beige_sandbox_* metrics).
	OnHelperRestart, OnExecFallback func(agent string)
}

// InstanceOf returns the default instance of a $BEIGE_HOME: a short hash
// of its absolute, cleaned path ("" for "").
func InstanceOf(home string) string {
	if home == "" {
		return ""
	}
	if abs, err := filepath.Abs(home); err == nil {
		home = abs
	}
	sum := sha256.Sum256([]byte(filepath.Clean(home)))
	return hex.EncodeToString(sum[:6])
}

// Runtime is the sandbox.Runtime backed by a Docker engine (DOCKER_HOST is honoured
// and the API version is negotiated).
type Runtime struct {
	api      dockerAPI
	log      *slog.Logger
	noHelper bool
	instance string
	home     string
	buildNet string // Options.BuildNetwork

	closed atomic.Bool

	onRestart, onFallback func(agent string) // Options.OnHelperRestart, OnExecFallback

	mu    sync.Mutex
	boxes map[string]*dockerSandbox // by agent
	locks map[string]*agentLock     // serialises Ensure/Prune per agent
	sums  map[string]fileSumEntry   // helper binary sums by path
}

type agentLock struct {
	mu   sync.Mutex
	refs int
}

type fileSumEntry struct {
	size  int64
	mtime time.Time
	sum   string
}

var _ sandbox.Runtime = (*Runtime)(nil)

// New connects to the engine named by the environment (DOCKER_HOST,
// DOCKER_TLS_VERIFY, DOCKER_CERT_PATH). It does not contact the engine yet;
// call Ping to check that one answers.
func New(opts Options) (*Runtime, error) {
	c, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return newDocker(c, opts), nil
}

func newDocker(api dockerAPI, opts Options) *Runtime {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	instance := opts.Instance
	if instance == "" {
		instance = InstanceOf(opts.Home)
	}
	return &Runtime{
		api: api, log: log, noHelper: opts.DisableHelper, instance: instance, home: opts.Home,
		onRestart: opts.OnHelperRestart, onFallback: opts.OnExecFallback,
		buildNet: opts.BuildNetwork,
		boxes:    make(map[string]*dockerSandbox),
		locks:    make(map[string]*agentLock),
		sums:     make(map[string]fileSumEntry),
	}
}

// Ping checks that the engine answers.
func (d *Runtime) Ping(ctx context.Context) error {
	if _, err := d.api.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return fmt.Errorf("docker engine: %w", err)
	}
	return nil
}

// Ensure implements Runtime. A running container of this instance with the
// same config hash is re-attached, a stopped one started, and another
// container of this instance named beige-<agent> is removed and recreated.
// A container of another instance is never touched (ErrNameTaken), nor one
// without an instance label (made by an older beige, or not by beige),
// unless its /workspace is this agent's workspace.
func (d *Runtime) Ensure(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("start sandbox %q: %w", spec.Agent, err)
	}
	unlock := d.lock(spec.Agent)
	defer unlock()
	if d.closed.Load() {
		return nil, fmt.Errorf("start sandbox %q: %w", spec.Agent, ErrClosed)
	}
	sb, err := d.ensure(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("start sandbox %q: %w", spec.Agent, err)
	}
	return sb, nil
}

func (d *Runtime) ensure(ctx context.Context, spec sandbox.Spec) (*dockerSandbox, error) {
	img, err := d.api.ImageInspect(ctx, spec.Image)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("%w: %q is not in the Docker engine; build it with `beige sandbox build`", ErrNoImage, spec.Image)
		}
		return nil, fmt.Errorf("inspect image %q: %w", spec.Image, err)
	}
	var helperSum string
	if spec.HelperBinary != "" {
		if helperSum, err = d.helperSum(spec.HelperBinary); err != nil {
			return nil, fmt.Errorf("helper binary: %w", err)
		}
	}
	hash := ConfigHash(spec, helperSum, img.ID, d.instance)
	name := ContainerName(spec.Agent)
	log := d.log.With("agent", spec.Agent, "container", name)
	if spec.IsRoot() {
		log.Warn("agent code runs as root (sandbox.user); without a user namespace that is host root: files it makes in the workspace belong to root, and a sandbox escape is host root")
	}

	res, err := d.api.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	switch {
	case cerrdefs.IsNotFound(err):
		return d.create(ctx, spec, hash, log)
	case err != nil:
		return nil, fmt.Errorf("inspect container %s: %w", name, err)
	}
	c := res.Container
	var labels map[string]string
	if c.Config != nil {
		labels = c.Config.Labels
	}
	if err := d.owns(c, labels, spec, log); err != nil {
		return nil, err
	}
	if err := prepareHost(spec, log); err != nil { // a host folder may have gone meanwhile; docs may have changed
		return nil, err
	}
	sameMounts := labels[LabelMounts] == MountsID(spec)
	if labels[LabelConfigHash] == hash && !sameMounts {
		log.Warn("sandbox mounts show other files than the host has at their paths now (a mount source was replaced, e.g. BEIGE_HOME recreated); recreating",
			"id", shortID(c.ID))
	}
	if labels[LabelConfigHash] == hash && sameMounts && c.State != nil {
		switch c.State.Status {
		case container.StateRunning:
			log.Debug("sandbox re-attached", "id", shortID(c.ID))
			return d.track(ctx, spec, c.ID), nil
		case container.StatePaused:
			if sb := d.tracked(spec.Agent, c.ID); sb != nil && sb.isFrozen() {
				// Frozen by this runtime (a plugin is checking files): it
				// stays so until thawed.
				return sb, nil
			}
			// A gateway stopped while it had the sandbox frozen.
			if _, err := d.api.ContainerUnpause(ctx, c.ID, client.ContainerUnpauseOptions{}); err != nil {
				return nil, fmt.Errorf("unpause container %s: %w", name, err)
			}
			log.Info("sandbox was left paused; resumed it", "id", shortID(c.ID))
			return d.track(ctx, spec, c.ID), nil
		case container.StateCreated, container.StateExited:
			if _, err := d.api.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
				return nil, fmt.Errorf("start container %s: %w", name, err)
			}
			log.Info("sandbox started", "id", shortID(c.ID))
			return d.track(ctx, spec, c.ID), nil
		}
	}
	if labels[LabelConfigHash] != hash {
		log.Info("sandbox config changed; recreating", "id", shortID(c.ID),
			"state", stateOf(c), "old_hash", short(labels[LabelConfigHash]), "new_hash", short(hash))
	}
	d.untrack(spec.Agent, "")
	if _, err := d.api.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return nil, fmt.Errorf("remove old container %s: %w", name, err)
	}
	return d.create(ctx, spec, hash, log)
}

func (d *Runtime) create(ctx context.Context, spec sandbox.Spec, hash string, log *slog.Logger) (*dockerSandbox, error) {
	if err := prepareHost(spec, log); err != nil {
		return nil, err
	}
	if err := giveWorkspace(spec, log); err != nil { // no container of the agent runs now
		return nil, err
	}
	labels := map[string]string{
		LabelManaged:    "true",
		LabelAgent:      spec.Agent,
		LabelConfigHash: hash,
	}
	if d.instance != "" {
		labels[LabelInstance] = d.instance
	}
	if d.home != "" {
		labels[LabelHome] = d.home
	}
	labels[LabelMounts] = MountsID(spec) // after prepareHost made the sources
	cfg, host := containerConfig(spec, labels)
	name := ContainerName(spec.Agent)
	created, err := d.api.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: host})
	if err != nil {
		return nil, fmt.Errorf("create container %s: %w", name, err)
	}
	for _, w := range created.Warnings {
		log.Warn("docker create warning", "warning", w)
	}
	if _, err := d.api.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		// Do not leave a container that cannot start behind: the next Ensure
		// would find it "stopped with the right hash" and fail the same way.
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, rmErr := d.api.ContainerRemove(rmCtx, created.ID, client.ContainerRemoveOptions{Force: true}); rmErr != nil {
			log.Warn("remove container that failed to start", "err", rmErr)
		}
		return nil, fmt.Errorf("start container %s: %w", name, err)
	}
	log.Info("sandbox created", "id", shortID(created.ID), "image", spec.Image, "hash", short(hash))
	return d.track(ctx, spec, created.ID), nil
}

// owns returns nil when this runtime may re-attach to, start, or replace the
// existing container c named beige-<spec.Agent>, and ErrNameTaken otherwise.
// It is ours when it carries our instance label. One with another instance
// label is another gateway's. One without (made before instances existed,
// or by another program such as the original Beige) may be replaced only
// when its /workspace is a bind mount of exactly this agent's workspace:
// then it provably belongs to this home, and nothing is lost by removing it.
func (d *Runtime) owns(c container.InspectResponse, labels map[string]string, spec sandbox.Spec, log *slog.Logger) error {
	name := ContainerName(spec.Agent)
	inst := labels[LabelInstance]
	managed := labels[LabelManaged] == "true"
	switch {
	case managed && inst == d.instance:
		return nil
	case managed && inst != "":
		other := labels[LabelHome]
		if other == "" {
			other = "unknown"
		}
		return fmt.Errorf("%w: %s belongs to another beige gateway (instance %s, BEIGE_HOME %s); it is left alone: stop that gateway and remove the container, or give this agent another name",
			ErrNameTaken, name, inst, other)
	}
	src := workspaceSource(c)
	if spec.Workspace != "" && src != "" && filepath.Clean(src) == filepath.Clean(spec.Workspace) {
		what := "made by another program (no beige labels)"
		if managed {
			what = "made by an older beige (no instance label)"
		}
		log.Warn("replacing a container "+what+": its /workspace is this agent's workspace, a bind mount, so no file is lost",
			"id", shortID(c.ID), "workspace", src)
		return nil
	}
	if src == "" {
		src = "none"
	}
	if managed {
		return fmt.Errorf("%w: %s was made by an older beige for another BEIGE_HOME (its /workspace is %s, not %s); it is left alone: remove it, or give this agent another name",
			ErrNameTaken, name, src, spec.Workspace)
	}
	return fmt.Errorf("%w: %s exists and is not this gateway's (no beige labels; its /workspace is %s, not %s); it is left alone: remove or rename it",
		ErrNameTaken, name, src, spec.Workspace)
}

// workspaceSource returns the host path mounted at /workspace in c, or "".
func workspaceSource(c container.InspectResponse) string {
	for _, m := range c.Mounts {
		if path.Clean(m.Destination) == sandbox.WorkspacePath && m.Type == mount.TypeBind {
			return m.Source
		}
	}
	return ""
}

// track returns the sandbox handle of a running container, keeping the one
// (and its helper) we already have when the container is the same.
func (d *Runtime) track(ctx context.Context, spec sandbox.Spec, id string) *dockerSandbox {
	d.mu.Lock()
	old := d.boxes[spec.Agent]
	if old != nil && old.id == id {
		d.mu.Unlock()
		old.retryHelperNow() // the container may just have been started again
		return old
	}
	sb := newDockerSandbox(d, spec, id)
	d.boxes[spec.Agent] = sb
	d.mu.Unlock()
	if old != nil {
		old.close()
	}
	sb.helper(ctx) // start the helper now; on failure calls use docker exec
	return sb
}

// tracked returns the sandbox handle of agent when its container is id.
func (d *Runtime) tracked(agent, id string) *dockerSandbox {
	d.mu.Lock()
	defer d.mu.Unlock()
	if sb := d.boxes[agent]; sb != nil && sb.id == id {
		return sb
	}
	return nil
}

// untrack forgets the sandbox of agent (only if its container is id, when
// id is set) and closes its helper.
func (d *Runtime) untrack(agent, id string) {
	d.mu.Lock()
	sb := d.boxes[agent]
	if sb != nil && (id == "" || sb.id == id) {
		delete(d.boxes, agent)
	} else {
		sb = nil
	}
	d.mu.Unlock()
	if sb != nil {
		sb.close()
	}
}

// Prune implements Runtime: it removes the containers beige manages (of this
// Instance) whose agent is not in keep. A container without an instance
// label (an older beige's) is this home's, and pruned, only when its
// /workspace is Home's agents/<agent>/workspace. It goes on after an error
// and returns the agents removed, sorted, with the errors joined.
func (d *Runtime) Prune(ctx context.Context, keep []string) ([]string, error) {
	list, err := d.api.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelManaged+"=true"),
	})
	if err != nil {
		return nil, fmt.Errorf("prune sandboxes: list containers: %w", err)
	}
	var removed []string
	var errs []error
	for _, c := range list.Items {
		agent := c.Labels[LabelAgent]
		if agent == "" || slices.Contains(keep, agent) || !d.prunable(c, agent) {
			continue
		}
		unlock := d.lock(agent)
		d.untrack(agent, c.ID)
		_, err := d.api.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
		unlock()
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("prune sandbox %q: %w", agent, err))
			continue
		}
		d.log.Info("sandbox pruned", "agent", agent, "id", shortID(c.ID))
		removed = append(removed, agent)
	}
	slices.Sort(removed)
	return removed, errors.Join(errs...)
}

// prunable reports whether the managed container c is this instance's.
func (d *Runtime) prunable(c container.Summary, agent string) bool {
	inst := c.Labels[LabelInstance]
	if inst != "" || d.instance == "" || d.home == "" {
		return inst == d.instance
	}
	if !sandbox.ValidName(agent) {
		return false
	}
	want := filepath.Join(d.home, "agents", agent, "workspace")
	for _, m := range c.Mounts {
		if path.Clean(m.Destination) == sandbox.WorkspacePath && m.Type == mount.TypeBind && filepath.Clean(m.Source) == want {
			return true
		}
	}
	return false
}

// Close implements Runtime: it ends the helpers' streams (the helpers exit)
// and closes the engine connection. Containers keep running. Ensure and the
// calls of its sandboxes fail with ErrClosed afterwards.
func (d *Runtime) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.mu.Lock()
	boxes := make([]*dockerSandbox, 0, len(d.boxes))
	for _, sb := range d.boxes {
		boxes = append(boxes, sb)
	}
	clear(d.boxes)
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, sb := range boxes {
		wg.Go(sb.close)
	}
	wg.Wait()
	return d.api.Close()
}

// lock takes the per-agent lock and returns its release.
func (d *Runtime) lock(agent string) (unlock func()) {
	d.mu.Lock()
	l := d.locks[agent]
	if l == nil {
		l = &agentLock{}
		d.locks[agent] = l
	}
	l.refs++
	d.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		d.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(d.locks, agent)
		}
		d.mu.Unlock()
	}
}

// helperSum returns the sha256 of the helper binary, cached by size and mtime.
func (d *Runtime) helperSum(p string) (string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	e, ok := d.sums[p]
	d.mu.Unlock()
	if ok && e.size == st.Size() && e.mtime.Equal(st.ModTime()) {
		return e.sum, nil
	}
	sum, err := fileSum(p)
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	d.sums[p] = fileSumEntry{size: st.Size(), mtime: st.ModTime(), sum: sum}
	d.mu.Unlock()
	return sum, nil
}

func stateOf(c container.InspectResponse) string {
	if c.State == nil {
		return ""
	}
	return string(c.State.Status)
}

func shortID(id string) string { return short(id) }

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
