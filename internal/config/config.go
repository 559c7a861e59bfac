// Package config owns config.json5: its schema, the JSON5 loader with ${VAR}
// interpolation, and validation that reports every problem with its file,
// line, column and JSON path. It also reads the plugin.json and skill.json
// manifests the config points at, since they are part of what is validated.
package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Config is a loaded, validated config.json5.
type Config struct {
	// Schema names the JSON Schema editors check the file against (the
	// file `beige setup` writes, or `beige config schema` prints). Beige
	// itself does not read it.
	Schema  string             `json:"$schema"`
	LLM     LLM                `json:"llm" cfg:"required"`
	Plugins map[string]*Plugin `json:"plugins"`
	Skills  map[string]*Skill  `json:"skills"`
	Agents  map[string]*Agent  `json:"agents" cfg:"required"`
	Gateway Gateway            `json:"gateway"`

	// File is the path the config was loaded from; Dir is its folder,
	// against which relative paths were resolved.
	File string `json:"-"`
	Dir  string `json:"-"`
	// PluginOrder and AgentOrder list the names in file order: hooks run in
	// the order plugins are written.
	PluginOrder []string `json:"-"`
	AgentOrder  []string `json:"-"`
	// Hash identifies the file's content, to tell whether a reload changed it.
	Hash string `json:"-"`
	// Interpolated maps the JSON path of every string value that had a
	// ${VAR} reference to its value, for internal/redact.
	Interpolated map[string]string `json:"-"`
}

// LLM holds the model providers.
type LLM struct {
	Providers map[string]*Provider `json:"providers" cfg:"required"`
	// IdleTimeoutSeconds is how long a model stream may send nothing before
	// the watchdog aborts it and counts a failure of that model (default 600).
	IdleTimeoutSeconds float64 `json:"idleTimeoutSeconds"`
}

// Provider is one LLM provider account.
type Provider struct {
	// APIKey is the provider's key; usually "${SOME_ENV_VAR}".
	APIKey Secret `json:"apiKey"`
	// BaseURL overrides the provider's endpoint (any compatible server).
	BaseURL string `json:"baseUrl"`
	// API is the wire format: anthropic-messages, openai-completions,
	// openai-responses or google-generative-ai. It may be left out for the
	// providers pi knows by name (KnownProviders: anthropic, openai, google,
	// openrouter, zai, groq, ...), and so may BaseURL.
	API string `json:"api"`
	// Concurrency caps the requests in flight to this provider; -1 or
	// absent means unlimited.
	Concurrency int `json:"concurrency"`
	// Models adds model metadata for models the built-in catalogue does not know.
	Models []ModelInfo `json:"models"`
}

// ModelInfo describes a model for the registry (GET /api/agents/:name/models).
type ModelInfo struct {
	ID            string    `json:"id" cfg:"required"`
	Name          string    `json:"name"`
	Reasoning     bool      `json:"reasoning"`
	Input         []string  `json:"input"`
	Cost          ModelCost `json:"cost"`
	ContextWindow int       `json:"contextWindow"`
	MaxTokens     int       `json:"maxTokens"`
}

// ModelCost is in dollars per million tokens.
type ModelCost struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
}

