package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	posixpath "path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/beige-dev/beige/internal/approval"
	"github.com/beige-dev/beige/internal/egress"
)

// APIs are the provider wire formats Beige knows.
var APIs = []string{"anthropic-messages", "openai-completions", "openai-responses", "google-generative-ai"}

// KnownProvider is what a provider's name says about it.
type KnownProvider struct {
	API string
	// BaseURL is the endpoint; "" leaves it to the API's default (the
	// vendor's own: api.anthropic.com, api.openai.com, Google's).
	BaseURL string
}

// KnownProviders are the providers pi (the original Beige's model layer,
// @mariozechner/pi-ai) knows by name, with the API and base URL it uses for
// them, so that `zai: { apiKey: ... }` needs nothing more. Where pi speaks
// a vendor's own API that beige does not (mistral), the vendor's
// OpenAI-compatible endpoint is used. An explicit api or baseUrl wins.
var KnownProviders = map[string]KnownProvider{
	"anthropic":   {API: "anthropic-messages"},
	"openai":      {API: "openai-completions"},
	"google":      {API: "google-generative-ai"},
	"openrouter":  {API: "openai-completions", BaseURL: "https://openrouter.ai/api/v1"},
	"zai":         {API: "openai-completions", BaseURL: "https://api.z.ai/api/coding/paas/v4"},
	"groq":        {API: "openai-completions", BaseURL: "https://api.groq.com/openai/v1"},
	"cerebras":    {API: "openai-completions", BaseURL: "https://api.cerebras.ai/v1"},
	"xai":         {API: "openai-completions", BaseURL: "https://api.x.ai/v1"},
	"mistral":     {API: "openai-completions", BaseURL: "https://api.mistral.ai/v1"},
	"deepseek":    {API: "openai-completions", BaseURL: "https://api.deepseek.com"},
	"huggingface": {API: "openai-completions", BaseURL: "https://router.huggingface.co/v1"},
	"minimax":     {API: "anthropic-messages", BaseURL: "https://api.minimax.io/anthropic"},
	"minimax-cn":  {API: "anthropic-messages", BaseURL: "https://api.minimaxi.com/anthropic"},
	"kimi-coding": {API: "anthropic-messages", BaseURL: "https://api.kimi.com/coding"},
}

// ThinkingLevels are the accepted values of model.thinkingLevel.
var ThinkingLevels = []string{"off", "minimal", "low", "medium", "high", "xhigh"}

// CoreTools are given to every agent; listing them in tools is allowed.
var CoreTools = []string{"read", "write", "patch", "exec"}

// AgentNameRE is what an agent name may look like: it becomes a container
// name, a host name and a socket file name.
var AgentNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// MaxAgentName keeps socket paths and container names well inside their limits.
const MaxAgentName = 48

// reservedTargets are sandbox paths an extra mount may not cover.
var reservedTargets = []string{"/workspace", "/tools", "/beige", "/skills", "/proc", "/sys", "/dev"}

// userRE is sandbox.user: numeric uid:gid, each below 2^31-1.
var userRE = regexp.MustCompile(`^[0-9]{1,9}:[0-9]{1,9}$`)

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// headerNameRE is an HTTP header name (RFC 9110 token).
var headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// networkRE is what Docker accepts as a network name.
var networkRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// proxyEnv is set by beige in the "proxy" network mode.
var proxyEnv = []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"}

type validator struct {
	d            *decoder
	cfg          *Config
	builtins     map[string]*Manifest
	supportedAPI func(string) bool
	checkNode    func(node string) error
}

func (v *validator) errorAt(path, format string, args ...any) { v.d.errorAt(path, format, args...) }

func (v *validator) validate() {
	v.providers()
	v.plugins()
	v.pluginSchemas()
	v.skills()
	v.agents()
	v.gateway()
}

