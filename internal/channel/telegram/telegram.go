// Package telegram is the Telegram channel, registered through the plugin
// API as the built-in channel plugin telegram (see internal/plugin/builtin):
// a Telegram bot, reached by long polling, through which allowed users talk
// to agents. Each chat, and each forum topic, is one session
// (telegram:<chat>[:<thread>]). Commands (/new, /stop, /verbose, /model ...)
// are handled here and never reach the model; answers stream into a message
// edited at most once a second, are cut into messages of at most 4,096
// characters, and are sent as MarkdownV2, or as plain text when Telegram
// refuses the formatting. README.md, which is also the plugin's
// documentation, says how to set it up.
package telegram

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/beige-dev/beige/internal/plugin"
	"github.com/go-telegram/bot/models"
)

//go:embed plugin.json README.md SKILL.md
var docs embed.FS

// Name is the plugin's name and, unless it is configured under another
// key, its channel's: the first part of its session keys.
const Name = "telegram"

func init() {
	plugin.Register(plugin.Builtin{Name: Name, Docs: docs, New: New, Warnings: configWarnings})
}

// Plugin is the telegram plugin. It is its own channel: Register registers
// it, the gateway Starts it, and Stop (or the end of Start's context) ends
// the polling.
type Plugin struct {
	name    string
	cfg     *Config
	log     *slog.Logger
	dataDir string // $BEIGE_HOME/data/<name>: the durable queue; "" keeps it in memory

	mu  sync.Mutex
	cur *run // the running bot, nil before Start
}

var (
	_ plugin.Plugin  = (*Plugin)(nil)
	_ plugin.Stopper = (*Plugin)(nil)
	_ plugin.Channel = (*Plugin)(nil)
)

// New checks the config (token, allowedUsers, agentMapping.default) and
// creates the plugin. It does not reach Telegram: Start does.
func New(env plugin.Env) (plugin.Plugin, error) {
	name := env.Name
	if name == "" {
		name = Name
	}
	cfg, err := ParseConfig(name, env.Config)
	if err != nil {
		return nil, err
	}
	log := env.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Plugin{name: name, cfg: cfg, log: log, dataDir: env.DataDir}, nil
}

// configWarnings is the plugin's Builtin.Warnings: those of a config that
// parses (a config that does not is reported when the gateway starts).
func configWarnings(name string, raw map[string]any) []string {
	cfg, err := ParseConfig(name, raw)
	if err != nil {
		return nil
	}
	return cfg.Warnings(name)
}

// Register registers the channel.
func (p *Plugin) Register(r *plugin.Registrar) error {
	return r.Channel(p)
}

// Name is the channel's name: the plugin's key in config.json5, "telegram".
func (p *Plugin) Name() string { return p.name }

// errNotStarted is returned by SendMessage before Start.
var errNotStarted = errors.New("telegram: the channel is not running")

// Start checks that the agents of agentMapping exist, asks Telegram who the
// bot is (a refused token is an error), replaces the bot's command menu and
// starts long polling, which lasts until ctx ends or Stop is called.
func (p *Plugin) Start(ctx context.Context, pc plugin.PluginContext) error {
	if pc == nil {
		return errors.New("telegram: Start needs a PluginContext")
	}
	if err := p.cfg.checkAgents(p.name, pc.Agents()); err != nil {
		return err
	}
	for _, w := range p.cfg.Warnings(p.name) {
		p.log.Warn("telegram: " + w)
	}
	p.mu.Lock()
	if p.cur != nil && !p.cur.finished() {
		p.mu.Unlock()
		return errors.New("telegram: already started")
	}
	r, err := newRun(ctx, p, pc)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	p.cur = r
	p.mu.Unlock()
	if err := r.start(); err != nil {
		r.stop(context.Background())
		return err
	}
	return nil
}

// Stop ends the polling and waits, as long as ctx allows, for the chats'
// work to end (running prompts are cancelled). It is safe to call when
// Start was never called or failed.
func (p *Plugin) Stop(ctx context.Context) error {
	p.mu.Lock()
	r := p.cur
	p.mu.Unlock()
	if r == nil {
		return nil
	}
	return r.stop(ctx)
}

// SendMessage sends text to a chat, and forum topic when threadID is not
// empty, as the toolkit's telegram channel does: without parse mode as
// plain text; with "markdown" as Telegram MarkdownV2 and with "html" as
// Telegram HTML, the text being written in that markup already. A piece
// whose markup Telegram refuses is sent again as plain text, so the
// message still arrives (its markup showing).
func (p *Plugin) SendMessage(ctx context.Context, chatID, threadID, text string, opts plugin.SendOptions) error {
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("telegram: %w", err)
	}
	p.mu.Lock()
	r := p.cur
	p.mu.Unlock()
	if r == nil || r.finished() {
		return errNotStarted
	}
	t := target{chat: chatID}
	if id, err := strconv.ParseInt(chatID, 10, 64); err == nil {
		t.chatID = id
	} else if chatID == "" {
		return errors.New("telegram: SendMessage needs a chat id")
	}
	if threadID != "" {
		n, err := strconv.Atoi(threadID)
		if err != nil || n <= 0 {
			return fmt.Errorf("telegram: thread id %q is not a number", threadID)
		}
		t.threadID = n
	}
	var mode models.ParseMode
	switch opts.ParseMode {
	case plugin.ParseModeMarkdown:
		mode = models.ParseModeMarkdown
	case plugin.ParseModeHTML:
		mode = models.ParseModeHTML
	}
	return r.sendMarkup(ctx, t, text, mode)
}

// SupportsMessaging reports whether SendMessage can be used: once started.
func (p *Plugin) SupportsMessaging() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur != nil && !p.cur.finished()
}
