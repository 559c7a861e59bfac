package plugin

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/beige-dev/beige/internal/proto"
)

// Tool is a tool a plugin provides. Sandboxes call it through the launcher
// /tools/bin/<Name>; it runs on the gateway host.
type Tool struct {
	// Name is the command's name in the sandbox: the plugin's name, or
	// "<plugin>.<something>", or a name the plugin.json lists under
	// provides.tools. See proto.ValidToolName for the characters allowed.
	Name        string
	Description string
	// Commands lists the sub-commands, for the agent's tool list.
	Commands []string
	Handler  Handler
}

// Handler runs one call. It returns what the tool printed and its exit
// code; an error means the tool could not run or was stopped (a timeout),
// and its text is shown to the agent after Result.Stderr. A handler must
// return soon after ctx ends (the client left, or the gateway is stopping).
type Handler func(ctx context.Context, call *Call) (Result, error)

// Call is one tool call, as a handler sees it.
type Call struct {
	Agent string // the agent, known from its socket
	Tool  string
	Args  []string
	// Workspace is the host folder of the agent's /workspace, with symbolic
	// links resolved; Dir is the call's working folder on the host, inside
	// Workspace (the caller's folder in the sandbox, or Workspace when the
	// caller was outside /workspace).
	Workspace string
	Dir       string
	// Config is the plugin's config for this agent: defaultConfig <
	// plugins.<p>.config < agents.<a>.pluginConfigs.<p>. It is the call's
	// own copy.
	Config  map[string]any
	Session proto.SessionContext
	// Freeze, when not nil, stops every process of the agent's sandbox
	// until the returned thaw is called. A tool that reads files the agent
	// controls and then acts on them (git) freezes the sandbox around the
	// check and the action, so that the files cannot change in between.
	Freeze func(ctx context.Context) (thaw func(), err error)
}

// Result is what a tool did.
type Result struct {
	Output   string // stdout, returned to the sandbox
	Stderr   string // shown to the agent on stderr
	ExitCode int
	// OutputBytes is the true size of the output when Output was cut; 0
	// means len(Output).
	OutputBytes int64
}

// Skill is a folder of knowledge a plugin provides, mounted read-only at
// /skills/<Name> for the agents that use one of the plugin's tools.
type Skill struct {
	Name        string
	Description string
	Path        string // host folder; relative paths are relative to the plugin's folder
}

// Channel is a way to reach users (Telegram, Slack, Discord, ...), run in
// the gateway process. A plugin registers it during Register; once the
// gateway serves, Start is called with the PluginContext through which the
// channel prompts agents. Start returns when the channel's background work
// (polling, a websocket) is running; that work lasts until ctx ends, which
// happens when the gateway stops or restarts (before the plugin's Stop).
type Channel interface {
	// Name identifies the channel; it is the first part of its session keys
	// ("telegram" for telegram:<chat>[:<thread>]).
	Name() string
	// Start starts the channel's background work.
	Start(ctx context.Context, pc PluginContext) error
	// SendMessage sends text to a chat (and thread, when not empty), for
	// notifications from other plugins (a modelSwitched hook, say). opts
	// say how the channel reads the text; a channel that cannot parse it so
	// (or whose service refuses the markup) still delivers the text, as
	// plain text. Callers check opts with SendOptions.Validate.
	SendMessage(ctx context.Context, chatID, threadID, text string, opts SendOptions) error
	// SupportsMessaging reports whether SendMessage can be used.
	SupportsMessaging() bool
}

// SendOptions are how a channel sends a message: the original's
// SendMessageOptions.
type SendOptions struct {
	// ParseMode is the markup the text is written in: "" for plain text
	// (sent as it is), ParseModeMarkdown or ParseModeHTML, in the dialect
	// of the channel's service (Telegram's MarkdownV2 and HTML).
	ParseMode string
}

// The parse modes of SendOptions, as the original names them.
const (
	ParseModeMarkdown = "markdown"
	ParseModeHTML     = "html"
)

// Validate refuses a parse mode other than "", "markdown" and "html".
func (o SendOptions) Validate() error {
	switch o.ParseMode {
	case "", ParseModeMarkdown, ParseModeHTML:
		return nil
	}
	mode := o.ParseMode
	if len(mode) > 32 {
		mode = strings.ToValidUTF8(mode[:32], "") + "..."
	}
	return fmt.Errorf("invalid parseMode %q: want \"markdown\", \"html\" or none", mode)
}