func sortedKeys[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (v *validator) providers() {
	if v.cfg.LLM.IdleTimeoutSeconds < 0 {
		v.errorAt("llm.idleTimeoutSeconds", "must not be negative")
	}
	for _, name := range sortedKeys(v.cfg.LLM.Providers) {
		p := v.cfg.LLM.Providers[name]
		path := joinPath("llm.providers", name)
		if p == nil {
			v.errorAt(path, "want an object, got null")
			delete(v.cfg.LLM.Providers, name)
			continue
		}
		known, isKnown := KnownProviders[name]
		if p.API == "" {
			if isKnown {
				p.API = known.API
			} else {
				v.errorAt(path, "missing required field \"api\": provider %q is not one beige knows by name (%s), so say which API it speaks (%s) and its baseUrl", name, strings.Join(sortedKeys(KnownProviders), ", "), strings.Join(APIs, ", "))
			}
		}
		if isKnown && p.BaseURL == "" && p.API == known.API {
			p.BaseURL = known.BaseURL
		}
		switch {
		case p.API == "": // reported above
		case !slices.Contains(APIs, p.API):
			msg := fmt.Sprintf("unknown api %q (known: %s)", p.API, strings.Join(APIs, ", "))
			if s := suggest(p.API, APIs); s != "" {
				msg = fmt.Sprintf("unknown api %q (did you mean %q?)", p.API, s)
			}
			v.errorAt(path+".api", "%s", msg)
		case v.supportedAPI != nil && !v.supportedAPI(p.API):
			v.unbuiltAPI(path, name, p.API)
		}
		if p.BaseURL != "" {
			u, err := url.Parse(p.BaseURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				v.errorAt(path+".baseUrl", "want an http(s) URL like \"https://api.example.com/v1\", got %q", p.BaseURL)
			}
		}
		if _, set := v.d.pos[path+".concurrency"]; set && (p.Concurrency == 0 || p.Concurrency < -1) {
			v.errorAt(path+".concurrency", "want a positive number of requests, or -1 (or leave it out) for no limit; got %d", p.Concurrency)
		}
		for i, m := range p.Models {
			mp := fmt.Sprintf("%s.models[%d]", path, i)
			for j, in := range m.Input {
				if in != "text" && in != "image" {
					v.errorAt(fmt.Sprintf("%s.input[%d]", mp, j), "want \"text\" or \"image\", got %q", in)
				}
			}
			if m.ContextWindow < 0 || m.MaxTokens < 0 {
				v.errorAt(mp, "contextWindow and maxTokens must not be negative")
			}
		}
	}
}

// unbuiltAPI reports a provider whose API this binary has no
// implementation of: at its "api" key, or, when the API was inferred from
// the provider's name, at the provider.
func (v *validator) unbuiltAPI(path, name, api string) {
	var built []string
	for _, a := range APIs {
		if v.supportedAPI(a) {
			built = append(built, a)
		}
	}
	list := "none"
	if len(built) > 0 {
		list = strings.Join(built, ", ")
	}
	if _, written := v.d.pos[path+".api"]; written {
		v.errorAt(path+".api", "api %q is not built into this beige binary (built: %s)", api, list)
		return
	}
	v.errorAt(path, "provider %q speaks api %q (known from its name), which is not built into this beige binary (built: %s); set \"api\" to one that is", name, api, list)
}

func (v *validator) plugins() {
	for _, name := range sortedKeys(v.cfg.Plugins) {
		p := v.cfg.Plugins[name]
		path := joinPath("plugins", name)
		if p == nil {
			v.cfg.Plugins[name] = &Plugin{}
			p = v.cfg.Plugins[name]
		}
		v.egress(path+".egress", p.Egress)
		// The egress proxy serves only TypeScript/JavaScript plugins: a key
		// that does nothing must not look like a confinement.
		egressSet := p.Egress.Allow != nil || p.Egress.Deny != nil || p.Egress.Credentials != nil
		notScript := func() {
			if egressSet {
				v.errorAt(path+".egress", "plugin %q is not a TypeScript/JavaScript plugin; egress applies only to those", name)
			}
		}
		if p.Path == "" {
			notScript()
			if m, ok := v.builtins[name]; ok {
				p.Manifest = m
				continue
			}
			if v.builtins != nil {
				v.errorAt(path, "plugin %q has no path and is not built into beige (built-in: %s)", name, strings.Join(sortedKeys(v.builtins), ", "))
			}
			continue
		}
		if p.Timeout < 0 {
			v.errorAt(path+".timeout", "must not be negative")
		}
		m, err := ReadManifest(p.Path)
		if err != nil {
			if errors.Is(err, errNoFolder) {
				v.errorAt(path+".path", "plugin %q is not installed: %v", name, err)
			} else {
				v.errorAt(path+".path", "%v", err)
			}
			continue
		}
		p.Manifest = m
		if _, host := NodeNeeded(p, v.builtins); host {
			if v.checkNode != nil {
				if err := v.checkNode(p.Node); err != nil {
					v.errorAt(path, "plugin %q is a TypeScript/JavaScript plugin and needs Node.js 22 or later: %v (install it, or set plugins.%s.node to its path)", name, err, name)
				}
			}
			continue
		}
		notScript()
		if m.Run == nil && v.builtins != nil {
			if _, ok := v.builtins[m.Name]; !ok {
				v.errorAt(path+".path", "plugin.json of %q has no \"run\" command, its folder no index.ts or index.js, and no plugin %q is built into beige", name, m.Name)
			}
		}
	}
}

// isScriptDir reports whether dir holds a TypeScript/JavaScript plugin in
// the original's format: an index.ts or index.js regular file.
func isScriptDir(dir string) bool {
	for _, n := range []string{"index.ts", "index.js"} {
		if fi, err := os.Lstat(filepath.Join(dir, n)); err == nil && fi.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// ReadManifest reads dir/plugin.json.
func ReadManifest(dir string) (*Manifest, error) {
	var m Manifest
	if err := readJSONFile(dir, "plugin.json", &m); err != nil {
		return nil, err
	}
	if m.Name == "" {
		return nil, fmt.Errorf("%s: missing \"name\"", filepath.Join(dir, "plugin.json"))
	}
	if m.Run != nil && len(m.Run.Command) == 0 {
		return nil, fmt.Errorf("%s: \"run.command\" is empty", filepath.Join(dir, "plugin.json"))
	}
	return &m, nil
}

// ReadSkillManifest reads dir/skill.json.
func ReadSkillManifest(dir string) (*SkillManifest, error) {
	var m SkillManifest
	if err := readJSONFile(dir, "skill.json", &m); err != nil {
		return nil, err
	}
	if m.ContextFile == "" {
		m.ContextFile = "README.md"
	}
	return &m, nil
}

// errNoFolder is a manifest's folder that does not exist.
var errNoFolder = errors.New("folder does not exist")

func readJSONFile(dir, name string, v any) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s", errNoFolder, dir)
	case err != nil:
		return err
	case !st.IsDir():
		return fmt.Errorf("%s is not a folder", dir)
	}
	file := filepath.Join(dir, name)
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no %s in %s", name, dir)
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %v", file, err)
	}
	return nil
}

