package docker

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/moby/moby/api/types/mount"

	"github.com/beige-dev/beige/internal/sandbox"
)

func baseSpec() sandbox.Spec {
	return sandbox.Spec{
		Agent:        "travel",
		Image:        "beige-sandbox:latest",
		Workspace:    "/h/ws",
		Launchers:    "/h/launchers",
		PackagesDir:  "/h/packages",
		Packages:     map[string]string{"git": "/h/plugins/git", "browser": "/h/plugins/browser"},
		Skills:       map[string]string{"notes": "/h/skills/notes"},
		SocketDir:    "/h/sock",
		HelperBinary: "/h/bin/beige-sandbox",
		Env:          map[string]string{"TZ": "UTC", "LANG": "C.UTF-8"},
		MemoryLimit:  3 << 30,
	}
}

func TestConfigHash(t *testing.T) {
	base := ConfigHash(baseSpec(), "helper1", "sha256:img1", "")
	if len(base) != 64 {
		t.Fatalf("hash %q is not hex sha256", base)
	}
	same := []struct {
		name string
		mod  func(*sandbox.Spec)
	}{
		{"identical", func(*sandbox.Spec) {}},
		{"maps rebuilt in another order", func(s *sandbox.Spec) {
			s.Packages = map[string]string{"browser": "/h/plugins/browser", "git": "/h/plugins/git"}
		}},
		{"explicit default pids", func(s *sandbox.Spec) { s.PidsLimit = sandbox.DefaultPidsLimit }},
		{"explicit default network", func(s *sandbox.Spec) { s.Network = sandbox.DefaultNetwork }},
		{"explicit default user", func(s *sandbox.Spec) { s.User = sandbox.DefaultUser() }},
		{"explicit default memory", func(s *sandbox.Spec) { s.MemoryLimit = sandbox.DefaultMemoryLimit }},
		{"explicit default cpus", func(s *sandbox.Spec) { s.CPUs = sandbox.DefaultCPUs }},
	}
	for _, tt := range same {
		s := baseSpec()
		tt.mod(&s)
		if got := ConfigHash(s, "helper1", "sha256:img1", ""); got != base {
			t.Errorf("%s: hash changed", tt.name)
		}
	}
	empty := sandbox.Spec{Agent: "a", Image: "i"}
	emptyMaps := sandbox.Spec{Agent: "a", Image: "i", Env: map[string]string{}, Packages: map[string]string{}, Skills: map[string]string{}, ExtraMounts: []sandbox.Mount{}}
	if ConfigHash(empty, "", "", "") != ConfigHash(emptyMaps, "", "", "") {
		t.Error("nil and empty maps hash differently")
	}

	differ := []struct {
		name string
		mod  func(*sandbox.Spec)
	}{
		{"agent", func(s *sandbox.Spec) { s.Agent = "other" }},
		{"image", func(s *sandbox.Spec) { s.Image = "other:latest" }},
		{"workspace", func(s *sandbox.Spec) { s.Workspace = "/h/ws2" }},
		{"launchers", func(s *sandbox.Spec) { s.Launchers = "" }},
		{"package added", func(s *sandbox.Spec) { s.Packages["slack"] = "/h/plugins/slack" }},
		{"package moved", func(s *sandbox.Spec) { s.Packages["git"] = "/h/plugins/git2" }},
		{"skill", func(s *sandbox.Spec) { s.Skills = nil }},
		{"socket dir", func(s *sandbox.Spec) { s.SocketDir = "/h/sock2" }},
		{"helper path", func(s *sandbox.Spec) { s.HelperBinary = "/h/bin2/beige-sandbox" }},
		{"extra mount", func(s *sandbox.Spec) { s.ExtraMounts = []sandbox.Mount{{Source: "/data", Target: "/data"}} }},
		{"env value", func(s *sandbox.Spec) { s.Env["TZ"] = "Europe/Paris" }},
		{"memory", func(s *sandbox.Spec) { s.MemoryLimit = 2 << 30 }},
		{"cpus", func(s *sandbox.Spec) { s.CPUs = 1.5 }},
		{"pids", func(s *sandbox.Spec) { s.PidsLimit = 100 }},
		{"no cpu limit", func(s *sandbox.Spec) { s.CPUs = -1 }},
		{"no memory limit", func(s *sandbox.Spec) { s.MemoryLimit = -1 }},
		{"user", func(s *sandbox.Spec) { s.User = "4242:4242" }},
		{"root", func(s *sandbox.Spec) { s.User = sandbox.RootUser }},
		{"read-only root filesystem", func(s *sandbox.Spec) { s.ReadOnlyRootfs = true }},
		{"network", func(s *sandbox.Spec) { s.Network = "none" }},
		{"runtime", func(s *sandbox.Spec) { s.Runtime = "runsc" }},
		{"cap add", func(s *sandbox.Spec) { s.CapAdd = []string{"NET_RAW"} }},
		{"cap drop empty (drop nothing) differs from nil (default)", func(s *sandbox.Spec) { s.CapDrop = []string{} }},
		{"security opt", func(s *sandbox.Spec) { s.SecurityOpt = []string{} }},
	}
	seen := map[string]string{base: "base"}
	for _, tt := range differ {
		s := baseSpec()
		tt.mod(&s)
		h := ConfigHash(s, "helper1", "sha256:img1", "")
		if prev, dup := seen[h]; dup {
			t.Errorf("%s: same hash as %s", tt.name, prev)
		}
		seen[h] = tt.name
	}
	if ConfigHash(baseSpec(), "helper2", "sha256:img1", "") == base {
		t.Error("a new helper binary does not change the hash")
	}
	if ConfigHash(baseSpec(), "helper1", "sha256:img2", "") == base {
		t.Error("a rebuilt image does not change the hash")
	}
	if ConfigHash(baseSpec(), "helper1", "sha256:img1", "test-1") == base {
		t.Error("the instance does not change the hash")
	}
}