// ChannelLookup is what a PluginContext may also offer: the gateway's
// channels by name (the built-in ones and those plugins registered), for a
// plugin that sends through another's channel (the original's
// ctx.getChannel).
type ChannelLookup interface {
	Channel(name string) (Channel, bool)
}

// Registrar is how a plugin declares what it provides, during Register.
type Registrar struct {
	h *Host
	p *loaded
}

// Tool registers a tool. Its name must belong to the plugin (see Tool.Name)
// and not be taken by another plugin.
func (r *Registrar) Tool(t Tool) error {
	if err := r.check(); err != nil {
		return err
	}
	switch {
	case t.Handler == nil:
		return fmt.Errorf("plugin %s: tool %q has no handler", r.p.name, t.Name)
	case !proto.ValidToolName(t.Name):
		return fmt.Errorf("plugin %s: invalid tool name %q (letters, digits, '.', '_', '-'; at most %d)", r.p.name, t.Name, proto.MaxToolName)
	case slices.Contains(coreTools, t.Name):
		return fmt.Errorf("plugin %s: tool %q is a core tool", r.p.name, t.Name)
	case !r.p.ownsToolName(t.Name):
		return fmt.Errorf("plugin %s: tool %q must be named %q or %q, or be listed in its plugin.json provides.tools", r.p.name, t.Name, r.p.name, r.p.name+".<name>")
	}
	if other, ok := r.h.tools[t.Name]; ok {
		return fmt.Errorf("plugin %s: tool %q is already provided by plugin %s", r.p.name, t.Name, other.plugin.name)
	}
	r.h.tools[t.Name] = &registeredTool{Tool: t, plugin: r.p}
	r.p.tools = append(r.p.tools, t.Name)
	return nil
}

// Hook registers fn for the hook called name; fn must be the hook's
// function type (PreToolExecHook for HookPreToolExec, and so on).
func (r *Registrar) Hook(name HookName, fn any) error {
	if err := r.check(); err != nil {
		return err
	}
	if err := r.h.hooks.add(r.p.name, name, fn); err != nil {
		return fmt.Errorf("plugin %s: %w", r.p.name, err)
	}
	return nil
}

// Skill registers a skill folder.
func (r *Registrar) Skill(s Skill) error {
	if err := r.check(); err != nil {
		return err
	}
	if !proto.ValidToolName(s.Name) {
		return fmt.Errorf("plugin %s: invalid skill name %q", r.p.name, s.Name)
	}
	if s.Path == "" {
		return fmt.Errorf("plugin %s: skill %q has no path", r.p.name, s.Name)
	}
	if !filepath.IsAbs(s.Path) {
		s.Path = filepath.Join(r.p.dir, s.Path)
	}
	if _, ok := r.h.cfg.Skills[s.Name]; ok {
		return fmt.Errorf("plugin %s: skill %q is already configured under skills", r.p.name, s.Name)
	}
	for _, p := range r.h.plugins {
		for _, o := range p.skills {
			if o.Name == s.Name {
				return fmt.Errorf("plugin %s: skill %q is already provided by plugin %s", r.p.name, s.Name, p.name)
			}
		}
	}
	r.p.skills = append(r.p.skills, s)
	return nil
}

// Channel registers a channel (see the note on Channel).
func (r *Registrar) Channel(c Channel) error {
	if err := r.check(); err != nil {
		return err
	}
	if c == nil || c.Name() == "" {
		return fmt.Errorf("plugin %s: channel without a name", r.p.name)
	}
	if _, ok := r.h.channels[c.Name()]; ok {
		return fmt.Errorf("plugin %s: channel %q is already registered", r.p.name, c.Name())
	}
	r.h.channels[c.Name()] = c
	return nil
}

var errRegistrarDone = errors.New("plugin: the Registrar is only valid during Register")

func (r *Registrar) check() error {
	if r == nil || r.h == nil || r.p == nil || r.p.registered {
		return errRegistrarDone
	}
	return nil
}

// ownsToolName reports whether a plugin may register a tool called name.
func (p *loaded) ownsToolName(name string) bool {
	if name == p.name || strings.HasPrefix(name, p.name+".") {
		return true
	}
	return p.manifest != nil && slices.Contains(p.manifest.Provides.Tools, name)
}