// Plugin enables a plugin. A plugin built into the binary needs no Path.
type Plugin struct {
	// Path is a folder holding plugin.json, README.md and SKILL.md.
	Path string `json:"path" cfg:"path"`
	// Config is the plugin's configuration, deep-merged with each agent's
	// pluginConfigs entry (arrays are replaced, not merged).
	Config map[string]any `json:"config"`
	// Source is where `beige plugins install` fetched the plugin from
	// ("npm:...", "github:...", a folder); `beige plugins update` fetches
	// it again from there. The gateway does not use it.
	Source string `json:"_source"`
	// Node is the Node.js binary a TypeScript/JavaScript plugin runs with
	// (an absolute path or a name in PATH; default: $BEIGE_NODE, else node
	// in PATH; version 22 or later).
	Node string `json:"node"`
	// AllowRead and AllowWrite give a TypeScript/JavaScript plugin more
	// than its own folder (read) and data folder (read and write): host
	// paths, absolute. Each one gives up some of the plugin's confinement
	// (the gateway logs a warning). The toolkit's sessions plugin reads
	// session files: allowRead: ["<BEIGE_HOME>/sessions"].
	AllowRead  []string `json:"allowRead"`
	AllowWrite []string `json:"allowWrite"`
	// Timeout is how long, in seconds, one tool call of a
	// TypeScript/JavaScript plugin may take before its host is killed and
	// restarted (default 900, as the exec tool's).
	Timeout float64 `json:"timeout"`
	// Egress is the policy of a TypeScript/JavaScript plugin's egress
	// proxy, the same shape as sandbox.egress. Absent, the plugin reaches
	// every public destination on any port; loopback, private, link-local
	// and other special addresses and the gateway host's own are refused
	// unless an address rule in Allow names them. Each connection is
	// audited with agent "plugin:<name>".
	Egress Egress `json:"egress"`
	// Confine: false runs a TypeScript/JavaScript plugin's host without
	// its namespace jail, with the gateway's network and files (default
	// true; the gateway warns). Without a jail available a confined plugin
	// does not start.
	Confine *bool `json:"confine"`
	// AllowChildProcess lets a TypeScript/JavaScript plugin start programs
	// (Node's --allow-child-process; default false). The children are not
	// under Node's file permissions, only the jail's mounts.
	AllowChildProcess bool `json:"allowChildProcess"`

	// Manifest is the plugin.json read from Path (nil for built-in plugins
	// until the plugin registry fills it in).
	Manifest *Manifest `json:"-"`
}

// Skill is a folder of knowledge mounted read-only at /skills/<name>.
type Skill struct {
	Path string `json:"path" cfg:"required,path"`

	Manifest *SkillManifest `json:"-"`
}

// Agent is one agent: its model, what it may use, and its sandbox.
type Agent struct {
	Model          ModelRef                  `json:"model" cfg:"required"`
	FallbackModels []ModelRef                `json:"fallbackModels"`
	Tools          []string                  `json:"tools"`
	Skills         []string                  `json:"skills"`
	PluginConfigs  map[string]map[string]any `json:"pluginConfigs"`
	// WorkspaceDir is the host folder mounted at /workspace; default
	// $BEIGE_HOME/agents/<name>/workspace.
	WorkspaceDir string  `json:"workspaceDir" cfg:"path"`
	Sandbox      Sandbox `json:"sandbox" cfg:"required"`
	// Approval lists the calls a human must approve before they run.
	Approval Approval `json:"approval"`
}

// Approval is an agent's "ask" rules: a tool call the policy allows and a
// rule matches waits until someone answers on a channel attached to the
// session (web console, Telegram, terminal client); no answer within
// TimeoutSeconds denies it. Patterns are globs: "*" is any run of
// characters, everything else stands for itself, and the whole text must
// match. They are a convenience for a human in the loop, not a boundary: a
// command can be spelled many ways ("git push" from a script), so "*" is
// the only exec rule that catches every command.
type Approval struct {
	// Exec patterns match the exec tool's command, e.g. "git push*".
	Exec []string `json:"exec"`
	// Tools patterns match "tool arg1 arg2 …" of any tool call (exec's
	// command included, as "exec <command>"); a pattern also matches the
	// same text followed by " " and more, so "github" asks for every call
	// of the github tool and "git push" for "git push origin main".
	Tools []string `json:"tools"`
	// Egress patterns match a sandbox's connection through the egress
	// proxy (network mode "proxy") that sandbox.egress allows: a pattern
	// with a ":" matches "host:port" (an IPv6 host in brackets), any other
	// the host alone, e.g. "*", "*.github.com", "example.com:443".
	Egress []string `json:"egress"`
	// TimeoutSeconds is how long a call waits for an answer before it is
	// denied (default 300).
	TimeoutSeconds float64 `json:"timeoutSeconds"`
}

