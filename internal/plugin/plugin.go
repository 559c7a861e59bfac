// Package plugin is Beige's plugin system. A plugin adds tools (run on the
// gateway host when a sandbox calls them through its launcher), hooks,
// skills and channels, all through one Registrar.
//
// Plugins come in two kinds:
//
//   - built-in plugins, compiled into the binary: a package calls Register
//     from init() and one file of blank imports (internal/plugin/builtin)
//     decides which are built in;
//   - external plugins: a folder whose plugin.json has a "run" command, run
//     on the host for each call (see RunSpec in package config);
//   - TypeScript/JavaScript plugins in the original's format: a folder with
//     an index.ts or index.js exporting createPlugin, run in a confined
//     Node.js process (package nodehost).
//
// A Host loads the plugins a config names, checks that every agent's tools
// and skills resolve, and answers the sockets' tool calls (Host.Handle) by
// running the plugin tool through the gateway's one tool pipeline
// (internal/pipeline: policy, audit, hooks, redaction); it is also that
// pipeline's Hooks, for core tools too.
package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/beige-dev/beige/internal/atomicfile"
	"github.com/beige-dev/beige/internal/config"
)

// Builtin is a plugin compiled into the binary.
type Builtin struct {
	// Name is the plugin's name: its key under plugins in config.json5 (or
	// the "name" of a plugin.json in a folder without a run command), and
	// the "name" in its own plugin.json.
	Name string
	// Docs holds plugin.json, README.md and SKILL.md at its root, usually
	// from go:embed. They are written to $BEIGE_HOME/tools/<name> and
	// mounted read-only at /tools/packages/<name> in the sandbox.
	Docs fs.FS
	// New creates the plugin for one gateway run. Once New has succeeded,
	// the plugin is stopped (if it is a Stopper) when the Host closes or
	// fails to load, even if its Register failed: Stop must be safe then.
	New func(env Env) (Plugin, error)
	// Warnings, if set, returns the risks of a configuration (the
	// manifest's defaultConfig merged with plugins.<name>.config) that are
	// not errors, for `beige config validate`. It must not reach anything.
	Warnings func(name string, config map[string]any) []string
}

// DocFiles are the files a plugin's documentation folder holds.
var DocFiles = []string{"plugin.json", "README.md", "SKILL.md"}

// Plugin is a loaded plugin. Register declares what it provides; the
// Registrar is only valid during the call.
type Plugin interface {
	Register(r *Registrar) error
}

// Stopper is implemented by plugins that hold resources (background
// goroutines, connections). Plugins are stopped in the reverse of the order
// they were started.
type Stopper interface {
	Stop(ctx context.Context) error
}

// Prober is implemented by plugins that can tell whether they run now
// (a TypeScript/JavaScript plugin's host): Problem says why not, "" when
// they do. Host.Problems collects them for /api/health.
type Prober interface {
	Problem() string
}

// RegisterFunc turns a function into a Plugin without state.
type RegisterFunc func(r *Registrar) error

// Register calls f.
func (f RegisterFunc) Register(r *Registrar) error { return f(r) }

// Env is what a plugin is given when it is created.
type Env struct {
	// Name is the plugin's key in config.json5.
	Name string
	// Dir is the plugin's folder: the configured path, or for a built-in
	// plugin without one, its documentation folder under $BEIGE_HOME/tools.
	Dir string
	// Manifest is the plugin's plugin.json.
	Manifest *config.Manifest
	// Config is the plugin's configuration: the manifest's defaultConfig
	// deep-merged with plugins.<name>.config. A tool call sees it merged
	// further with the agent's pluginConfigs (Call.Config).
	Config map[string]any
	// DataDir is $BEIGE_HOME/data/<name>, for the plugin's own files. It is
	// not created for the plugin.
	DataDir string
	// Packages is $BEIGE_HOME/packages: a plugin whose folder lies in one
	// of its package folders may read that whole package (its ../_shared).
	Packages string
	// Logger logs with the plugin's name attached.
	Logger *slog.Logger
	// Node is plugins.<name>.node: the Node.js binary to run a
	// TypeScript/JavaScript plugin with ("" means look it up).
	Node string
	// Agents are the configured agents' names, in config order.
	Agents []string
	// AllowRead and AllowWrite are plugins.<name>.allowRead/allowWrite:
	// host paths a TypeScript/JavaScript plugin may also read or write.
	AllowRead, AllowWrite []string
	// RegisteredTools returns the names of every plugin tool, sorted. Call
	// it only once the Host is loaded (from Starter.Start on).
	RegisteredTools func() []string
	// Timeout is plugins.<name>.timeout: how long one tool call of a
	// TypeScript/JavaScript plugin may take (0: the default).
	Timeout time.Duration
	// EgressSocket is the host path of the Unix socket that serves this
	// plugin's egress proxy ("": none, the plugin has no network).
	EgressSocket string
	// Unconfined is plugins.<name>.confine: false: the host runs without
	// the namespace jail, with the gateway's network and files (only
	// Node's permission model confines its files).
	Unconfined bool
	// AllowChildProcess is plugins.<name>.allowChildProcess: Node's
	// --allow-child-process (children are not under Node's file
	// permissions, only the jail's mounts).
	AllowChildProcess bool
}

