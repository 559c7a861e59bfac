package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/beige-dev/beige/internal/sandbox"
)

// fakeAPI is an in-memory engine for the error paths of the runtime.
type fakeAPI struct {
	mu         sync.Mutex
	images     map[string]string // ref -> ID
	containers map[string]*fakeContainer
	calls      []string
	fail       map[string]error // method -> error to return
	nextID     int
	buildBody  string
	buildCtx   []string // files in the last build context
}

type fakeContainer struct {
	id, name string
	labels   map[string]string
	state    container.ContainerState
	mounts   []container.MountPoint
}

func newFakeAPI() *fakeAPI {
	return &fakeAPI{images: map[string]string{"img:1": "sha256:aaa"}, containers: map[string]*fakeContainer{}, fail: map[string]error{}}
}

func (f *fakeAPI) record(call string) error {
	f.calls = append(f.calls, call)
	return f.fail[strings.Fields(call)[0]]
}

func (f *fakeAPI) find(idOrName string) *fakeContainer {
	for _, c := range f.containers {
		if c.id == idOrName || c.name == idOrName {
			return c
		}
	}
	return nil
}

func (f *fakeAPI) Ping(context.Context, client.PingOptions) (client.PingResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return client.PingResult{}, f.record("Ping")
}

func (f *fakeAPI) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("ImageInspect " + ref); err != nil {
		return client.ImageInspectResult{}, err
	}
	id, ok := f.images[ref]
	if !ok {
		return client.ImageInspectResult{}, cerrdefs.ErrNotFound.WithMessage("no such image")
	}
	return client.ImageInspectResult{InspectResponse: image.InspectResponse{ID: id}}, nil
}

func (f *fakeAPI) ContainerPause(_ context.Context, id string, _ client.ContainerPauseOptions) (client.ContainerPauseResult, error) {
	return client.ContainerPauseResult{}, f.record("ContainerPause " + id)
}

func (f *fakeAPI) ContainerUnpause(_ context.Context, id string, _ client.ContainerUnpauseOptions) (client.ContainerUnpauseResult, error) {
	return client.ContainerUnpauseResult{}, f.record("ContainerUnpause " + id)
}

func (f *fakeAPI) ImageImport(context.Context, client.ImageImportSource, string, client.ImageImportOptions) (client.ImageImportResult, error) {
	return nil, errors.New("fake: no import")
}

func (f *fakeAPI) ImageBuild(_ context.Context, r io.Reader, opts client.ImageBuildOptions) (client.ImageBuildResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("ImageBuild " + strings.Join(opts.Tags, ",")); err != nil {
		return client.ImageBuildResult{}, err
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		f.buildCtx = append(f.buildCtx, h.Name)
	}
	return client.ImageBuildResult{Body: io.NopCloser(strings.NewReader(f.buildBody))}, nil
}

func (f *fakeAPI) ContainerList(_ context.Context, opts client.ContainerListOptions) (client.ContainerListResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("ContainerList"); err != nil {
		return client.ContainerListResult{}, err
	}
	var res client.ContainerListResult
	for _, c := range f.containers {
		if c.labels[LabelManaged] == "true" {
			res.Items = append(res.Items, container.Summary{ID: c.id, Names: []string{"/" + c.name}, Labels: c.labels, State: c.state, Mounts: c.mounts})
		}
	}
	slices.SortFunc(res.Items, func(a, b container.Summary) int { return strings.Compare(a.ID, b.ID) })
	return res, nil
}

func (f *fakeAPI) ContainerInspect(_ context.Context, id string, _ client.ContainerInspectOptions) (client.ContainerInspectResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("ContainerInspect " + id); err != nil {
		return client.ContainerInspectResult{}, err
	}
	c := f.find(id)
	if c == nil {
		return client.ContainerInspectResult{}, cerrdefs.ErrNotFound.WithMessage("no such container")
	}
	return client.ContainerInspectResult{Container: container.InspectResponse{
		ID: c.id, Name: "/" + c.name,
		State:  &container.State{Status: c.state},
		Config: &container.Config{Labels: c.labels},
		Mounts: c.mounts,
	}}, nil
}

