package telegram

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/go-telegram/bot/models"
)

// commandTimeout bounds one command (/compact asks the model for a
// summary, which can take a while).
const commandTimeout = 10 * time.Minute

// commands are the commands handled by the channel, never sent to the
// model, in menu order; aliases maps the short forms.
var commands = []struct{ name, args, help string }{
	{"start", "", "Welcome and the list of commands"},
	{"new", "", "Start a fresh session"},
	{"stop", "", "Stop the answer being written"},
	{"status", "", "Show the session and its settings"},
	{"verbose", "on|off", "Show each tool call before it runs (/v)"},
	{"streaming", "on|off", "Show the answer while it is written (/s)"},
	{"model", "[provider/model|default]", "List the models, or pin one"},
	{"compact", "", "Summarise the older turns of the session"},
	{"agent", "", "Show which agent answers here"},
}

var aliases = map[string]string{"help": "start", "v": "verbose", "s": "streaming"}

// menu is the command list registered with setMyCommands.
func menu() []models.BotCommand {
	out := make([]models.BotCommand, 0, len(commands))
	for _, c := range commands {
		out = append(out, models.BotCommand{Command: c.name, Description: c.help})
	}
	return out
}

type commandKind int

const (
	notCommand  commandKind = iota // a message for the agent
	isCommand                      // one of ours
	forOtherBot                    // /cmd@otherbot: not for us, ignored
)

var commandNameRE = regexp.MustCompile(`^[A-Za-z0-9_]{1,32}$`)

// parseCommand recognises "/name[@bot] args". An unknown /name is a
// message for the agent; "/name@other_bot" is ignored when the bot's own
// name (botName) is known.
func parseCommand(text, botName string) (name, args string, kind commandKind) {
	if !strings.HasPrefix(text, "/") {
		return "", "", notCommand
	}
	head, rest := text[1:], ""
	if i := strings.IndexFunc(head, unicode.IsSpace); i >= 0 {
		head, rest = head[:i], strings.TrimSpace(head[i:])
	}
	name, at, hasAt := strings.Cut(head, "@")
	if !commandNameRE.MatchString(name) {
		return "", "", notCommand
	}
	if hasAt && botName != "" && !strings.EqualFold(at, botName) {
		return "", "", forOtherBot
	}
	name = strings.ToLower(name)
	if a, ok := aliases[name]; ok {
		name = a
	}
	for _, c := range commands {
		if c.name == name {
			return name, rest, isCommand
		}
	}
	return "", "", notCommand
}

// parseOnOff reads on/off, true/false, yes/no, 1/0.
func parseOnOff(s string) (value, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "on", "true", "yes", "1", "enable", "enabled":
		return true, true
	case "off", "false", "no", "0", "disable", "disabled":
		return false, true
	}
	return false, false
}

// command runs one of the queued commands (all but /stop) and returns the
// reply.
func (r *run) command(ctx context.Context, t target, name, args string) string {
	switch name {
	case "start":
		return r.cmdStart(t)
	case "new":
		if err := r.pc.NewSession(ctx, t.agent, t.key); err != nil {
			return r.commandError(t, "start a new session", err)
		}
		return "🆕 New session started."
	case "status":
		return r.cmdStatus(ctx, t)
	case "verbose":
		return r.cmdToggle(t, "verbose", args)
	case "streaming":
		return r.cmdToggle(t, "streaming", args)
	case "model":
		return r.cmdModel(ctx, t, args)
	case "compact":
		stop := r.typing(t)
		err := r.pc.Compact(ctx, t.agent, t.key)
		stop()
		if err != nil {
			return r.commandError(t, "compact the session", err)
		}
		return "🗜 Session compacted."
	case "agent":
		return fmt.Sprintf("🤖 This chat talks to the agent %q.", t.agent)
	}
	return ""
}

func (r *run) cmdStart(t target) string {
	var b strings.Builder
	fmt.Fprintf(&b, "👋 Hi! Messages you send here go to the agent %q; this chat is one session.\n\nCommands:\n", t.agent)
	for _, c := range commands {
		b.WriteString("/" + c.name)
		if c.args != "" {
			b.WriteString(" " + c.args)
		}
		b.WriteString(" — " + c.help + "\n")
	}
	return b.String()
}

// cmdStop aborts the running prompt of the session and drops the messages
// waiting behind it.
func (r *run) cmdStop(t target) string {
	r.mu.Lock()
	tu := r.turns[t.key]
	r.mu.Unlock()
	if tu != nil {
		tu.stopped.Store(true)
	}
	aborted := r.pc.Abort(t.agent, t.key)
	if !aborted && tu != nil {
		tu.stopped.Store(false)
	}
	dropped := r.dropPrompts(t.key)
	switch {
	case aborted && dropped > 0:
		return fmt.Sprintf("⏹ Stopped (and dropped %d waiting message%s).", dropped, plural(dropped))
	case aborted:
		return "⏹ Stopped."
	case dropped > 0:
		return fmt.Sprintf("⏹ Dropped %d waiting message%s.", dropped, plural(dropped))
	}
	return "Nothing to stop."
}

