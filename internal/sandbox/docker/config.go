package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/beige-dev/beige/internal/atomicfile"
	"github.com/beige-dev/beige/internal/egress/trust"
	"github.com/beige-dev/beige/internal/sandbox"
)

const (
	// unprivilegedPortSysctl is set to 1024 in every sandbox with its own
	// network namespace: Docker >= 20.10 sets it to 0, which lets any user
	// bind ports below 1024 although NET_BIND_SERVICE is dropped.
	unprivilegedPortSysctl = "net.ipv4.ip_unprivileged_port_start"
)

// Labels on every container the Docker runtime creates.
const (
	LabelManaged    = "dev.beige.managed"     // "true"
	LabelAgent      = "dev.beige.agent"       // the agent name
	LabelConfigHash = "dev.beige.config-hash" // ConfigHash of the spec
	LabelInstance   = "dev.beige.instance"    // Options.Instance (by default derived from $BEIGE_HOME)
	LabelUser       = "dev.beige.user"        // the uid:gid agent code runs as (the container's own user is root)
	LabelHome       = "dev.beige.home"        // Options.Home: the $BEIGE_HOME of the gateway that made it
	LabelMounts     = "dev.beige.mounts"      // MountsID at create time: which files the bind mounts showed
)

// ContainerPrefix starts the name (and hostname) of every sandbox container.
const ContainerPrefix = "beige-"

// containerLayout is part of the config hash; bump it when the way a Spec
// becomes a container changes, so that old containers are recreated.
const containerLayout = 2

// ContainerName returns the container name of an agent's sandbox.
func ContainerName(agent string) string { return ContainerPrefix + agent }

