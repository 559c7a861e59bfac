// Package dockertest helps tests that need real sandboxes: it finds the
// Docker engine (skipping the test when none answers), makes a tiny busybox
// image without any registry, builds the static helper binary, and hands out
// specs whose containers are removed when the test ends.
//
// A typical test:
//
//	rt := dockertest.NewRuntime(t, docker.Options{})
//	sb, err := rt.Ensure(ctx, dockertest.NewSpec(t, "exec"))
package dockertest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/beige-dev/beige/internal/sandbox"
	"github.com/beige-dev/beige/internal/sandbox/docker"
)

// ImageTag is the test image. Its tag carries a version: change the file
// system built below and bump it.
const ImageTag = "beige-test:busybox-v1"

var (
	dockerOnce sync.Once
	dockerCli  *client.Client
	dockerErr  error
)

// RequireDocker returns a client of the engine named by DOCKER_HOST (or the
// default socket), or skips the test when no engine answers a ping.
func RequireDocker(t testing.TB) *client.Client {
	t.Helper()
	dockerOnce.Do(func() {
		c, err := client.New(client.FromEnv)
		if err != nil {
			dockerErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
			c.Close()
			dockerErr = err
			return
		}
		dockerCli = c
	})
	if dockerErr != nil {
		t.Skipf("no Docker engine answers (DOCKER_HOST=%q): %v", os.Getenv("DOCKER_HOST"), dockerErr)
	}
	return dockerCli
}

type onceResult struct {
	once sync.Once
	val  string
	skip string // reason to skip
	err  error
}

