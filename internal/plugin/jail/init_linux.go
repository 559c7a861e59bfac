//go:build linux

package jail

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/beige-dev/beige/internal/egress/forwarder"
)

// systemPaths are bound read-only into every jail, those that exist.
var systemPaths = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc/ssl", "/etc/ca-certificates", "/etc/resolv.conf", "/etc/hosts",
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/localtime",
}

var devices = []string{"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"}

// runInit is the jail init: it never returns.
func runInit() {
	// Mounts, the capability drop and the exec happen on this thread: a
	// thread's capabilities are its own.
	runtime.LockOSThread()
	err := jailMain()
	fmt.Fprintf(os.Stderr, "plugin jail: %v\n", err)
	os.Exit(126)
}

type mount struct {
	target string // path inside the jail
	source string // host path; "" for a tmpfs
	rw     bool
}

func jailMain() error {
	spec, err := decodeSpec(os.Getenv(specEnv))
	os.Unsetenv(specEnv)
	if err != nil {
		return err
	}
	root, err := newRootDir(spec.RootDir)
	if err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=16m"); err != nil {
		return fmt.Errorf("mount the new root: %w", err)
	}
	var mounts []mount
	for _, p := range systemPaths {
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			// /bin -> usr/bin on merged-/usr systems: the same link.
			if t, err := os.Readlink(p); err == nil && !strings.HasPrefix(p, "/etc/") {
				if err := os.Symlink(t, root+p); err != nil {
					return fmt.Errorf("link %s: %w", p, err)
				}
				continue
			}
		}
		mounts = append(mounts, mount{target: p, source: p})
	}
	prog, err := filepath.EvalSymlinks(spec.Path)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", spec.Path, err)
	}
	mounts = append(mounts, mount{target: filepath.Dir(prog), source: filepath.Dir(prog)})
	if d := filepath.Dir(spec.Path); d != filepath.Dir(prog) {
		mounts = append(mounts, mount{target: d, source: d})
	}
	mounts = append(mounts, mount{target: "/tmp"})
	for _, p := range spec.ReadOnly {
		mounts = append(mounts, mount{target: p, source: p})
	}
	for _, p := range spec.ReadWrite {
		mounts = append(mounts, mount{target: p, source: p, rw: true})
	}
	for _, d := range devices {
		mounts = append(mounts, mount{target: d, source: d, rw: true})
	}
	if spec.EgressSocket != "" {
		mounts = append(mounts, mount{target: forwarder.SocketPath, source: spec.EgressSocket, rw: true})
	}
	// Parents before children, so that a folder inside another is bound
	// over it and not hidden by it.
	slices.SortStableFunc(mounts, func(a, b mount) int { return strings.Compare(a.target, b.target) })
	for _, m := range mounts {
		if err := bind(root, m); err != nil {
			return err
		}
	}
	for _, l := range [][2]string{{"/proc/self/fd", "/dev/fd"}, {"/proc/self/fd/0", "/dev/stdin"}, {"/proc/self/fd/1", "/dev/stdout"}, {"/proc/self/fd/2", "/dev/stderr"}} {
		_ = os.Symlink(l[0], root+l[1])
	}
	if err := os.MkdirAll(root+"/proc", 0o555); err != nil {
		return fmt.Errorf("create /proc: %w", err)
	}
	if err := unix.Mount("proc", root+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if err := os.Mkdir(root+"/.oldroot", 0o700); err != nil {
		return fmt.Errorf("create the old root's mount point: %w", err)
	}
	if err := unix.PivotRoot(root, root+"/.oldroot"); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("chdir /: %w", err)
	}
	if err := unix.Unmount("/.oldroot", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount the old root: %w", err)
	}
	if err := os.Remove("/.oldroot"); err != nil {
		return fmt.Errorf("remove the old root's mount point: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("make the new root read-only: %w", err)
	}
	if err := loUp(); err != nil {
		return err
	}
	if err := os.Chdir(spec.Dir); err != nil {
		return fmt.Errorf("chdir %s: %w", spec.Dir, err)
	}
	argv := append([]string{spec.Path}, spec.Args...)
	if spec.EgressSocket == "" {
		if err := dropPrivileges(); err != nil {
			return err
		}
		return fmt.Errorf("exec %s: %w", spec.Path, unix.Exec(spec.Path, argv, spec.Env))
	}
	fw, err := forwarder.Listen(ProxyAddr, forwarder.SocketPath)
	if err != nil {
		return err
	}
	go fw.Serve()
	return superviseChild(spec, argv)
}