// ConfigHash returns the hex sha256 that identifies the container a spec
// gives. helperSum is the sha256 of the helper binary's content (so an
// upgraded binary recreates the containers), imageID the engine's ID of
// spec.Image (so a rebuilt image does too) and instance Options.Instance.
// Zero values and their documented defaults hash the same.
func ConfigHash(spec sandbox.Spec, helperSum, imageID, instance string) string {
	s := spec
	if len(s.Packages) == 0 {
		s.Packages = nil
	}
	if len(s.Skills) == 0 {
		s.Skills = nil
	}
	if len(s.Env) == 0 {
		s.Env = nil
	}
	if len(s.ExtraMounts) == 0 {
		s.ExtraMounts = nil
	}
	if s.PidsLimit == 0 {
		s.PidsLimit = sandbox.DefaultPidsLimit
	}
	if s.Network == "" {
		s.Network = sandbox.DefaultNetwork
	}
	s.User = s.EffectiveUser()
	if s.MemoryLimit == 0 {
		s.MemoryLimit = sandbox.DefaultMemoryLimit
	} else if s.MemoryLimit < 0 {
		s.MemoryLimit = -1
	}
	if s.CPUs == 0 {
		s.CPUs = sandbox.DefaultCPUs
	} else if s.CPUs < 0 {
		s.CPUs = -1
	}
	in := struct {
		Layout   int
		Spec     sandbox.Spec
		Helper   string
		Image    string
		Instance string
	}{containerLayout, s, helperSum, imageID, instance}
	b, err := json.Marshal(in)
	if err != nil {
		panic("sandbox: hash spec: " + err.Error()) // plain data; cannot fail
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// MountsID identifies the files the spec's bind mounts show: a short hash
// of the device and inode of every mount source. A running container whose
// label differs shows other files than the host has at those paths now
// (say $BEIGE_HOME was recreated), so it is recreated, not re-attached.
func MountsID(spec sandbox.Spec) string {
	h := sha256.New()
	for _, m := range mounts(spec) {
		fi, err := os.Stat(m.Source) // the engine follows links in a source too
		if err != nil {
			fmt.Fprintf(h, "%s=missing\n", m.Target)
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			fmt.Fprintf(h, "%s=%d:%d\n", m.Target, st.Dev, st.Ino)
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// containerConfig turns spec into the engine's create request. It is pure:
// prepareHost creates what must exist on the host first.
func containerConfig(spec sandbox.Spec, labels map[string]string) (*container.Config, *container.HostConfig) {
	user := spec.EffectiveUser()
	network, netEnv := networkOf(spec)
	env := []string{"PATH=" + sandbox.DefaultPATH}
	if _, ok := spec.Env["HOME"]; !ok {
		env = append(env, "HOME="+sandbox.HomePath)
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		if _, ok := netEnv[k]; k == "PATH" || ok {
			continue // PATH is always DefaultPATH; the network's variables win
		}
		env = append(env, k+"="+spec.Env[k])
	}
	for _, k := range slices.Sorted(maps.Keys(netEnv)) {
		env = append(env, k+"="+netEnv[k])
	}
	cmd := []string{sandbox.HelperPath, "idle"}
	if spec.HelperBinary == "" {
		// No helper binary: idle with the image's shell.
		cmd = []string{"/bin/sh", "-c", `trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done`}
	}
	cfg := &container.Config{
		Hostname: ContainerName(spec.Agent),
		Image:    spec.Image,
		// The container's own user is root, so that the in-sandbox helper
		// (exec'd as root) keeps SETUID, SETGID and KILL: Docker empties
		// every process's effective capabilities, execs as root included,
		// when Config.User is not root. Agent code never runs as it: the
		// helper starts every call as the agent's user, and every exec of
		// agent code names that user (LabelUser shows it in docker inspect).
		User:       sandbox.RootUser,
		Env:        env,
		Entrypoint: cmd, // replaces the image's entrypoint; the image's CMD is not used
		WorkingDir: sandbox.WorkspacePath,
		Labels:     maps.Clone(labels),
	}
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	cfg.Labels[LabelUser] = user

	pids := spec.PidsLimit
	if pids == 0 {
		pids = sandbox.DefaultPidsLimit
	}
	memory := spec.MemoryLimit
	if memory == 0 {
		memory = sandbox.DefaultMemoryLimit
	} else if memory < 0 {
		memory = 0 // the engine's "no limit"
	}
	cpus := spec.CPUs
	if cpus == 0 {
		cpus = sandbox.DefaultCPUs
	} else if cpus < 0 {
		cpus = 0 // the engine's "no limit"
	}
	capDrop, capAdd, secOpt := spec.CapDrop, spec.CapAdd, spec.SecurityOpt
	if capDrop == nil {
		capDrop = sandbox.DefaultCapDrop
	}
	if capAdd == nil {
		capAdd = sandbox.DefaultCapAdd
		if spec.IsRoot() {
			capAdd = sandbox.RootCapAdd
		}
	}
	if secOpt == nil {
		secOpt = sandbox.DefaultSecurityOpt
	}
	var sysctls map[string]string
	if nm := container.NetworkMode(network); !nm.IsHost() && !nm.IsContainer() {
		// Only a container with its own network namespace may set net.* sysctls.
		sysctls = map[string]string{unprivilegedPortSysctl: "1024"}
	}
	uid, gid, _ := sandbox.ParseUser(user) // validated
	yes := true
	host := &container.HostConfig{
		Mounts:         mounts(spec),
		NetworkMode:    container.NetworkMode(network),
		CapDrop:        slices.Clone(capDrop),
		CapAdd:         slices.Clone(capAdd),
		SecurityOpt:    slices.Clone(secOpt),
		Runtime:        spec.Runtime,
		Init:           &yes,
		ReadonlyRootfs: spec.ReadOnlyRootfs,
		Sysctls:        sysctls,
		Tmpfs: map[string]string{
			sandbox.TmpPath:  "rw,nosuid,nodev,mode=1777",
			sandbox.HomePath: fmt.Sprintf("rw,nosuid,nodev,mode=0700,uid=%d,gid=%d", uid, gid),
			trust.Dir:        "rw,nosuid,nodev,noexec,mode=0755", // root's: the combined CA bundle (trust.BundlePath)
		},
		Resources: container.Resources{
			Memory:    memory,
			NanoCPUs:  int64(math.Round(cpus * 1e9)),
			PidsLimit: &pids,
		},
	}
	return cfg, host
}

// mounts lists the bind mounts of spec, parents before children.
func mounts(spec sandbox.Spec) []mount.Mount {
	var ms []mount.Mount
	add := func(src, dst string, ro bool) {
		if src != "" {
			ms = append(ms, mount.Mount{Type: mount.TypeBind, Source: src, Target: dst, ReadOnly: ro})
		}
	}
	add(spec.Workspace, sandbox.WorkspacePath, false)
	add(spec.Launchers, sandbox.ToolsBinPath, true)
	add(spec.PackagesDir, sandbox.PackagesPath, true) // holds copies of the packages' docs (syncPackages)
	for _, name := range slices.Sorted(maps.Keys(spec.Skills)) {
		add(spec.Skills[name], path.Join(sandbox.SkillsPath, name), true)
	}
	add(spec.SocketDir, sandbox.BeigeDir, true)
	add(spec.HelperBinary, sandbox.ToolClientPath, true)
	add(spec.HelperBinary, sandbox.HelperPath, true)
	for _, m := range spec.ExtraMounts {
		add(m.Source, path.Clean(m.Target), m.ReadOnly)
	}
	slices.SortStableFunc(ms, func(a, b mount.Mount) int {
		return strings.Count(a.Target, "/") - strings.Count(b.Target, "/")
	})
	return ms
}

// maxPackageFile bounds one copied package file.
const maxPackageFile = 4 << 20

// prepareHost creates the host folders the mounts need (the workspace,
// launcher, packages and socket folders, and the mount points of the helper
// binary), gives the workspace to the agent's user, and refreshes the
// copies of the packages' docs. It runs at every Ensure; it never follows a
// symbolic link the agent could have made.
func prepareHost(spec sandbox.Spec, log *slog.Logger) error {
	// The agent's (non-root) user must read these whatever the gateway's
	// umask; they hold nothing secret, and their parents keep others out.
	for _, dir := range []string{spec.Launchers, spec.PackagesDir} {
		if dir == "" {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("prepare host folder: %w", err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			return fmt.Errorf("prepare host folder: %w", err)
		}
	}
	if spec.SocketDir != "" {
		if err := os.MkdirAll(spec.SocketDir, sandbox.SocketDirMode); err != nil {
			return fmt.Errorf("prepare host folder: %w", err)
		}
		if err := os.Chmod(spec.SocketDir, sandbox.SocketDirMode); err != nil {
			return fmt.Errorf("prepare socket folder: %w", err)
		}
	}
	if spec.Workspace != "" {
		if err := prepareWorkspace(spec, log); err != nil {
			return err
		}
	}
	if spec.PackagesDir != "" {
		if err := syncPackages(spec.PackagesDir, spec.Packages); err != nil {
			return err
		}
	}
	if spec.HelperBinary != "" {
		fi, err := os.Stat(spec.HelperBinary)
		if err != nil {
			return fmt.Errorf("helper binary: %w", err)
		}
		if uid, _, _ := sandbox.ParseUser(spec.User); uid != 0 && fi.Mode().Perm()&0o005 != 0o005 {
			if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != uid {
				log.Warn("the agent's user cannot run the mounted beige-sandbox binary (/beige/tool-client): plugin tools will fail; make it mode 0755",
					"path", spec.HelperBinary, "mode", fmt.Sprintf("%#o", fi.Mode().Perm()))
			}
		}
		if spec.SocketDir != "" {
			for _, name := range []string{path.Base(sandbox.ToolClientPath), path.Base(sandbox.HelperPath)} {
				if err := touch(filepath.Join(spec.SocketDir, name)); err != nil {
					return fmt.Errorf("prepare helper mount point: %w", err)
				}
			}
		}
	}
	return nil
}

// prepareWorkspace creates the workspace (mode WorkspaceMode) and makes it
// private to its owner. It opens the folder with O_NOFOLLOW and changes it
// through the open file, so that no link is followed. (giveWorkspace gives
// it to the agent's user, when no container runs.)
func prepareWorkspace(spec sandbox.Spec, log *slog.Logger) error {
	if err := os.MkdirAll(spec.Workspace, sandbox.WorkspaceMode); err != nil {
		return fmt.Errorf("prepare workspace: %w", err)
	}
	f, err := os.OpenFile(spec.Workspace, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("prepare workspace %s (it must be a folder, not a symbolic link): %w", spec.Workspace, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("prepare workspace: %w", err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	uid, gid, _ := sandbox.ParseUser(spec.User) // validated
	if os.Geteuid() != 0 && uid != 0 && st != nil && int(st.Uid) != uid {
		log.Warn("the agent's user does not own the workspace and the gateway cannot give it (not root): agent code may not be able to write there",
			"path", spec.Workspace, "user", fmt.Sprintf("%d:%d", uid, gid), "owner", st.Uid)
	}
	warnOpenAncestors(spec.Workspace, log)
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		if err := f.Chmod(perm &^ 0o077); err != nil {
			return fmt.Errorf("restrict workspace %s: %w", spec.Workspace, err)
		}
		log.Info("workspace made private to its owner", "path", spec.Workspace, "old_mode", fmt.Sprintf("%#o", perm), "mode", fmt.Sprintf("%#o", perm&^0o077))
	}
	return nil
}

// warnOpenAncestors warns when a folder above the workspace lets another
// local user replace it (writable by group or others without the sticky
// bit, or owned by another user than root or the gateway's): the engine
// follows a link in a mount source, so the sandbox could be given another
// folder as /workspace. (A workspace under $BEIGE_HOME, 0700, is safe.)
func warnOpenAncestors(p string, log *slog.Logger) {
	euid := uint32(os.Geteuid())
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		open := fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0
		if open || (ok && st.Uid != 0 && st.Uid != euid) {
			log.Warn("a folder above the workspace can be changed by another local user, who could swap the workspace mounted in the sandbox; keep workspaces under BEIGE_HOME or in a folder only the gateway's user can change",
				"workspace", p, "folder", d, "mode", fmt.Sprintf("%#o", fi.Mode().Perm()), "owner", st.Uid)
			return
		}
		if d == filepath.Dir(d) {
			return
		}
	}
}

// giveWorkspace gives the workspace to the agent's user when the gateway is
// root and the workspace's root folder belongs to someone else (the root
// agent of an older beige, or another sandbox.user): the root folder, and
// every entry below it that belonged to the same owner, so that the agent
// can go on editing its files. It never follows a link (Lchown on the
// entries of a walk that does not follow links), leaves alone an entry with
// more than one hard link (the other name may be outside the workspace) and
// whatever belongs to a third user. Changing the owner clears the setuid and
// setgid bits, which defuses a setuid-root file a root agent left there. It
// runs only while no container of the agent runs (create), so that nothing
// changes the tree under the walk.
func giveWorkspace(spec sandbox.Spec, log *slog.Logger) error {
	if spec.Workspace == "" || os.Geteuid() != 0 {
		return nil
	}
	uid, gid, _ := sandbox.ParseUser(spec.User) // validated
	fi, err := os.Lstat(spec.Workspace)
	if err != nil {
		return fmt.Errorf("give workspace to the agent's user: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.IsDir() || (int(st.Uid) == uid && int(st.Gid) == gid) {
		return nil
	}
	start := time.Now()
	oldUID := st.Uid
	var changed, skipped int
	var firstErr error
	walkErr := filepath.WalkDir(spec.Workspace, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return nil
		}
		if p == spec.Workspace {
			return nil // last, below
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		est, ok := info.Sys().(*syscall.Stat_t)
		if !ok || est.Uid != oldUID {
			return nil
		}
		if !d.IsDir() && est.Nlink > 1 {
			skipped++
			return nil
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return nil
		}
		changed++
		return nil
	})
	if walkErr != nil && firstErr == nil {
		firstErr = walkErr
	}
	// The root folder last: until it is done, the next create walks again.
	f, err := os.OpenFile(spec.Workspace, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("give workspace %s to the agent's user: %w", spec.Workspace, err)
	}
	defer f.Close()
	if err := f.Chown(uid, gid); err != nil {
		return fmt.Errorf("give workspace %s to the agent's user %d:%d: %w", spec.Workspace, uid, gid, err)
	}
	log.Info("workspace given to the agent's user", "path", spec.Workspace, "user", fmt.Sprintf("%d:%d", uid, gid),
		"old_owner", oldUID, "entries", changed, "hard_linked_left_alone", skipped, "took", time.Since(start).Round(time.Millisecond))
	if firstErr != nil {
		log.Warn("some workspace entries could not be given to the agent's user", "err", firstErr)
	}
	return nil
}

// syncPackages makes dir hold, for each package, a folder with copies of its
// PackageFiles (regular files only; a symbolic link, FIFO or device is
// skipped), and nothing else: no other file of a plugin folder reaches the
// sandbox. dir is the gateway's own (mounted read-only).
func syncPackages(dir string, pkgs map[string]string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("sync package docs: %w", err)
	}
	for _, e := range entries {
		if _, ok := pkgs[e.Name()]; !ok {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("sync package docs: %w", err)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(pkgs)) {
		dst := filepath.Join(dir, name)
		if fi, err := os.Lstat(dst); err == nil && !fi.IsDir() {
			if err := os.Remove(dst); err != nil {
				return fmt.Errorf("sync package docs of %q: %w", name, err)
			}
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("sync package docs of %q: %w", name, err)
		}
		if err := os.Chmod(dst, 0o755); err != nil { // whatever the umask
			return fmt.Errorf("sync package docs of %q: %w", name, err)
		}
		olds, err := os.ReadDir(dst)
		if err != nil {
			return fmt.Errorf("sync package docs of %q: %w", name, err)
		}
		for _, e := range olds {
			if !slices.Contains(sandbox.PackageFiles, e.Name()) {
				if err := os.RemoveAll(filepath.Join(dst, e.Name())); err != nil {
					return fmt.Errorf("sync package docs of %q: %w", name, err)
				}
			}
		}
		for _, f := range sandbox.PackageFiles {
			data, err := readRegular(filepath.Join(pkgs[name], f), maxPackageFile)
			if err != nil {
				// Absent, not a regular file, or unreadable: the sandbox has none.
				if rerr := os.Remove(filepath.Join(dst, f)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
					return fmt.Errorf("sync package docs of %q: %w", name, rerr)
				}
				continue
			}
			if err := atomicfile.WriteIfChanged(filepath.Join(dst, f), data, 0o644); err != nil {
				return fmt.Errorf("sync package docs of %q: %w", name, err)
			}
		}
	}
	return nil
}

// readRegular reads a regular file of at most max bytes, without following
// a symbolic link and without blocking on a FIFO.
func readRegular(p string, max int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, max)
	}
	return data, nil
}

func touch(p string) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// fileSum returns the hex sha256 of a file's content.
func fileSum(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