func (v *validator) skills() {
	for _, name := range sortedKeys(v.cfg.Skills) {
		s := v.cfg.Skills[name]
		path := joinPath("skills", name)
		if s == nil {
			v.errorAt(path, "want an object with a path, got null")
			delete(v.cfg.Skills, name)
			continue
		}
		if s.Path == "" {
			continue // already reported as missing
		}
		m, err := ReadSkillManifest(s.Path)
		if err != nil {
			v.errorAt(path+".path", "%v", err)
			continue
		}
		if m.Name == "" {
			m.Name = name
		}
		s.Manifest = m
	}
}

// toolOwner returns the plugin that provides tool, or "".
func (v *validator) toolOwner(tool string) string {
	for _, name := range v.cfg.PluginOrder {
		p := v.cfg.Plugins[name]
		if p == nil {
			continue
		}
		if p.Manifest != nil && slices.Contains(p.Manifest.Provides.Tools, tool) {
			return name
		}
		if tool == name || strings.HasPrefix(tool, name+".") {
			if p.Manifest == nil || len(p.Manifest.Provides.Tools) == 0 {
				return name
			}
		}
	}
	return ""
}

func (v *validator) agents() {
	if len(v.cfg.Agents) == 0 {
		if _, set := v.d.pos["agents"]; set {
			v.errorAt("agents", "at least one agent is required")
		}
		return
	}
	providers := sortedKeys(v.cfg.LLM.Providers)
	for _, name := range v.cfg.AgentOrder {
		a := v.cfg.Agents[name]
		path := joinPath("agents", name)
		if a == nil {
			v.errorAt(path, "want an object, got null")
			delete(v.cfg.Agents, name)
			continue
		}
		if !AgentNameRE.MatchString(name) || len(name) > MaxAgentName {
			v.errorAt(path, "invalid agent name %q: use lowercase letters, digits, \"-\" and \"_\", starting with a letter or digit, at most %d characters (it names the agent's container and socket)", name, MaxAgentName)
		}
		v.modelRef(path+".model", a.Model, providers)
		for i, m := range a.FallbackModels {
			v.modelRef(fmt.Sprintf("%s.fallbackModels[%d]", path, i), m, providers)
		}
		seen := map[string]bool{}
		for i, t := range a.Tools {
			tp := fmt.Sprintf("%s.tools[%d]", path, i)
			switch {
			case seen[t]:
				v.errorAt(tp, "tool %q is listed twice", t)
			case slices.Contains(CoreTools, t):
			case v.toolOwner(t) == "":
				msg := fmt.Sprintf("unknown tool %q: no configured plugin provides it", t)
				if len(v.cfg.Plugins) > 0 {
					msg += " (plugins: " + strings.Join(sortedKeys(v.cfg.Plugins), ", ") + ")"
				} else {
					msg += fmt.Sprintf(" (add it under plugins: { %s: { ... } })", t)
				}
				v.errorAt(tp, "%s", msg)
			}
			seen[t] = true
		}
		for i, s := range a.Skills {
			if _, ok := v.cfg.Skills[s]; !ok {
				v.unknownRef(fmt.Sprintf("%s.skills[%d]", path, i), "skill", s, sortedKeys(v.cfg.Skills))
			}
		}
		for _, p := range sortedKeys(a.PluginConfigs) {
			if _, ok := v.cfg.Plugins[p]; !ok {
				v.unknownRef(joinPath(path+".pluginConfigs", p), "plugin", p, sortedKeys(v.cfg.Plugins))
			}
		}
		v.sandbox(path+".sandbox", &a.Sandbox)
		v.approval(path+".approval", a.Approval)
	}
}