func (r *onceResult) get(t testing.TB) string {
	t.Helper()
	if r.skip != "" {
		t.Skip(r.skip)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.val
}

var imageResult onceResult

// Image returns ImageTag, importing it once per test process if the engine
// does not have it: a root file system of the host's static busybox with
// links for Applets, /tmp, /workspace and an /etc/passwd with root. It skips
// the test when there is no engine or no static busybox. It never pulls.
func Image(t testing.TB) string {
	t.Helper()
	c := RequireDocker(t)
	imageResult.once.Do(func() {
		imageResult.val, imageResult.skip, imageResult.err = ImageTag, "", nil
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := c.ImageInspect(ctx, ImageTag); err == nil {
			return
		} else if !cerrdefs.IsNotFound(err) {
			imageResult.err = fmt.Errorf("inspect %s: %w", ImageTag, err)
			return
		}
		rootfs, err := docker.BusyboxRootFS(docker.BusyboxPath)
		if errors.Is(err, docker.ErrNoBusybox) {
			imageResult.skip = "cannot build the test image: " + err.Error()
			return
		}
		if err != nil {
			imageResult.err = err
			return
		}
		imageResult.err = docker.ImportImage(ctx, c, rootfs, ImageTag, "beige test image")
	})
	return imageResult.get(t)
}

// HelperBinary builds ./cmd/beige-sandbox statically (CGO_ENABLED=0) once
// per test process and returns its path. (Test binaries built with -race are
// dynamically linked, hence the separate build.)
func HelperBinary(t testing.TB) string {
	t.Helper()
	return StaticBinary(t, "./cmd/beige-sandbox")
}

var (
	staticMu     sync.Mutex
	staticBuilds = map[string]*onceResult{}
)

// StaticBinary builds the main package pkg, a path relative to the module
// root (testdata folders work too), with CGO_ENABLED=0, once per test
// process, and returns the binary's path. The path is named by the binary's
// content, so test processes share it and nothing piles up in the temp dir.
func StaticBinary(t testing.TB, pkg string) string {
	t.Helper()
	staticMu.Lock()
	r := staticBuilds[pkg]
	if r == nil {
		r = &onceResult{}
		staticBuilds[pkg] = r
	}
	staticMu.Unlock()
	r.once.Do(func() { r.val, r.skip, r.err = buildStatic(pkg) })
	return r.get(t)
}

func buildStatic(pkg string) (path, skip string, err error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", "no go command to build " + pkg + ": " + err.Error(), nil
	}
	out, err := exec.Command(goBin, "env", "GOMOD").Output()
	if err != nil {
		return "", "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", "", errors.New("not inside the beige module")
	}
	tmp, err := os.MkdirTemp("", "beige-static-build-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(tmp)
	name := filepath.Base(pkg)
	bin := filepath.Join(tmp, name)
	cmd := exec.Command(goBin, "build", "-o", bin, pkg)
	cmd.Dir = filepath.Dir(gomod)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("build %s: %v\n%s", pkg, err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", "", err
	}
	sum := sha256.Sum256(data)
	dir := filepath.Join(os.TempDir(), "beige-sandbox-test", hex.EncodeToString(sum[:8]))
	dst := filepath.Join(dir, name)
	if _, err := os.Stat(dst); err == nil {
		return dst, "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	// Write beside, then rename: a concurrent test process may do the same.
	part := filepath.Join(dir, name+"."+rand.Text())
	if err := os.WriteFile(part, data, 0o755); err != nil {
		return "", "", err
	}
	if err := os.Rename(part, dst); err != nil {
		os.Remove(part)
		return "", "", err
	}
	return dst, "", nil
}

// Suffix returns a short random suffix for names that must not collide
// between tests and test processes.
func Suffix() string { return strings.ToLower(rand.Text()[:8]) }

// NewSpec returns a spec for a sandbox of a new agent named name-<random>,
// with the test image, the helper binary and its host folders under
// t.TempDir(). The container is removed when the test ends. It skips the
// test when there is no engine.
func NewSpec(t testing.TB, name string) sandbox.Spec {
	t.Helper()
	RequireDocker(t)
	agent := name + "-" + Suffix()
	dir := t.TempDir()
	spec := sandbox.Spec{
		Agent:        agent,
		Image:        Image(t),
		Workspace:    filepath.Join(dir, "workspace"),
		Launchers:    filepath.Join(dir, "launchers"),
		PackagesDir:  filepath.Join(dir, "packages"),
		SocketDir:    filepath.Join(dir, "socket"),
		HelperBinary: HelperBinary(t),
	}
	t.Cleanup(func() { RemoveContainer(t, agent) })
	return spec
}

// RemoveContainer force-removes the sandbox container of agent, if any.
// When the test does not run as root, it first makes the workspace
// writable so that t.TempDir can clean up files the sandbox's root made.
func RemoveContainer(t testing.TB, agent string) {
	t.Helper()
	c := RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := docker.ContainerName(agent)
	if os.Geteuid() != 0 {
		chmodWorkspace(ctx, c, name)
	}
	if _, err := c.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		t.Errorf("remove container %s: %v", name, err)
	}
}

func chmodWorkspace(ctx context.Context, c *client.Client, name string) {
	ex, err := c.ExecCreate(ctx, name, client.ExecCreateOptions{Cmd: []string{"chmod", "-R", "a+rwX", sandbox.WorkspacePath}})
	if err != nil {
		return
	}
	if _, err := c.ExecStart(ctx, ex.ID, client.ExecStartOptions{Detach: true}); err != nil {
		return
	}
	for range 100 {
		ins, err := c.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil || !ins.Running {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// NewRuntime returns a Docker runtime for the test, closed when it ends.
// Unless opts says otherwise, it has its own Instance (so its Prune leaves
// other tests' sandboxes alone) and logs to stderr only when BEIGE_TEST_LOG
// is set.
func NewRuntime(t testing.TB, opts docker.Options) *docker.Runtime {
	t.Helper()
	RequireDocker(t)
	if opts.Instance == "" {
		opts.Instance = "test-" + Suffix()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
		if os.Getenv("BEIGE_TEST_LOG") != "" {
			opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	}
	rt, err := docker.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}