// DefaultApprovalTimeout is Approval.TimeoutSeconds when it is not set.
const DefaultApprovalTimeout = 300 * time.Second

// Timeout is how long a call waits for an answer.
func (a Approval) Timeout() time.Duration {
	if a.TimeoutSeconds <= 0 {
		return DefaultApprovalTimeout
	}
	return time.Duration(a.TimeoutSeconds * float64(time.Second))
}

// Empty reports whether no rule is set.
func (a Approval) Empty() bool { return len(a.Exec) == 0 && len(a.Tools) == 0 && len(a.Egress) == 0 }

// ModelRef names a model of a configured provider.
type ModelRef struct {
	Provider string `json:"provider" cfg:"required"`
	Model    string `json:"model" cfg:"required"`
	// ThinkingLevel is off, minimal, low, medium, high or xhigh (default off).
	ThinkingLevel string `json:"thinkingLevel,omitempty"`
	// CompactionThreshold is the context size in tokens at which older turns
	// are summarised; 0 means near the model's context window.
	CompactionThreshold int `json:"compactionThreshold,omitempty"`
}

func (m ModelRef) String() string { return m.Provider + "/" + m.Model }

// Sandbox configures an agent's container. Every hardening default can be
// overridden here; see the README's sandbox section.
type Sandbox struct {
	Image string `json:"image" cfg:"required"`
	// MemoryLimit is e.g. "2g" or a number of bytes (default "3g").
	MemoryLimit ByteSize `json:"memoryLimit"`
	// CPUs is the CPU time the sandbox may use, in CPUs, e.g. 1.5 (default
	// 1, so that one agent cannot load every core of the host; -1: no limit).
	CPUs float64 `json:"cpus"`
	// PidsLimit caps processes in the container (default 1024).
	PidsLimit int64 `json:"pidsLimit"`
	// Network is how the sandbox reaches the network:
	//   - "proxy" (default): no route out; the only peer is the gateway's
	//     egress proxy, announced as HTTP_PROXY/HTTPS_PROXY (and lower-case)
	//     in the sandbox and governed by Egress. Whatever ignores the proxy
	//     cannot connect; other agents and the host's services are unreachable.
	//   - "none": no network at all (loopback only).
	//   - "open": Docker's default bridge: the internet, the other agents on
	//     the bridge and the host's services on the bridge address are all
	//     reachable, and nothing is audited (a warning at start).
	// "bridge" is "open" (a note in the log). Any other name is a Docker
	// network the sandbox joins, as open (a warning). "host" and
	// "container:…" are refused.
	Network string `json:"network"`
	// Egress is the policy of the egress proxy in the "proxy" mode.
	Egress Egress `json:"egress"`
	// User is the numeric "uid:gid" agent code runs as (default: the
	// gateway's own user when it is not root, else "1000:1000"). "root" or
	// "0:0" runs agent code as host root (no user namespace): a warning.
	// "root" is stored as "0:0".
	User string `json:"user"`
	// ReadOnlyRootfs mounts the image's root filesystem read-only (default
	// false); /tmp, $HOME and the workspace stay writable.
	ReadOnlyRootfs bool `json:"readOnlyRootfs"`
	// Runtime is the OCI runtime, e.g. "runsc" for gVisor.
	Runtime     string            `json:"runtime"`
	ExtraMounts []Mount           `json:"extraMounts"`
	ExtraEnv    map[string]string `json:"extraEnv"`
	// CapAdd and CapDrop replace the default capability sets when given.
	CapAdd  []string `json:"capAdd"`
	CapDrop []string `json:"capDrop"`
	// SecurityOpt replaces the default ["no-new-privileges:true"] when given.
	SecurityOpt []string `json:"securityOpt"`
}