// ScriptLoader creates the plugin of a folder with an index.ts or index.js
// that exports createPlugin (the original's format). The package that runs
// them (internal/plugin/nodehost) sets it from init; without it such a
// folder cannot be loaded.
type ScriptLoader func(env Env) (Plugin, error)

var scriptLoader ScriptLoader

// SetScriptLoader sets the loader of TypeScript/JavaScript plugin folders.
func SetScriptLoader(l ScriptLoader) {
	regMu.Lock()
	defer regMu.Unlock()
	scriptLoader = l
}

// IsScriptDir reports whether dir holds a TypeScript/JavaScript plugin: an
// index.ts or index.js regular file.
func IsScriptDir(dir string) bool {
	for _, n := range []string{"index.ts", "index.js"} {
		if fi, err := os.Lstat(filepath.Join(dir, n)); err == nil && fi.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// Starter is implemented by plugins that do work once the gateway serves
// (the original's start()). Host.Start calls them in config order; they
// are stopped (Stopper) in the reverse order.
type Starter interface {
	Start(ctx context.Context, pc PluginContext) error
}

var (
	regMu    sync.RWMutex
	registry = map[string]Builtin{}
)

// Register adds a built-in plugin. It is meant to be called from init() and
// panics on a programming error: an empty name, missing Docs or New, a
// plugin.json that does not parse or names another plugin, or a name
// registered twice.
func Register(b Builtin) {
	if b.Name == "" || b.Docs == nil || b.New == nil {
		panic("plugin: Register needs a Name, Docs and New")
	}
	m, err := readDocsManifest(b.Docs)
	if err != nil {
		panic(fmt.Sprintf("plugin: built-in %q: %v", b.Name, err))
	}
	if m.Name != b.Name {
		panic(fmt.Sprintf("plugin: built-in %q: plugin.json names %q", b.Name, m.Name))
	}
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[b.Name]; dup {
		panic(fmt.Sprintf("plugin: built-in %q registered twice", b.Name))
	}
	registry[b.Name] = b
}

// Lookup returns the built-in plugin called name.
func Lookup(name string) (Builtin, bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	b, ok := registry[name]
	return b, ok
}

func registered() map[string]Builtin {
	regMu.RLock()
	defer regMu.RUnlock()
	return maps.Clone(registry)
}

// ConfigWarnings returns the warnings about the plugins a config enables:
// configs that cannot be checked (config.PluginSchemaWarnings), then the
// built-in plugins' own (Builtin.Warnings), in the config's order.
func ConfigWarnings(cfg *config.Config) []string {
	bs := registered()
	out := config.PluginSchemaWarnings(cfg)
	for _, name := range cfg.PluginOrder {
		p := cfg.Plugins[name]
		if p == nil || p.Path != "" {
			continue
		}
		b, ok := bs[name]
		if !ok || b.Warnings == nil {
			continue
		}
		var defaults map[string]any
		if m, err := readDocsManifest(b.Docs); err == nil {
			defaults = m.DefaultConfig
		}
		out = append(out, b.Warnings(name, MergeConfig(defaults, p.Config, nil))...)
	}
	return out
}

// Builtins returns the manifests of the built-in plugins by name, for
// config validation (config.LoadOptions.Builtins).
func Builtins() map[string]*config.Manifest {
	return builtinManifests(registered())
}

func builtinManifests(bs map[string]Builtin) map[string]*config.Manifest {
	out := make(map[string]*config.Manifest, len(bs))
	for name, b := range bs {
		m, err := readDocsManifest(b.Docs)
		if err != nil { // checked by Register
			continue
		}
		out[name] = m
	}
	return out
}

func readDocsManifest(docs fs.FS) (*config.Manifest, error) {
	data, err := fs.ReadFile(docs, "plugin.json")
	if err != nil {
		return nil, fmt.Errorf("plugin.json: %w", err)
	}
	var m config.Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("plugin.json: %w", err)
	}
	if m.Name == "" {
		return nil, errors.New("plugin.json: missing \"name\"")
	}
	return &m, nil
}

// WriteDocs writes each built-in plugin's plugin.json, README.md and
// SKILL.md to toolsDir/<plugin>/ ($BEIGE_HOME/tools), replacing what is
// there: the documentation belongs to the binary's version. Files already
// up to date are left alone. `beige setup` calls it; a Host also refreshes
// the folders of the built-ins a config uses.
func WriteDocs(toolsDir string) error {
	bs := registered()
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(bs)) {
		if err := writeDocs(toolsDir, bs[name]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func writeDocs(toolsDir string, b Builtin) error {
	dir := filepath.Join(toolsDir, b.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("plugin %s: write docs: %w", b.Name, err)
	}
	for _, f := range DocFiles {
		data, err := fs.ReadFile(b.Docs, f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("plugin %s: read embedded %s: %w", b.Name, f, err)
		}
		if err := atomicfile.WriteIfChanged(filepath.Join(dir, f), data, 0o644); err != nil {
			return fmt.Errorf("plugin %s: write docs: %w", b.Name, err)
		}
	}
	return nil
}