func (f *fakeAPI) ContainerCreate(_ context.Context, opts client.ContainerCreateOptions) (client.ContainerCreateResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("ContainerCreate " + opts.Name); err != nil {
		return client.ContainerCreateResult{}, err
	}
	if f.find(opts.Name) != nil {
		return client.ContainerCreateResult{}, cerrdefs.ErrConflict.WithMessage("name in use")
	}
	f.nextID++
	c := &fakeContainer{id: fmt.Sprintf("id%d", f.nextID), name: opts.Name, labels: opts.Config.Labels, state: container.StateCreated}
	for _, m := range opts.HostConfig.Mounts {
		c.mounts = append(c.mounts, container.MountPoint{Type: m.Type, Source: m.Source, Destination: m.Target, RW: !m.ReadOnly})
	}
	f.containers[c.id] = c
	return client.ContainerCreateResult{ID: c.id}, nil
}

func (f *fakeAPI) ContainerStart(_ context.Context, id string, _ client.ContainerStartOptions) (client.ContainerStartResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("ContainerStart " + id); err != nil {
		return client.ContainerStartResult{}, err
	}
	f.find(id).state = container.StateRunning
	return client.ContainerStartResult{}, nil
}

func (f *fakeAPI) ContainerRemove(_ context.Context, id string, _ client.ContainerRemoveOptions) (client.ContainerRemoveResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("ContainerRemove " + id); err != nil {
		return client.ContainerRemoveResult{}, err
	}
	c := f.find(id)
	if c == nil {
		return client.ContainerRemoveResult{}, cerrdefs.ErrNotFound.WithMessage("no such container")
	}
	delete(f.containers, c.id)
	return client.ContainerRemoveResult{}, nil
}

func (f *fakeAPI) ExecCreate(_ context.Context, id string, _ client.ExecCreateOptions) (client.ExecCreateResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("ExecCreate " + id); err != nil {
		return client.ExecCreateResult{}, err
	}
	return client.ExecCreateResult{}, cerrdefs.ErrConflict.WithMessage("container is not running")
}

func (f *fakeAPI) ImageRemove(context.Context, string, client.ImageRemoveOptions) (client.ImageRemoveResult, error) {
	return client.ImageRemoveResult{}, errors.New("not faked")
}

func (f *fakeAPI) ExecAttach(context.Context, string, client.ExecAttachOptions) (client.ExecAttachResult, error) {
	return client.ExecAttachResult{}, errors.New("not faked")
}

func (f *fakeAPI) ExecInspect(context.Context, string, client.ExecInspectOptions) (client.ExecInspectResult, error) {
	return client.ExecInspectResult{}, errors.New("not faked")
}

func (f *fakeAPI) Close() error { return nil }

func (f *fakeAPI) callList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.calls)
	f.calls = nil
	return out
}

func fakeSpec(t *testing.T, agent string) sandbox.Spec {
	dir := t.TempDir()
	return sandbox.Spec{Agent: agent, Image: "img:1", Workspace: filepath.Join(dir, "ws")}
}

func hasCall(calls []string, prefix string) bool {
	return slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, prefix) })
}