// Egress is an agent's egress policy (sandbox.egress). Each rule is "*",
// a host name ("api.github.com"), a wildcard ("*.pypi.org", every name under
// pypi.org), either with an optional ":port", or an address or CIDR
// ("10.0.0.5", "10.0.0.0/8", "[::1]:8080"). Deny wins over allow. A name the
// gateway resolves to a loopback, private, link-local or other special
// address, or to the host's own, is refused unless an address rule in Allow
// contains that address.
type Egress struct {
	// Allow lists what may be reached; absent means ["*"] (every public
	// destination, each connection audited); [] means nothing.
	Allow []string `json:"allow"`
	// Deny lists what may not, by name or by (resolved) address.
	Deny []string `json:"deny"`
	// Credentials are headers the egress proxy adds to every HTTPS request
	// to their host (port 443). For those hosts only, the proxy terminates
	// TLS with the home's CA ($BEIGE_HOME/data/egress-ca), which sandboxes
	// trust; the value ("Bearer ${GITHUB_TOKEN}") never enters the sandbox
	// and is masked in the responses. The host must still be allowed.
	Credentials []EgressCredential `json:"credentials"`
}

// EgressCredential is one entry of sandbox.egress.credentials.
type EgressCredential struct {
	Host   string `json:"host"`   // a DNS name, no wildcard, no port
	Header string `json:"header"` // e.g. "Authorization"
	Value  string `json:"value"`  // usually "${SOME_ENV_VAR}"
}

// Values of Sandbox.Network.
const (
	NetworkProxy  = "proxy"
	NetworkNone   = "none"
	NetworkOpen   = "open"
	NetworkBridge = "bridge" // the old name of "open"
)

// Gateway configures the gateway process.
type Gateway struct {
	Host    string `json:"host"` // default 127.0.0.1
	Port    int    `json:"port"` // default 7433
	LogFile string `json:"logFile" cfg:"path"`
	Log     Log    `json:"log"`
	Audit   Audit  `json:"audit"`
	HTTP    HTTP   `json:"http"`
	// Metrics configures the Prometheus metrics, served at GET /metrics on
	// the API (same guard and token) and, optionally, on a listener of
	// their own.
	Metrics Metrics `json:"metrics"`
	// AuthToken, when set, is required as "Authorization: Bearer <token>"
	// on every HTTP API request.
	AuthToken Secret `json:"authToken"`
}

// Log sets the rotation of the gateway log (and the size at which the
// audit log rotates, unless gateway.audit.maxSizeBytes is set).
type Log struct {
	MaxSizeBytes int64 `json:"maxSizeBytes"` // default 10 MB
	MaxFiles     int   `json:"maxFiles"`     // default 5
}

// Audit sets the rotation and retention of logs/audit.jsonl.
type Audit struct {
	// MaxSizeBytes is the size at which audit.jsonl is rotated to
	// audit.jsonl.1 (0, the default: gateway.log.maxSizeBytes).
	MaxSizeBytes int64 `json:"maxSizeBytes"`
	// MaxFiles is the operator's retention: how many rotated audit files
	// are kept. 0, the default, keeps every one, so that no agent's
	// traffic can push a record out of the log (the disk must then be
	// watched). A positive value deletes the oldest file past it, which
	// gives that up: the gateway warns at start.
	MaxFiles int `json:"maxFiles"`
}

// HTTP bounds the HTTP API's connections.
type HTTP struct {
	// MaxConnections caps the API's open connections (default 256). At the
	// cap, a new connection closes the oldest one that is idle or has not
	// sent a request yet; when every one is inside a request, the new one
	// is refused with 503.
	MaxConnections int `json:"maxConnections"`
}

// Metrics configures GET /metrics.
type Metrics struct {
	// Listen, e.g. "127.0.0.1:9464", adds a second listener that serves
	// only GET /metrics, with the API's rules: the DNS-rebinding and
	// browser guards, and gateway.authToken when it is set. Empty (the
	// default): /metrics is on the API's address only. An address beyond
	// loopback without gateway.authToken lets whoever reaches it read the
	// metrics (agent, tool and model names, call counts): a warning at
	// start, and an error of beige doctor.
	Listen string `json:"listen"`
}