func TestContainerConfig(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "canary-123")
	spec := baseSpec()
	spec.Env["PATH"] = "/evil"
	spec.ExtraMounts = []sandbox.Mount{{Source: "/data", Target: "/data/", ReadOnly: true}}
	cfg, host := containerConfig(spec, map[string]string{LabelAgent: "travel"})

	wantEnv := []string{"PATH=" + sandbox.DefaultPATH, "HOME=" + sandbox.HomePath, "LANG=C.UTF-8", "TZ=UTC", // then the "proxy" mode's variables
		"BEIGE_EGRESS_LISTEN=127.0.0.1:3128", "HTTPS_PROXY=http://127.0.0.1:3128", "HTTP_PROXY=http://127.0.0.1:3128", "NO_PROXY=localhost,127.0.0.1,::1",
		"http_proxy=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128", "no_proxy=localhost,127.0.0.1,::1"}
	if !slices.Equal(cfg.Env, wantEnv) {
		t.Errorf("Env = %q, want %q", cfg.Env, wantEnv)
	}
	if !slices.Equal(cfg.Entrypoint, []string{sandbox.HelperPath, "idle"}) || cfg.Cmd != nil {
		t.Errorf("Entrypoint = %q Cmd = %q", cfg.Entrypoint, cfg.Cmd)
	}
	if cfg.Hostname != "beige-travel" || cfg.WorkingDir != sandbox.WorkspacePath || cfg.Image != spec.Image {
		t.Errorf("config = %+v", cfg)
	}
	if host.Init == nil || !*host.Init {
		t.Error("Init is not set")
	}
	if !slices.Equal(host.CapDrop, []string{"ALL"}) || !slices.Equal(host.CapAdd, sandbox.DefaultCapAdd) {
		t.Errorf("caps drop %q add %q", host.CapDrop, host.CapAdd)
	}
	if slices.Contains(host.CapAdd, "NET_RAW") {
		t.Error("NET_RAW is added")
	}
	if !slices.Equal(host.SecurityOpt, []string{"no-new-privileges:true"}) {
		t.Errorf("SecurityOpt = %q", host.SecurityOpt)
	}
	if host.PidsLimit == nil || *host.PidsLimit != sandbox.DefaultPidsLimit || host.Memory != 3<<30 || host.NanoCPUs != 1e9 {
		t.Errorf("resources = %+v", host.Resources)
	}
	if host.NetworkMode != "none" { // the default "proxy" mode: loopback only
		t.Errorf("NetworkMode = %q", host.NetworkMode)
	}

	type m struct {
		src, dst string
		ro       bool
	}
	var got []m
	for _, mt := range host.Mounts {
		if mt.Type != mount.TypeBind {
			t.Errorf("mount %s is %s", mt.Target, mt.Type)
		}
		got = append(got, m{mt.Source, mt.Target, mt.ReadOnly})
	}
	want := []m{
		{"/h/ws", "/workspace", false},
		{"/h/sock", "/beige", true},
		{"/data", "/data", true},
		{"/h/launchers", "/tools/bin", true},
		{"/h/packages", "/tools/packages", true},
		{"/h/skills/notes", "/skills/notes", true},
		{"/h/bin/beige-sandbox", "/beige/tool-client", true},
		{"/h/bin/beige-sandbox", "/beige/beige-sandbox", true},
		// No plugin folder is mounted: only copies of its docs, in /h/packages.
	}
	if !slices.Equal(got, want) {
		t.Errorf("mounts:\n got %v\nwant %v", got, want)
	}
	for _, v := range cfg.Env {
		if strings.Contains(v, "canary") {
			t.Errorf("host env leaked: %s", v)
		}
	}
	if cfg.User != sandbox.RootUser || cfg.Labels[LabelUser] != sandbox.DefaultUser() || sandbox.DefaultUser() == sandbox.RootUser {
		t.Errorf("User = %q, label %s = %q; want root for the helper and the default non-root %q for agent code",
			cfg.User, LabelUser, cfg.Labels[LabelUser], sandbox.DefaultUser())
	}
	if host.Sysctls["net.ipv4.ip_unprivileged_port_start"] != "1024" {
		t.Errorf("Sysctls = %v: ports below 1024 are open to every user", host.Sysctls)
	}
	uid, gid, _ := sandbox.ParseUser("")
	if host.Tmpfs[sandbox.TmpPath] != "rw,nosuid,nodev,mode=1777" ||
		host.Tmpfs[sandbox.HomePath] != fmt.Sprintf("rw,nosuid,nodev,mode=0700,uid=%d,gid=%d", uid, gid) {
		t.Errorf("Tmpfs = %q", host.Tmpfs)
	}
	if host.ReadonlyRootfs {
		t.Error("read-only root filesystem by default")
	}
}