// maxApprovalTimeout bounds approval.timeoutSeconds (a day): a call that
// waits longer holds its session's turn.
const maxApprovalTimeout = 86400

func (v *validator) approval(path string, a Approval) {
	for i, p := range a.Exec {
		if err := approval.CheckPattern(p); err != nil {
			v.errorAt(fmt.Sprintf("%s.exec[%d]", path, i), "%v", err)
		}
	}
	for i, p := range a.Tools {
		if err := approval.CheckPattern(p); err != nil {
			v.errorAt(fmt.Sprintf("%s.tools[%d]", path, i), "%v", err)
		}
	}
	for i, p := range a.Egress {
		if err := approval.CheckPattern(p); err != nil {
			v.errorAt(fmt.Sprintf("%s.egress[%d]", path, i), "%v", err)
		} else if strings.ContainsAny(p, " /") {
			v.errorAt(fmt.Sprintf("%s.egress[%d]", path, i), "pattern %q: want a host or host:port pattern (\"*.github.com\", \"example.com:443\", \"[fd00::*]:*\")", p)
		}
	}
	if a.TimeoutSeconds < 0 || a.TimeoutSeconds > maxApprovalTimeout {
		v.errorAt(path+".timeoutSeconds", "want a number of seconds between 0 (the default, 300) and %d", maxApprovalTimeout)
	}
}

// unknownRef reports a name that refers to nothing configured.
func (v *validator) unknownRef(path, what, name string, known []string) {
	msg := fmt.Sprintf("unknown %s %q", what, name)
	if len(known) > 0 {
		msg += " (known: " + strings.Join(known, ", ") + ")"
	} else {
		msg += fmt.Sprintf(" (no %s is configured)", what)
	}
	if s := suggest(name, known); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	v.errorAt(path, "%s", msg)
}

func (v *validator) modelRef(path string, m ModelRef, providers []string) {
	if m.Provider != "" {
		if _, ok := v.cfg.LLM.Providers[m.Provider]; !ok {
			v.unknownRef(path+".provider", "provider", m.Provider, providers)
		}
	}
	if m.ThinkingLevel != "" && !slices.Contains(ThinkingLevels, m.ThinkingLevel) {
		v.errorAt(path+".thinkingLevel", "unknown thinking level %q (known: %s)", m.ThinkingLevel, strings.Join(ThinkingLevels, ", "))
	}
	if m.CompactionThreshold < 0 {
		v.errorAt(path+".compactionThreshold", "must not be negative")
	}
}