func (r *run) cmdStatus(ctx context.Context, t target) string {
	st, err := r.pc.Status(ctx, t.agent, t.key)
	if err != nil {
		return r.commandError(t, "read the session's status", err)
	}
	settings := r.pc.Settings(t.key, r.cfg.Defaults.settings())
	var b strings.Builder
	fmt.Fprintf(&b, "📊 Session %s\n", t.key)
	fmt.Fprintf(&b, "Agent: %s\n", t.agent)
	model := st.Model
	if model == "" {
		model = "(agent default)"
	}
	if st.Pinned {
		model += " (pinned)"
	}
	fmt.Fprintf(&b, "Model: %s\n", model)
	fmt.Fprintf(&b, "Running: %s\n", yesNo(st.Running))
	fmt.Fprintf(&b, "Verbose: %s\n", onOff(boolSetting(settings, "verbose", false)))
	fmt.Fprintf(&b, "Streaming: %s\n", onOff(boolSetting(settings, "streaming", true)))
	if st.CreatedAt != "" {
		fmt.Fprintf(&b, "Created: %s\n", st.CreatedAt)
	}
	if st.UpdatedAt != "" {
		fmt.Fprintf(&b, "Updated: %s\n", st.UpdatedAt)
	}
	if st.File == "" {
		b.WriteString("No messages yet.\n")
	}
	return b.String()
}

// cmdToggle sets (or, without an argument, flips) a boolean setting.
func (r *run) cmdToggle(t target, name, args string) string {
	var value bool
	if args == "" {
		value = !boolSetting(r.pc.Settings(t.key, r.cfg.Defaults.settings()), name, name == "streaming")
	} else {
		v, ok := parseOnOff(args)
		if !ok {
			return fmt.Sprintf("Usage: /%s on|off", name)
		}
		value = v
	}
	if err := r.pc.SetSetting(t.key, name, value); err != nil {
		return "⚠️ Could not change the setting: " + r.redactSecrets(clip(err.Error(), 500))
	}
	switch {
	case name == "verbose" && value:
		return "🔧 Verbose mode on: each tool call is shown before it runs."
	case name == "verbose":
		return "Verbose mode off."
	case value:
		return "📝 Streaming on: answers show while they are written."
	default:
		return "Streaming off: answers arrive when they are complete."
	}
}

// cmdModel lists the agent's models, or pins one ("/model 2" picks from the
// list), or unpins ("/model default").
func (r *run) cmdModel(ctx context.Context, t target, args string) string {
	list := r.pc.Models(t.agent)
	switch strings.ToLower(args) {
	case "":
		st, err := r.pc.Status(ctx, t.agent, t.key)
		if err != nil {
			st.Model = ""
		}
		var b strings.Builder
		b.WriteString("🧠 Models of " + t.agent + ":\n")
		for i, m := range list {
			mark := ""
			if m == st.Model {
				mark = " ← current"
				if st.Pinned {
					mark += " (pinned)"
				}
			}
			fmt.Fprintf(&b, "%d. %s%s\n", i+1, m, mark)
		}
		if len(list) == 0 {
			b.WriteString("(none)\n")
		}
		b.WriteString("\n/model provider/model (or its number) pins one; /model default returns to the agent's order.")
		return b.String()
	case "default", "auto", "reset", "unpin":
		if err := r.pc.SetModel(ctx, t.agent, t.key, ""); err != nil {
			return "⚠️ " + r.redactSecrets(clip(err.Error(), 500))
		}
		return "🧠 Model unpinned: the agent's own order applies."
	}
	model := args
	if n, err := strconv.Atoi(args); err == nil {
		if n < 1 || n > len(list) {
			return fmt.Sprintf("No model number %d: /model lists them.", n)
		}
		model = list[n-1]
	}
	if err := r.pc.SetModel(ctx, t.agent, t.key, model); err != nil {
		return "⚠️ " + r.redactSecrets(clip(err.Error(), 500))
	}
	return "📌 Model pinned: " + model
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// commandError is the reply of a command that failed: a short, safe text
// (the compaction's model error, a hook's output can hold anything); the
// detail goes to the log, secrets redacted.
func (r *run) commandError(t target, what string, err error) string {
	r.log.Warn("telegram: command failed", "what", what, "agent", t.agent, "session", t.key, "error", r.redactSecrets(err.Error()))
	return "⚠️ Could not " + what + ": " + userError(err)
}