// The capability set follows the user: the root helper's needs for a
// non-root agent user; today's dev-container set (with a warning) for root.
func TestContainerConfigUser(t *testing.T) {
	for _, tt := range []struct {
		user, wantUser string
		wantCaps       []string
	}{
		{"", sandbox.DefaultUser(), []string{"SETUID", "SETGID", "KILL"}},
		{"1234:5678", "1234:5678", []string{"SETUID", "SETGID", "KILL"}},
		{sandbox.RootUser, "0:0", []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"}},
	} {
		spec := sandbox.Spec{Agent: "a", Image: "i", User: tt.user, ReadOnlyRootfs: true}
		cfg, host := containerConfig(spec, nil)
		if cfg.Labels[LabelUser] != tt.wantUser || !slices.Equal(host.CapAdd, tt.wantCaps) {
			t.Errorf("user %q: agent user %q CapAdd %q, want %q %q", tt.user, cfg.Labels[LabelUser], host.CapAdd, tt.wantUser, tt.wantCaps)
		}
		if !host.ReadonlyRootfs {
			t.Errorf("user %q: ReadOnlyRootfs not passed on", tt.user)
		}
	}
	// Explicit caps win, for root too.
	_, host := containerConfig(sandbox.Spec{Agent: "a", Image: "i", User: sandbox.RootUser, CapAdd: []string{"KILL"}}, nil)
	if !slices.Equal(host.CapAdd, []string{"KILL"}) {
		t.Errorf("CapAdd = %q", host.CapAdd)
	}
	// No net.* sysctl where the engine refuses it.
	_, host = containerConfig(sandbox.Spec{Agent: "a", Image: "i", Network: "host"}, nil)
	if len(host.Sysctls) != 0 {
		t.Errorf("host network: Sysctls = %v", host.Sysctls)
	}
	// -1: no limit.
	_, host = containerConfig(sandbox.Spec{Agent: "a", Image: "i", CPUs: -1, MemoryLimit: -1, PidsLimit: -1}, nil)
	if host.NanoCPUs != 0 || host.Memory != 0 || *host.PidsLimit != -1 {
		t.Errorf("no limits: %+v", host.Resources)
	}
}

func TestContainerConfigOverrides(t *testing.T) {
	spec := sandbox.Spec{Agent: "a", Image: "i", CPUs: 1.5, PidsLimit: 64, Network: "none", Runtime: "runsc",
		CapDrop: []string{"NET_RAW"}, CapAdd: []string{}, SecurityOpt: []string{"seccomp=unconfined"}}
	cfg, host := containerConfig(spec, nil)
	if host.NanoCPUs != 1_500_000_000 || *host.PidsLimit != 64 || host.NetworkMode != "none" || host.Runtime != "runsc" {
		t.Errorf("resources = %+v network %q runtime %q", host.Resources, host.NetworkMode, host.Runtime)
	}
	if !slices.Equal(host.CapDrop, []string{"NET_RAW"}) || len(host.CapAdd) != 0 || !slices.Equal(host.SecurityOpt, []string{"seccomp=unconfined"}) {
		t.Errorf("drop %q add %q secopt %q", host.CapDrop, host.CapAdd, host.SecurityOpt)
	}
	if len(host.Mounts) != 0 {
		t.Errorf("empty spec fields mounted: %v", host.Mounts)
	}
	if cfg.Entrypoint[0] != "/bin/sh" {
		t.Errorf("without a helper binary the entrypoint is %q", cfg.Entrypoint)
	}
}

func TestValidate(t *testing.T) {
	ok := baseSpec()
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	bad := []func(*sandbox.Spec){
		func(s *sandbox.Spec) { s.Agent = "" },
		func(s *sandbox.Spec) { s.Agent = "../x" },
		func(s *sandbox.Spec) { s.Agent = "a b" },
		func(s *sandbox.Spec) { s.Agent = strings.Repeat("a", 64) },
		func(s *sandbox.Spec) { s.Image = "" },
		func(s *sandbox.Spec) { s.Packages["../etc"] = "/x" },
		func(s *sandbox.Spec) { s.Skills["s"] = "relative/path" },
		func(s *sandbox.Spec) { s.Workspace = "ws" },
		func(s *sandbox.Spec) { s.ExtraMounts = []sandbox.Mount{{Source: "/a", Target: "b"}} },
		func(s *sandbox.Spec) { s.Env["A=B"] = "x" },
		func(s *sandbox.Spec) { s.CPUs = math.NaN() },
		func(s *sandbox.Spec) { s.PidsLimit = -2 },
		func(s *sandbox.Spec) { s.User = "root" },
		func(s *sandbox.Spec) { s.User = "1000" },
		func(s *sandbox.Spec) { s.User = "-1:0" },
		func(s *sandbox.Spec) { s.User = "bob:bob" },
	}
	for i, mod := range bad {
		s := baseSpec()
		mod(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("bad spec %d accepted", i)
		}
	}
}

func TestPrepareHost(t *testing.T) {
	dir := t.TempDir()
	helper := filepath.Join(dir, "beige-sandbox")
	os.WriteFile(helper, []byte("bin"), 0o755)
	spec := sandbox.Spec{
		Agent: "a", Image: "i",
		Workspace:    filepath.Join(dir, "ws"),
		Launchers:    filepath.Join(dir, "launchers"),
		PackagesDir:  filepath.Join(dir, "packages"),
		Packages:     map[string]string{"git": "/x"},
		SocketDir:    filepath.Join(dir, "sock"),
		HelperBinary: helper,
	}
	if err := prepareHost(spec, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"ws", "launchers", "packages/git"} {
		if st, err := os.Stat(filepath.Join(dir, p)); err != nil || !st.IsDir() {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, p := range []string{"sock/tool-client", "sock/beige-sandbox"} {
		if st, err := os.Stat(filepath.Join(dir, p)); err != nil || !st.Mode().IsRegular() {
			t.Errorf("%s: %v", p, err)
		}
	}
	// Idempotent.
	if err := prepareHost(spec, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	spec.HelperBinary = filepath.Join(dir, "missing")
	if err := prepareHost(spec, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("missing helper binary accepted")
	}
}

// A plugin folder is never mounted: the sandbox's /tools/packages/<p> holds
// copies of its docs (regular files only), so a secret beside plugin.json,
// or a link planted as plugin.json, does not reach the sandbox.
func TestPreparePackagesDocsOnly(t *testing.T) {
	dir := t.TempDir()
	plug := filepath.Join(dir, "plugins", "git")
	os.MkdirAll(filepath.Join(plug, "lib"), 0o755)
	os.WriteFile(filepath.Join(plug, "plugin.json"), []byte(`{"name":"git"}`), 0o644)
	os.WriteFile(filepath.Join(plug, "secret.env"), []byte("TOKEN=canary"), 0o600)
	os.WriteFile(filepath.Join(plug, "lib", "index.js"), []byte("code"), 0o644)
	os.WriteFile(filepath.Join(dir, "host-secret"), []byte("canary"), 0o600)
	os.Symlink(filepath.Join(dir, "host-secret"), filepath.Join(plug, "README.md"))
	if err := syscall.Mkfifo(filepath.Join(plug, "SKILL.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	pkgs := filepath.Join(dir, "packages")
	os.MkdirAll(filepath.Join(pkgs, "gone"), 0o755) // a plugin no longer used
	os.WriteFile(filepath.Join(pkgs, "gone", "plugin.json"), []byte("{}"), 0o644)
	spec := sandbox.Spec{Agent: "a", Image: "i", PackagesDir: pkgs, Packages: map[string]string{"git": plug}}
	if err := prepareHost(spec, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.WalkDir(pkgs, func(p string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(pkgs, p)
		got = append(got, rel)
		if d.Type()&os.ModeType != 0 && !d.IsDir() {
			t.Errorf("%s is not a regular file (%v)", rel, d.Type())
		}
		return nil
	})
	if want := []string{".", "git", "git/plugin.json"}; !slices.Equal(got, want) {
		t.Errorf("packages folder holds %q, want %q", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(pkgs, "git", "plugin.json")); string(b) != `{"name":"git"}` {
		t.Errorf("plugin.json = %q", b)
	}
	// A doc that appears (or changes) is copied at the next Ensure; one that
	// becomes a link is removed.
	os.Remove(filepath.Join(plug, "README.md"))
	os.WriteFile(filepath.Join(plug, "README.md"), []byte("readme"), 0o644)
	os.Remove(filepath.Join(plug, "plugin.json"))
	os.Symlink(filepath.Join(dir, "host-secret"), filepath.Join(plug, "plugin.json"))
	if err := prepareHost(spec, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(pkgs, "git", "README.md")); string(b) != "readme" {
		t.Errorf("README.md = %q", b)
	}
	if _, err := os.Lstat(filepath.Join(pkgs, "git", "plugin.json")); !os.IsNotExist(err) {
		t.Errorf("plugin.json turned into a link is still there: %v", err)
	}
}

// The workspace is private to its owner, and a link in its place is refused.
func TestPrepareWorkspace(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	spec := sandbox.Spec{Agent: "a", Image: "i", Workspace: ws, User: "4242:4343"}
	if err := prepareHost(spec, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(ws)
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("workspace mode %v, want 0700", fi.Mode().Perm())
	}
	target := filepath.Join(dir, "elsewhere")
	os.Mkdir(target, 0o755)
	link := filepath.Join(dir, "link")
	os.Symlink(target, link)
	spec.Workspace = link
	if err := prepareHost(spec, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("a workspace that is a symbolic link was accepted")
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o755 || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
		t.Errorf("the link's target was changed: mode %v", fi.Mode().Perm())
	}
}

// Created while no container runs, a workspace that belongs to someone else
// (the root agent of an older beige) is given to the agent's user, so that
// it can edit its own files, without following a link, without touching a
// hard-linked file or a third user's, and defusing setuid-root files.
func TestGiveWorkspace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to own files as others")
	}
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	outside := filepath.Join(dir, "outside")
	os.WriteFile(outside, []byte("host file"), 0o644)
	os.MkdirAll(filepath.Join(ws, "src", "deep"), 0o755)
	os.WriteFile(filepath.Join(ws, "src", "deep", "main.go"), []byte("package main"), 0o644)
	os.WriteFile(filepath.Join(ws, "suid"), []byte("#!/bin/sh\n"), 0o755)
	os.Chmod(filepath.Join(ws, "suid"), os.ModeSetuid|os.ModeSetgid|0o755)
	if fi, _ := os.Stat(filepath.Join(ws, "suid")); fi.Mode()&os.ModeSetuid == 0 {
		t.Fatal("could not make the setuid file")
	}
	os.Symlink(outside, filepath.Join(ws, "link"))
	os.Link(outside, filepath.Join(ws, "hardlink"))
	os.WriteFile(filepath.Join(ws, "thirds"), nil, 0o644)
	os.Chown(filepath.Join(ws, "thirds"), 777, 777)

	if err := giveWorkspace(sandbox.Spec{Agent: "a", Image: "i", Workspace: ws, User: "4242:4343"}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	owner := func(p string) (uint32, os.FileMode) {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Uid, fi.Mode()
	}
	for _, p := range []string{"", "src", "src/deep", "src/deep/main.go", "suid", "link"} {
		if uid, _ := owner(filepath.Join(ws, p)); uid != 4242 {
			t.Errorf("%q belongs to %d, want the agent's 4242", p, uid)
		}
	}
	if _, mode := owner(filepath.Join(ws, "suid")); mode&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("suid is still %v", mode)
	}
	for p, want := range map[string]uint32{outside: 0, filepath.Join(ws, "hardlink"): 0, filepath.Join(ws, "thirds"): 777} {
		if uid, _ := owner(p); uid != want {
			t.Errorf("%s belongs to %d, want %d (left alone)", p, uid, want)
		}
	}
	// Done once: the root folder is the agent's now.
	os.Chown(filepath.Join(ws, "src", "deep", "main.go"), 0, 0)
	giveWorkspace(sandbox.Spec{Agent: "a", Image: "i", Workspace: ws, User: "4242:4343"}, slog.New(slog.DiscardHandler))
	if uid, _ := owner(filepath.Join(ws, "src", "deep", "main.go")); uid != 0 {
		t.Error("the workspace was walked again although its root folder was the agent's")
	}
}

// A workspace whose parent another user may change is warned about; the
// host folders the agent's user must read are open whatever the umask.
func TestPrepareHostWarnsAndOpens(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "shared")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777) // no sticky bit
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	old := syscall.Umask(0o077)
	spec := sandbox.Spec{Agent: "a", Image: "i", Workspace: filepath.Join(open, "ws"),
		Launchers: filepath.Join(dir, "l"), PackagesDir: filepath.Join(dir, "p"), Packages: map[string]string{"git": dir}}
	err := prepareHost(spec, log)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "can be changed by another local user") || !strings.Contains(logs.String(), open) {
		t.Errorf("no warning about %s:\n%s", open, logs.String())
	}
	for _, p := range []string{"l", "p", "p/git"} {
		if fi, _ := os.Stat(filepath.Join(dir, p)); fi.Mode().Perm() != 0o755 {
			t.Errorf("%s is %v under umask 077, want 0755", p, fi.Mode().Perm())
		}
	}
	// Sticky and root-owned (like /tmp): no warning.
	logs.Reset()
	os.Chmod(open, os.ModeSticky|0o777)
	if os.Geteuid() == 0 {
		if err := prepareHost(spec, log); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(logs.String(), "another local user") {
			t.Errorf("warned about a sticky folder:\n%s", logs.String())
		}
	}
}