// newRootDir is the empty folder the jail's tmpfs root is mounted on: one
// folder for every jail (each mount is in its own namespace).
func newRootDir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("no root folder in the spec")
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("create the jail's root folder: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("the jail's root folder: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
		return "", fmt.Errorf("the jail's root folder %s is not a folder of this user", dir)
	}
	return dir, nil
}

func bind(root string, m mount) error {
	target := root + m.target
	if m.source == "" {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", m.target, err)
		}
		if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=64m"); err != nil {
			return fmt.Errorf("mount a tmpfs on %s: %w", m.target, err)
		}
		return nil
	}
	fi, err := os.Stat(m.source)
	if errors.Is(err, os.ErrNotExist) {
		// Nothing there, nothing to see (a missing allowRead folder
		// gives no access, as Node's permission model does).
		return nil
	}
	if err != nil {
		return fmt.Errorf("bind %s: %w", m.source, err)
	}
	if fi.IsDir() {
		err = os.MkdirAll(target, 0o755)
	} else {
		if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
			var f *os.File
			if f, err = os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				f.Close()
			}
		}
	}
	if err != nil {
		return fmt.Errorf("create the mount point of %s: %w", m.target, err)
	}
	if err := unix.Mount(m.source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", m.source, err)
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_NOSUID)
	if !m.rw {
		flags |= unix.MS_RDONLY
	}
	if !strings.HasPrefix(m.target, "/dev/") {
		flags |= unix.MS_NODEV
	}
	if err := unix.Mount("", target, "", flags, ""); err != nil {
		return fmt.Errorf("remount %s: %w", m.target, err)
	}
	return nil
}

// loUp brings up the loopback interface, the network namespace's only one.
func loUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring up lo: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("bring up lo: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up lo: get flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up lo: set flags: %w", err)
	}
	return nil
}

// dropPrivileges sets no-new-privileges and empties this thread's
// bounding, ambient, inheritable, permitted and effective capability sets,
// so that the program (even as uid 0) cannot undo the mounts.
func dropPrivileges() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no-new-privileges: %w", err)
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("drop capabilities: %w", err)
	}
	return nil
}

// superviseChild runs the program as the child of the init (which stays
// PID 1 to serve the forwarder), reaps every orphan, passes SIGTERM and
// SIGINT on, and exits as the program did.
func superviseChild(spec *Spec, argv []string) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// ForkExec forks from this (locked) thread: its dropped capabilities
	// are the child's. The init's other threads keep theirs; the init
	// runs nothing of the plugin's.
	if err := dropPrivileges(); err != nil {
		return err
	}
	// The descriptors the gateway passed (the protocol's 3-5) keep
	// their numbers; the forwarder's own are close-on-exec.
	var files []uintptr
	for fd := range 6 {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			break
		}
		files = append(files, uintptr(fd))
	}
	pid, err := syscall.ForkExec(spec.Path, argv, &syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   spec.Env,
		Files: files,
	})
	if err != nil {
		return fmt.Errorf("start %s: %w", spec.Path, err)
	}
	go func() {
		for s := range sigs {
			_ = syscall.Kill(pid, s.(syscall.Signal))
		}
	}()
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for %s: %w", spec.Path, err)
		}
		if got != pid {
			continue
		}
		switch {
		case ws.Exited():
			os.Exit(ws.ExitStatus())
		case ws.Signaled():
			os.Exit(128 + int(ws.Signal()))
		}
	}
}