func (v *validator) sandbox(path string, s *Sandbox) {
	if s.MemoryLimit != 0 && s.MemoryLimit < 6<<20 {
		v.errorAt(path+".memoryLimit", "%d bytes is below Docker's minimum of 6 MB", s.MemoryLimit)
	}
	if s.CPUs < 0 && s.CPUs != -1 {
		v.errorAt(path+".cpus", "want a positive number of CPUs, or -1 for no limit")
	}
	if s.User != "" && s.User != "root" && !userRE.MatchString(s.User) {
		v.errorAt(path+".user", "want a numeric \"uid:gid\" (e.g. \"1000:1000\") or \"root\", got %q", s.User)
	}
	if s.PidsLimit < -1 {
		v.errorAt(path+".pidsLimit", "want a positive number, or -1 for no limit")
	}
	for i, m := range s.ExtraMounts {
		mp := fmt.Sprintf("%s.extraMounts[%d]", path, i)
		if m.Target == "" {
			continue
		}
		if !strings.HasPrefix(m.Target, "/") {
			v.errorAt(mp, "target %q must be an absolute path in the sandbox", m.Target)
			continue
		}
		t := posixpath.Clean(m.Target)
		for _, r := range reservedTargets {
			if t == "/" || t == r || strings.HasPrefix(t, r+"/") || strings.HasPrefix(r, t+"/") {
				v.errorAt(mp, "target %q overlaps %s, which beige manages", m.Target, r)
				break
			}
		}
	}
	switch n := s.Network; {
	case n == "host" || strings.HasPrefix(n, "container:"):
		v.errorAt(path+".network", "network %q shares a network namespace with the host or another container; use \"proxy\", \"none\" or \"open\"", n)
	case n != "" && !networkRE.MatchString(n):
		v.errorAt(path+".network", "want \"proxy\", \"none\", \"open\" or a Docker network name, got %q", n)
	}
	v.egress(path+".egress", s.Egress)
	for _, k := range sortedKeys(s.ExtraEnv) {
		kp := joinPath(path+".extraEnv", k)
		switch {
		case !envNameRE.MatchString(k):
			v.errorAt(kp, "invalid environment variable name %q", k)
		case k == "PATH" || strings.HasPrefix(k, "BEIGE_"):
			v.errorAt(kp, "%s is set by beige and cannot be overridden", k)
		case (s.Network == "" || s.Network == NetworkProxy) && slices.Contains(proxyEnv, k):
			v.errorAt(kp, "%s is set by beige in the \"proxy\" network mode (the sandbox's egress proxy)", k)
		}
	}
}

// egress checks an egress policy (sandbox.egress, plugins.<p>.egress) at
// path.
func (v *validator) egress(path string, e Egress) {
	for i, r := range e.Allow {
		if _, err := egress.ParseRule(r); err != nil {
			v.errorAt(fmt.Sprintf("%s.allow[%d]", path, i), "%v", err)
		}
	}
	for i, r := range e.Deny {
		if _, err := egress.ParseRule(r); err != nil {
			v.errorAt(fmt.Sprintf("%s.deny[%d]", path, i), "%v", err)
		}
	}
	for i, c := range e.Credentials {
		cp := fmt.Sprintf("%s.credentials[%d]", path, i)
		if _, err := egress.CredentialHost(c.Host); err != nil {
			v.errorAt(cp+".host", "%v", err)
		}
		if !headerNameRE.MatchString(c.Header) || strings.EqualFold(c.Header, "Host") {
			v.errorAt(cp+".header", "want an HTTP header name other than Host, got %q", c.Header)
		}
		if c.Value == "" || strings.ContainsAny(c.Value, "\r\n\x00") {
			v.errorAt(cp+".value", "want a non-empty value without line breaks")
		}
	}
}

func (v *validator) gateway() {
	g := v.cfg.Gateway
	if g.Port < 1 || g.Port > 65535 {
		v.errorAt("gateway.port", "want a port between 1 and 65535, got %d", g.Port)
	}
	if g.Log.MaxSizeBytes < 1024 {
		v.errorAt("gateway.log.maxSizeBytes", "want at least 1024 bytes, got %d", g.Log.MaxSizeBytes)
	}
	if g.Log.MaxFiles < 1 {
		v.errorAt("gateway.log.maxFiles", "want at least 1, got %d", g.Log.MaxFiles)
	}
	if g.Audit.MaxSizeBytes != 0 && g.Audit.MaxSizeBytes < 1024 {
		v.errorAt("gateway.audit.maxSizeBytes", "want at least 1024 bytes, got %d", g.Audit.MaxSizeBytes)
	}
	if g.Audit.MaxFiles < 0 {
		v.errorAt("gateway.audit.maxFiles", "want 0 (keep every file) or more, got %d", g.Audit.MaxFiles)
	}
	if g.HTTP.MaxConnections < 8 {
		v.errorAt("gateway.http.maxConnections", "want at least 8, got %d", g.HTTP.MaxConnections)
	}
	if l := g.Metrics.Listen; l != "" {
		host, port, err := net.SplitHostPort(l)
		n, perr := strconv.Atoi(port)
		switch {
		case err != nil:
			v.errorAt("gateway.metrics.listen", "want host:port (e.g. \"127.0.0.1:9464\"), got %q", l)
		case perr != nil || n < 1 || n > 65535:
			v.errorAt("gateway.metrics.listen", "want a port between 1 and 65535, got %q", port)
		case n == g.Port && (host == g.Host || host == "" || g.Host == "" || isUnspecified(host) || isUnspecified(g.Host)):
			v.errorAt("gateway.metrics.listen", "%q is the API's own address; /metrics is served there already (leave gateway.metrics.listen out)", l)
		}
	}
}

func isUnspecified(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}