// Defaults that the spec allows.
const (
	DefaultHost         = "127.0.0.1"
	DefaultPort         = 7433
	DefaultLogMaxSize   = 10 << 20
	DefaultMaxConns     = 256
	DefaultLogMaxFiles  = 5
	DefaultMemoryLimit  = 3 << 30
	DefaultCPUs         = 1.0
	DefaultNetwork      = NetworkProxy
	DefaultThinkingOff  = "off"
	DefaultSandboxImage = "beige-sandbox:latest"
)

// Secret is a string that never shows itself in logs, JSON or fmt output.
type Secret string

// Reveal returns the secret's value, for the one place that needs it.
func (s Secret) Reveal() string { return string(s) }

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return s.String() }

// LogValue redacts the secret in slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON redacts the secret in JSON output.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(fmt.Sprintf("%q", s.String())), nil }

// ByteSize is a size in bytes, written as a number or as "512m", "2g".
type ByteSize int64

// Mount is an extra bind mount into the sandbox, written as
// "host:container[:ro]" or {source, target, readOnly}.
type Mount struct {
	Source   string `json:"source" cfg:"required,path"`
	Target   string `json:"target" cfg:"required"`
	ReadOnly bool   `json:"readOnly"`
}

// Manifest is a plugin.json.
type Manifest struct {
	Name          string         `json:"name"`
	Description   string         `json:"description"`
	Commands      []string       `json:"commands,omitempty"`
	Provides      Provides       `json:"provides"`
	ConfigSchema  map[string]any `json:"configSchema,omitempty"`
	DefaultConfig map[string]any `json:"defaultConfig,omitempty"`
	// Run makes this an external plugin: a host command run for each call.
	Run *RunSpec `json:"run,omitempty"`
}

// Provides lists what a plugin registers.
type Provides struct {
	Tools    []string `json:"tools,omitempty"`
	Channels []string `json:"channels,omitempty"`
	Hooks    []string `json:"hooks,omitempty"`
	Skills   []string `json:"skills,omitempty"`
	// Channel is the singular form: the original's manifests write
	// `"channel": true` (the plugin provides a channel named after
	// itself), ours may write a channel's name.
	Channel ChannelDecl `json:"channel,omitempty"`
}

// ChannelDecl is provides.channel: a channel name, or ChannelOwnName for
// `true`. `false` and absent are "".
type ChannelDecl string

// ChannelOwnName is provides.channel: true, read as the plugin's own name.
const ChannelOwnName ChannelDecl = "\x00own"

// UnmarshalJSON accepts true, false or a string.
func (c *ChannelDecl) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case bool:
		*c = ""
		if v {
			*c = ChannelOwnName
		}
	case string:
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("provides.channel: invalid name %q", v)
		}
		*c = ChannelDecl(v)
	case nil:
		*c = ""
	default:
		return fmt.Errorf("provides.channel: want true or a channel name, got %s", b)
	}
	return nil
}

// MarshalJSON writes ChannelOwnName back as true.
func (c ChannelDecl) MarshalJSON() ([]byte, error) {
	if c == ChannelOwnName {
		return []byte("true"), nil
	}
	return json.Marshal(string(c))
}

// ChannelNames lists the channels a plugin named plugin declares, in
// order, without repeats.
func (p Provides) ChannelNames(plugin string) []string {
	var out []string
	add := func(n string) {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	for _, n := range p.Channels {
		add(n)
	}
	if p.Channel == ChannelOwnName {
		add(plugin)
	} else {
		add(string(p.Channel))
	}
	return out
}

// RunSpec is how an external plugin's tool is run on the host: Command
// (relative to the plugin folder) with the call's args appended; the merged
// plugin config as JSON on stdin; killed after Timeout seconds (default 60).
type RunSpec struct {
	Command []string `json:"command"`
	Timeout float64  `json:"timeout,omitempty"`
}

// SkillManifest is a skill.json.
type SkillManifest struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	ContextFile string `json:"contextFile,omitempty"` // default README.md
	Requires    struct {
		Tools  []string `json:"tools,omitempty"`
		Skills []string `json:"skills,omitempty"`
	} `json:"requires"`
}