func TestEnsureFake(t *testing.T) {
	ctx := context.Background()
	f := newFakeAPI()
	d := newDocker(f, Options{DisableHelper: true})
	spec := fakeSpec(t, "a")

	sb, err := d.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	calls := f.callList()
	if !hasCall(calls, "ContainerCreate beige-a") || !hasCall(calls, "ContainerStart id1") {
		t.Fatalf("calls = %q", calls)
	}
	if _, err := os.Stat(spec.Workspace); err != nil {
		t.Errorf("workspace not created: %v", err)
	}

	// Same spec, running: re-attached, same handle, nothing created.
	sb2, err := d.Ensure(ctx, spec)
	if err != nil || sb2 != sb {
		t.Fatalf("re-attach: %v, same handle %v", err, sb2 == sb)
	}
	if calls := f.callList(); hasCall(calls, "ContainerCreate") || hasCall(calls, "ContainerStart") {
		t.Errorf("re-attach calls = %q", calls)
	}

	// Stopped with the same hash: started, same ID.
	f.containers["id1"].state = container.StateExited
	sb3, err := d.Ensure(ctx, spec)
	if err != nil || sb3.ID() != "id1" {
		t.Fatalf("restart: %v %v", err, sb3)
	}
	if calls := f.callList(); !hasCall(calls, "ContainerStart id1") || hasCall(calls, "ContainerCreate") {
		t.Errorf("restart calls = %q", calls)
	}

	// Changed spec: removed and recreated.
	spec.Env = map[string]string{"X": "1"}
	sb4, err := d.Ensure(ctx, spec)
	if err != nil || sb4.ID() == "id1" {
		t.Fatalf("recreate: %v %v", err, sb4)
	}
	calls = f.callList()
	ri, ci := slices.Index(calls, "ContainerRemove id1"), slices.Index(calls, "ContainerCreate beige-a")
	if ri < 0 || ci < ri {
		t.Errorf("recreate calls = %q", calls)
	}

	// A paused container (a gateway died while it had it frozen) is
	// resumed and kept.
	f.containers[sb4.ID()].state = container.StatePaused
	if sb5, err := d.Ensure(ctx, spec); err != nil || sb5.ID() != sb4.ID() || !slices.Contains(f.callList(), "ContainerUnpause "+sb4.ID()) {
		t.Errorf("paused: %v, calls %q", err, f.callList())
	}
}

