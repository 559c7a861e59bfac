package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
)

// MaxFileSize bounds the config file; anything larger is surely a mistake.
const MaxFileSize = 4 << 20

// LoadOptions adjusts Load. A nil *LoadOptions means the defaults.
type LoadOptions struct {
	// LookupEnv resolves ${VAR}; default os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Builtins are the plugins compiled into the binary, by name. A plugin
	// entry without a path must name one of them.
	Builtins map[string]*Manifest
	// SupportedAPI, when set, tells whether this build can speak a
	// provider API; a provider whose api it refuses is an error.
	SupportedAPI func(api string) bool
	// CheckNode, when set, checks the Node.js a TypeScript/JavaScript
	// plugin (a folder with index.ts or index.js) runs with: node is
	// plugins.<name>.node, "" to look it up. Its error is reported at the
	// plugin's entry.
	CheckNode func(node string) error
}

// Load reads, interpolates and validates the config file at path. Every
// problem found is returned at once, as an ErrorList.
func Load(path string, opts *LoadOptions) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, ErrorList{{File: path, Msg: err.Error()}}
	}
	return Parse(path, data, opts)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, errors.New("config file not found (run `beige setup` to create one, or pass -c PATH)")
		case errors.Is(err, fs.ErrPermission):
			return nil, errors.New("cannot read config file: permission denied")
		case errors.As(err, &pe):
			return nil, fmt.Errorf("cannot open config file: %v", pe.Err)
		}
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot read config file: %v", err)
	}
	if st.IsDir() {
		return nil, errors.New("is a directory, not a config file")
	}
	if !st.Mode().IsRegular() && st.Mode()&fs.ModeNamedPipe == 0 {
		return nil, fmt.Errorf("is not a regular file (%v)", st.Mode().Type())
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("config file is too large (%s; the limit is %s)", humanBytes(st.Size()), humanBytes(MaxFileSize))
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot read config file: %v", err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("config file is too large (over %s)", humanBytes(MaxFileSize))
	}
	return data, nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// Parse is Load for a file already read; path names it in errors and
// anchors relative paths.
func Parse(path string, data []byte, opts *LoadOptions) (*Config, error) {
	if opts == nil {
		opts = &LoadOptions{}
	}
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	root, err := parseTree(data)
	if err != nil {
		e := err.(*Error)
		e.File = path
		return nil, ErrorList{e}
	}
	d := &decoder{file: path, dir: filepath.Dir(abs), lookup: lookup, pos: map[string]Pos{}, keyPos: map[string]Pos{}, interp: map[string]string{}}
	cfg := &Config{}
	if root.kind != kindObject {
		d.errorf(root.pos, "", "the config must be an object ({ llm: ..., agents: ... }), got %s", root.kind)
		return nil, d.errs
	}
	d.decode(root, "", reflect.ValueOf(cfg).Elem())
	cfg.File, cfg.Dir = abs, filepath.Dir(abs)
	cfg.Interpolated = d.interp
	sum := sha256.Sum256(data)
	cfg.Hash = hex.EncodeToString(sum[:])
	if n := root.get("plugins"); n != nil && n.kind == kindObject {
		cfg.PluginOrder = append([]string(nil), n.keys...)
	}
	if n := root.get("agents"); n != nil && n.kind == kindObject {
		cfg.AgentOrder = append([]string(nil), n.keys...)
	}
	applyDefaults(cfg)
	v := &validator{d: d, cfg: cfg, builtins: opts.Builtins, supportedAPI: opts.SupportedAPI, checkNode: opts.CheckNode}
	v.validate()
	if len(d.errs) > 0 {
		d.errs.sort()
		return nil, d.errs
	}
	for _, p := range cfg.LLM.Providers {
		if p.Concurrency == 0 {
			p.Concurrency = -1 // absent: unlimited
		}
	}
	return cfg, nil
}

func applyDefaults(cfg *Config) {
	g := &cfg.Gateway
	if g.Host == "" {
		g.Host = DefaultHost
	}
	if g.Port == 0 {
		g.Port = DefaultPort
	}
	if g.Log.MaxSizeBytes == 0 {
		g.Log.MaxSizeBytes = DefaultLogMaxSize
	}
	if g.Log.MaxFiles == 0 {
		g.Log.MaxFiles = DefaultLogMaxFiles
	}
	if g.HTTP.MaxConnections == 0 {
		g.HTTP.MaxConnections = DefaultMaxConns
	}
	for _, a := range cfg.Agents {
		if a == nil {
			continue
		}
		if a.Model.ThinkingLevel == "" {
			a.Model.ThinkingLevel = DefaultThinkingOff
		}
		for i := range a.FallbackModels {
			if a.FallbackModels[i].ThinkingLevel == "" {
				a.FallbackModels[i].ThinkingLevel = DefaultThinkingOff
			}
		}
		if a.Tools == nil {
			a.Tools = []string{}
		}
		if a.Skills == nil {
			a.Skills = []string{}
		}
		if a.FallbackModels == nil {
			a.FallbackModels = []ModelRef{}
		}
		s := &a.Sandbox
		if s.MemoryLimit == 0 {
			s.MemoryLimit = DefaultMemoryLimit
		}
		if s.CPUs == 0 {
			s.CPUs = DefaultCPUs
		}
		if s.User == "root" {
			s.User = "0:0"
		}
		if s.Network == "" {
			s.Network = DefaultNetwork
		}
	}
}

// Names returns the keys of the top-level object section ("agents",
// "plugins") of the config file at path, in file order, without
// validating anything else: for shell completion, which must work while
// another part of the config is being fixed (or an API key is not set in
// this shell).
func Names(path, section string) ([]string, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	root, err := parseTree(data)
	if err != nil {
		return nil, err
	}
	n := root.get(section)
	if n == nil || n.kind != kindObject {
		return nil, nil
	}
	return append([]string(nil), n.keys...), nil
}