func TestEnsureErrors(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")

	t.Run("missing image", func(t *testing.T) {
		d := newDocker(newFakeAPI(), Options{})
		spec := fakeSpec(t, "a")
		spec.Image = "nope:latest"
		_, err := d.Ensure(ctx, spec)
		if !errors.Is(err, ErrNoImage) || !strings.Contains(err.Error(), "beige sandbox build") ||
			!strings.Contains(err.Error(), `"nope:latest"`) || !strings.HasPrefix(err.Error(), `start sandbox "a": `) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("invalid spec", func(t *testing.T) {
		d := newDocker(newFakeAPI(), Options{})
		if _, err := d.Ensure(ctx, sandbox.Spec{Agent: "a/b", Image: "img:1"}); err == nil {
			t.Error("accepted")
		}
	})
	t.Run("create fails", func(t *testing.T) {
		f := newFakeAPI()
		f.fail["ContainerCreate"] = boom
		d := newDocker(f, Options{})
		_, err := d.Ensure(ctx, fakeSpec(t, "a"))
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), `start sandbox "a": create container beige-a`) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("start fails removes the container", func(t *testing.T) {
		f := newFakeAPI()
		f.fail["ContainerStart"] = boom
		d := newDocker(f, Options{})
		_, err := d.Ensure(ctx, fakeSpec(t, "a"))
		if !errors.Is(err, boom) {
			t.Errorf("err = %v", err)
		}
		if len(f.containers) != 0 {
			t.Errorf("container left behind: %v", f.callList())
		}
	})
	t.Run("inspect fails", func(t *testing.T) {
		f := newFakeAPI()
		f.fail["ContainerInspect"] = boom
		d := newDocker(f, Options{})
		if _, err := d.Ensure(ctx, fakeSpec(t, "a")); !errors.Is(err, boom) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("foreign container with our name", func(t *testing.T) {
		f := newFakeAPI()
		f.containers["x"] = &fakeContainer{id: "x", name: "beige-a", state: container.StateRunning}
		d := newDocker(f, Options{})
		_, err := d.Ensure(ctx, fakeSpec(t, "a"))
		if !errors.Is(err, ErrNameTaken) || !strings.Contains(err.Error(), "no beige labels") {
			t.Errorf("err = %v", err)
		}
		if f.containers["x"] == nil {
			t.Error("foreign container removed")
		}
	})
	t.Run("closed", func(t *testing.T) {
		d := newDocker(newFakeAPI(), Options{})
		d.Close()
		if _, err := d.Ensure(ctx, fakeSpec(t, "a")); !errors.Is(err, ErrClosed) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("exec on stopped container", func(t *testing.T) {
		d := newDocker(newFakeAPI(), Options{DisableHelper: true})
		sb, err := d.Ensure(ctx, fakeSpec(t, "a"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = sb.Exec(ctx, sandbox.ExecRequest{Command: "true"})
		if !errors.Is(err, sandbox.ErrNotRunning) || !strings.HasPrefix(err.Error(), `exec in sandbox "a": `) {
			t.Errorf("err = %v", err)
		}
		if _, _, err := sb.ReadFile(ctx, "x", 10); !errors.Is(err, sandbox.ErrNotRunning) {
			t.Errorf("read err = %v", err)
		}
		if err := sb.WriteFile(ctx, "x", nil); !errors.Is(err, sandbox.ErrNotRunning) {
			t.Errorf("write err = %v", err)
		}
	})
}

func TestPruneFake(t *testing.T) {
	ctx := context.Background()
	f := newFakeAPI()
	d := newDocker(f, Options{Instance: "mine"})
	for _, a := range []string{"a", "b", "c"} {
		if _, err := d.Ensure(ctx, fakeSpec(t, a)); err != nil {
			t.Fatal(err)
		}
	}
	// Another instance's sandbox and an unmanaged container are left alone.
	f.containers["other"] = &fakeContainer{id: "other", name: "beige-z", state: container.StateRunning,
		labels: map[string]string{LabelManaged: "true", LabelAgent: "z", LabelInstance: "theirs"}}
	f.containers["plain"] = &fakeContainer{id: "plain", name: "postgres", state: container.StateRunning}

	removed, err := d.Prune(ctx, []string{"b"})
	if err != nil || !slices.Equal(removed, []string{"a", "c"}) {
		t.Fatalf("Prune = %q, %v", removed, err)
	}
	var left []string
	for _, c := range f.containers {
		left = append(left, c.name)
	}
	slices.Sort(left)
	if !slices.Equal(left, []string{"beige-b", "beige-z", "postgres"}) {
		t.Errorf("left = %q", left)
	}

	boom := errors.New("boom")
	f.fail["ContainerRemove"] = boom
	if _, err := d.Prune(ctx, nil); !errors.Is(err, boom) || !strings.Contains(err.Error(), `prune sandbox "b"`) {
		t.Errorf("Prune err = %v", err)
	}
	f.fail["ContainerList"] = boom
	if _, err := d.Prune(ctx, nil); !errors.Is(err, boom) {
		t.Errorf("Prune err = %v", err)
	}
}

func TestBuildImageFake(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "files"), 0o755)
	os.WriteFile(filepath.Join(dir, "files", "a.txt"), []byte("a"), 0o644)
	os.Symlink("a.txt", filepath.Join(dir, "files", "link"))

	f := newFakeAPI()
	f.buildBody = `{"stream":"Step 1/1 : FROM scratch\n"}
{"status":"Downloading","progressDetail":{"current":10,"total":100},"progress":"[==>   ]","id":"abc"}
{"status":"Pulling fs layer","id":"abc"}
{"aux":{"ID":"sha256:x"}}
{"stream":"Successfully built x\n"}
`
	d := newDocker(f, Options{})
	var out bytes.Buffer
	if err := d.BuildImage(context.Background(), dir, "beige-sandbox:latest", &out); err != nil {
		t.Fatal(err)
	}
	want := "Step 1/1 : FROM scratch\nabc: Pulling fs layer\nSuccessfully built x\n"
	if out.String() != want {
		t.Errorf("progress = %q, want %q", out.String(), want)
	}
	slices.Sort(f.buildCtx)
	if !slices.Equal(f.buildCtx, []string{"Dockerfile", "files/", "files/a.txt", "files/link"}) {
		t.Errorf("context = %q", f.buildCtx)
	}

	f.buildBody = `{"stream":"Step 1/2\n"}
{"errorDetail":{"message":"pull access denied"},"error":"pull access denied"}
`
	err := d.BuildImage(context.Background(), dir, "x:1", nil)
	if err == nil || !strings.Contains(err.Error(), "pull access denied") || !strings.HasPrefix(err.Error(), `build image "x:1": `) {
		t.Errorf("err = %v", err)
	}
	if err := d.BuildImage(context.Background(), t.TempDir(), "x:1", nil); err == nil {
		t.Error("folder without Dockerfile accepted")
	}
}

// A gateway owns only the containers of its own instance (by default a hash
// of its $BEIGE_HOME). Another instance's container is never removed or taken
// over; one without an instance label (an older beige, or the original
// Beige) is replaced only when its /workspace is this agent's workspace.
func TestEnsureOwnership(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	ours := InstanceOf(home)
	bind := func(src string) []container.MountPoint {
		return []container.MountPoint{{Type: mount.TypeBind, Source: src, Destination: sandbox.WorkspacePath, RW: true}}
	}
	for _, tt := range []struct {
		name     string
		labels   map[string]string
		mounts   func(ws string) []container.MountPoint
		replaced bool
		errHas   []string // when not replaced
	}{
		{"another gateway's", map[string]string{LabelManaged: "true", LabelAgent: "a", LabelInstance: "0123456789ab", LabelHome: "/home/bob/.beige"},
			func(ws string) []container.MountPoint { return bind(ws) }, false,
			[]string{"beige-a belongs to another beige gateway", "/home/bob/.beige"}},
		{"older beige, this workspace", map[string]string{LabelManaged: "true", LabelAgent: "a", LabelConfigHash: "x"},
			func(ws string) []container.MountPoint { return bind(ws) }, true, nil},
		{"older beige, another workspace", map[string]string{LabelManaged: "true", LabelAgent: "a"},
			func(string) []container.MountPoint { return bind("/home/bob/.beige/agents/a/workspace") }, false,
			[]string{"beige-a was made by an older beige", "/home/bob/.beige/agents/a/workspace"}},
		{"original Beige, this workspace", nil,
			func(ws string) []container.MountPoint { return bind(ws + "/") }, true, nil},
		{"not beige's, no workspace", map[string]string{"com.example": "1"},
			func(string) []container.MountPoint { return nil }, false, []string{"beige-a exists and is not this gateway's"}},
		{"not beige's, workspace is a volume", nil,
			func(ws string) []container.MountPoint {
				return []container.MountPoint{{Type: mount.TypeVolume, Source: ws, Destination: sandbox.WorkspacePath}}
			}, false, []string{"not this gateway's"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAPI()
			spec := fakeSpec(t, "a")
			f.containers["x"] = &fakeContainer{id: "x", name: "beige-a", labels: tt.labels, state: container.StateRunning, mounts: tt.mounts(spec.Workspace)}
			d := newDocker(f, Options{Home: home, DisableHelper: true})
			sb, err := d.Ensure(ctx, spec)
			calls := f.callList()
			if tt.replaced {
				if err != nil || sb.ID() == "x" || f.containers["x"] != nil || !hasCall(calls, "ContainerCreate beige-a") {
					t.Fatalf("not replaced: err %v, calls %q", err, calls)
				}
				if got := f.find("beige-a").labels; got[LabelInstance] != ours || got[LabelHome] != home {
					t.Errorf("new container's labels = %v", got)
				}
				return
			}
			if !errors.Is(err, ErrNameTaken) {
				t.Fatalf("err = %v, want ErrNameTaken", err)
			}
			for _, want := range tt.errHas {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want it to say %q", err, want)
				}
			}
			if f.containers["x"] == nil || hasCall(calls, "ContainerRemove") || hasCall(calls, "ContainerCreate") {
				t.Errorf("the other container was touched: %q", calls)
			}
		})
	}
}

// Prune removes only this instance's containers.
func TestPruneOwnInstanceOnly(t *testing.T) {
	f := newFakeAPI()
	mine, theirs := InstanceOf("/home/me/.beige"), InstanceOf("/home/bob/.beige")
	f.containers["1"] = &fakeContainer{id: "1", name: "beige-old", labels: map[string]string{LabelManaged: "true", LabelAgent: "old", LabelInstance: mine}}
	f.containers["2"] = &fakeContainer{id: "2", name: "beige-bobs", labels: map[string]string{LabelManaged: "true", LabelAgent: "bobs", LabelInstance: theirs}}
	f.containers["3"] = &fakeContainer{id: "3", name: "beige-legacy", labels: map[string]string{LabelManaged: "true", LabelAgent: "legacy"},
		mounts: []container.MountPoint{{Type: mount.TypeBind, Source: "/home/bob/.beige/agents/legacy/workspace", Destination: sandbox.WorkspacePath}}}
	// An older beige's container of this home (its workspace says so).
	f.containers["4"] = &fakeContainer{id: "4", name: "beige-mylegacy", labels: map[string]string{LabelManaged: "true", LabelAgent: "mylegacy"},
		mounts: []container.MountPoint{{Type: mount.TypeBind, Source: "/home/me/.beige/agents/mylegacy/workspace", Destination: sandbox.WorkspacePath}}}
	d := newDocker(f, Options{Home: "/home/me/.beige/"})
	removed, err := d.Prune(context.Background(), []string{"kept"})
	if err != nil || !slices.Equal(removed, []string{"mylegacy", "old"}) {
		t.Errorf("Prune = %v, %v; want [mylegacy old]", removed, err)
	}
	if f.containers["2"] == nil || f.containers["3"] == nil {
		t.Error("Prune removed a container of another instance")
	}
}

func TestInstanceOf(t *testing.T) {
	a := InstanceOf("/home/me/.beige")
	if a == "" || len(a) != 12 || InstanceOf("/home/me/.beige/") != a || InstanceOf("/home/me/x/../.beige") != a {
		t.Errorf("InstanceOf is not a short hash of the cleaned path: %q", a)
	}
	if InstanceOf("/home/bob/.beige") == a {
		t.Error("two homes share an instance")
	}
}

// A running container whose mount sources were replaced on the host (same
// paths, other files: $BEIGE_HOME recreated) is recreated, not re-attached.
func TestEnsureMountsReplaced(t *testing.T) {
	ctx := context.Background()
	f := newFakeAPI()
	spec := fakeSpec(t, "a")
	spec.Launchers = filepath.Join(filepath.Dir(spec.Workspace), "launchers")
	d := newDocker(f, Options{DisableHelper: true})
	sb, err := d.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	// A restarted gateway with the same host: re-attached.
	d2 := newDocker(f, Options{DisableHelper: true})
	if sb2, err := d2.Ensure(ctx, spec); err != nil || sb2.ID() != sb.ID() {
		t.Fatalf("same mounts: %v, id %v want %v", err, sb2, sb.ID())
	}
	for _, src := range []string{spec.Workspace, spec.Launchers} {
		if err := os.Rename(src, src+".old"); err != nil {
			t.Fatal(err)
		}
		d3 := newDocker(f, Options{DisableHelper: true})
		f.callList()
		sb3, err := d3.Ensure(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		calls := f.callList()
		if sb3.ID() == sb.ID() || !hasCall(calls, "ContainerRemove "+sb.ID()) || !hasCall(calls, "ContainerCreate beige-a") {
			t.Errorf("%s replaced: re-attached to %s (calls %q)", filepath.Base(src), sb3.ID(), calls)
		}
		sb = sb3
	}
}

// Ensure never thaws a sandbox this runtime froze itself (a plugin is
// checking workspace files): only a freeze left by a stopped gateway.
func TestEnsureKeepsOwnFreeze(t *testing.T) {
	ctx := context.Background()
	f := newFakeAPI()
	d := newDocker(f, Options{DisableHelper: true})
	spec := fakeSpec(t, "a")
	sb, err := d.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	thaw, err := sb.(sandbox.Freezer).Freeze(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.containers[sb.ID()].state = container.StatePaused
	f.callList()
	if sb2, err := d.Ensure(ctx, spec); err != nil || sb2 != sb {
		t.Fatalf("Ensure while frozen: %v", err)
	}
	if calls := f.callList(); hasCall(calls, "ContainerUnpause") {
		t.Errorf("Ensure thawed the sandbox while a freeze was held: %q", calls)
	}
	thaw()
	if calls := f.callList(); !hasCall(calls, "ContainerUnpause") {
		t.Errorf("thaw did not unpause: %q", calls)
	}
	// A freeze of a container that has gone says ErrNotRunning.
	f.fail["ContainerPause"] = cerrdefs.ErrNotFound.WithMessage("no such container")
	if _, err := sb.(sandbox.Freezer).Freeze(ctx); !errors.Is(err, sandbox.ErrNotRunning) {
		t.Errorf("freeze of a removed container: %v", err)
	}
}
