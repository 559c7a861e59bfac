package tui

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/beige-dev/beige/internal/client"
	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/proto/llmproto"
)

// helpText lists the commands. They are handled here and never sent to
// the model.
const helpText = `Commands (handled here, never sent to the model):
  /new               start a fresh session
  /sessions          list this agent's terminal sessions
  /resume <n|id>     switch to a session (its number in /sessions, or its id)
  /agent [name]      switch to another agent (without a name: list them)
  /model [n|id]      list the agent's models, or choose the one asked first
  /verbose on|off    announce each tool call before it runs (/v on|off)
  /help              this help
  /quit              quit (also Ctrl-D)
Keys: Enter sends · Ctrl-J or Alt-Enter new line · PgUp/PgDn scroll the reply
      Ctrl-C (or Esc) aborts the running turn; Ctrl-C twice, or when idle, quits
A message that starts with / is sent to the model when it starts with //.`

// commandMsg is the result of a command that ran in the background: text
// to show, and the state it changes.
type commandMsg struct {
	text   string
	err    error
	agent  *agentState           // switch to this agent
	models []llmproto.AgentModel // fresh list of the agent's models
	model  *llm.Model            // choose this model
	key    string                // switch to this session
	// used says the new session was started already (session-disposed
	// is then due when leaving it).
	used bool
}

// commandTimeout bounds a command's calls to the gateway.
const commandTimeout = 30 * time.Second

// command runs a /command typed in the input.
func (m *model) command(line string) tea.Cmd {
	fields := strings.Fields(line)
	name, args := strings.ToLower(fields[0]), fields[1:]
	width := m.width
	echo := m.print(func() string { return dimLine("› "+line, width) })
	say := func(s string) tea.Cmd { return tea.Batch(echo, m.print(func() string { return infoLine(s, width) })) }
	fail := func(format string, a ...any) tea.Cmd {
		msg := fmt.Sprintf(format, a...)
		return tea.Batch(echo, m.print(func() string { return errorLine(msg, width) }))
	}
	switching := func() bool { return m.running }

	switch name {
	case "/help", "/?":
		return say(helpText)
	case "/quit", "/exit", "/q":
		return tea.Batch(echo, m.quit())
	case "/verbose", "/v":
		if len(args) == 0 {
			return say(fmt.Sprintf("verbose is %s (/verbose on|off)", onOff(m.verbose)))
		}
		switch strings.ToLower(args[0]) {
		case "on", "true", "1":
			m.verbose = true
			return say("verbose on: each tool call is announced above as it starts")
		case "off", "false", "0":
			m.verbose = false
			return say("verbose off")
		}
		return fail("usage: %s on|off", name)
	case "/new":
		if switching() {
			return fail("a turn is running: wait for it, or Ctrl-C to abort it")
		}
		return tea.Batch(echo, m.newSession())
	case "/sessions":
		return tea.Batch(echo, m.listSessions())
	case "/resume":
		if len(args) != 1 {
			return fail("usage: /resume <n|id> (see /sessions)")
		}
		if switching() {
			return fail("a turn is running: wait for it, or Ctrl-C to abort it")
		}
		return tea.Batch(echo, m.resume(args[0]))
	case "/agent":
		if len(args) == 0 {
			return tea.Batch(echo, m.listAgents())
		}
		if switching() {
			return fail("a turn is running: wait for it, or Ctrl-C to abort it")
		}
		return tea.Batch(echo, m.switchAgent(args[0]))
	case "/model", "/models":
		if len(args) == 0 {
			return tea.Batch(echo, m.listModels())
		}
		if switching() {
			return fail("a turn is running: wait for it, or Ctrl-C to abort it")
		}
		return tea.Batch(echo, m.chooseModel(args[0]))
	}
	return fail("unknown command %s (see /help); to send a message that starts with /, begin it with //", fields[0])
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func (m *model) onCommandResult(msg commandMsg) tea.Cmd {
	width := m.width
	if msg.err != nil {
		text := turnError(msg.err)
		return m.print(func() string { return errorLine(text, width) })
	}
	if msg.agent != nil {
		m.ag = *msg.agent
		m.input.Placeholder = "Message " + m.ag.name() + "… (/help for commands)"
	}
	if msg.models != nil {
		m.ag.models = msg.models
	}
	if msg.model != nil {
		m.ag.model = *msg.model
	}
	if msg.key != "" {
		m.key = msg.key
		m.sessionUse = msg.used
	}
	if msg.text == "" {
		return nil
	}
	text := msg.text
	return m.print(func() string { return infoLine(text, width) })
}

// leave fires session-disposed for the session being left, if this
// process used it. It runs in a command.
func (e *env) leave(ag, key string, used bool) {
	if used {
		e.back.sessionHook(context.Background(), ag, client.HookSessionDisposed, key)
	}
}

// newSessionKey names a new terminal session of an agent.
func newSessionKey(agentName string, now time.Time) string {
	return "tui:" + agentName + ":" + now.Format("20060102-150405")
}

func (m *model) newSession() tea.Cmd {
	e, st, old, used := m.env, m.ag, m.key, m.sessionUse
	key := newSessionKey(st.name(), e.now())
	if key == old {
		key += "-" + strconv.FormatInt(e.now().UnixMilli()%1000, 10)
	}
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(withAgent(context.Background(), st), commandTimeout)
		defer cancel()
		if err := e.mgr.NewSession(ctx, st.name(), key); err != nil {
			return commandMsg{err: err}
		}
		e.leave(st.name(), old, used)
		return commandMsg{key: key, used: true, text: "new session " + key}
	}
}

func (m *model) listSessions() tea.Cmd {
	e, st, current := m.env, m.ag, m.key
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(withAgent(context.Background(), st), commandTimeout)
		defer cancel()
		list, err := e.mgr.Sessions(ctx, st.name())
		if err != nil {
			return commandMsg{err: err}
		}
		return commandMsg{text: formatSessions(st.name(), current, list)}
	}
}

func formatSessions(agentName, current string, list []proto.SessionInfo) string {
	if len(list) == 0 {
		return fmt.Sprintf("no terminal sessions of %s yet: the first message starts %s", agentName, current)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Terminal sessions of %s, newest first (/resume <n|id>):", agentName)
	for i, s := range list {
		mark := " "
		if s.ID == current {
			mark = "*"
		}
		fmt.Fprintf(&b, "\n %s %2d  %-28s updated %s", mark, i+1, shortKey(agentName, s.ID), localTime(s.UpdatedAt))
	}
	return b.String()
}

// shortKey drops the tui:<agent>: prefix of a session key.
func shortKey(agentName, key string) string {
	return strings.TrimPrefix(key, "tui:"+agentName+":")
}

func localTime(iso string) string {
	t, err := time.Parse(time.RFC3339Nano, iso)
	if err != nil {
		return iso
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func (m *model) resume(arg string) tea.Cmd {
	e, st, old, used := m.env, m.ag, m.key, m.sessionUse
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(withAgent(context.Background(), st), commandTimeout)
		defer cancel()
		list, err := e.mgr.Sessions(ctx, st.name())
		if err != nil {
			return commandMsg{err: err}
		}
		i := findSession(st.name(), arg, list)
		if i < 0 {
			return commandMsg{err: fmt.Errorf("no session %q of %s (see /sessions)", arg, st.name())}
		}
		key := list[i].ID
		if key != old {
			e.leave(st.name(), old, used)
		}
		return commandMsg{key: key, used: key == old && used, text: "resumed session " + key + " (the model sees its history)"}
	}
}

// findSession finds arg — a number of the list, a session key, or a key
// without its tui:<agent>: prefix — in list.
func findSession(agentName, arg string, list []proto.SessionInfo) int {
	if n, err := strconv.Atoi(arg); err == nil && n >= 1 && n <= len(list) {
		return n - 1
	}
	for _, k := range []string{arg, "tui:" + agentName + ":" + arg} {
		if i := slices.IndexFunc(list, func(s proto.SessionInfo) bool { return s.ID == k }); i >= 0 {
			return i
		}
	}
	return -1
}

func (m *model) listAgents() tea.Cmd {
	e, current := m.env, m.ag.name()
	return func() tea.Msg {
		list, err := e.back.agents(context.Background())
		if err != nil {
			return commandMsg{err: err}
		}
		var b strings.Builder
		b.WriteString("Agents of the gateway (/agent <name> switches):")
		for _, a := range list {
			mark := " "
			if a.Name == current {
				mark = "*"
			}
			fmt.Fprintf(&b, "\n %s %-20s %s/%s", mark, a.Name, a.Model.Provider, a.Model.Model)
		}
		return commandMsg{text: b.String()}
	}
}

func (m *model) switchAgent(name string) tea.Cmd {
	e, old, oldKey, used := m.env, m.ag.name(), m.key, m.sessionUse
	return func() tea.Msg {
		st, err := e.back.load(context.Background(), name)
		if err != nil {
			return commandMsg{err: err}
		}
		key := defaultKey(name)
		if key != oldKey {
			e.leave(old, oldKey, used)
		}
		return commandMsg{agent: &st, key: key, used: key == oldKey && used,
			text: fmt.Sprintf("agent %s · model %s · session %s", name, st.modelName(), key)}
	}
}

func (m *model) listModels() tea.Cmd {
	e, st := m.env, m.ag
	return func() tea.Msg {
		ctx, cancel := client.WithTimeout(context.Background())
		defer cancel()
		models, err := e.back.c.Models(ctx, st.name())
		if err != nil {
			return commandMsg{err: err}
		}
		return commandMsg{models: models, text: formatModels(st.name(), st.model, models)}
	}
}

func formatModels(agentName string, current llm.Model, models []llmproto.AgentModel) string {
	if len(models) == 0 {
		return "the gateway lists no models for " + agentName
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Models of %s, in the order the gateway falls back (/model <n|id> chooses the first):", agentName)
	for i, mo := range models {
		mark := " "
		if mo.Provider == current.Provider && mo.ID == current.ID {
			mark = "*"
		}
		var details []string
		if mo.Name != "" && mo.Name != mo.ID {
			details = append(details, mo.Name)
		}
		if mo.ContextWindow > 0 {
			details = append(details, fmt.Sprintf("%dk context", mo.ContextWindow/1000))
		}
		if mo.ThinkingLevel != "" {
			details = append(details, "thinking "+mo.ThinkingLevel)
		}
		fmt.Fprintf(&b, "\n %s %2d  %s/%s", mark, i+1, mo.Provider, mo.ID)
		if len(details) > 0 {
			fmt.Fprintf(&b, "  (%s)", strings.Join(details, ", "))
		}
	}
	return b.String()
}

func (m *model) chooseModel(arg string) tea.Cmd {
	e, st := m.env, m.ag
	return func() tea.Msg {
		ctx, cancel := client.WithTimeout(context.Background())
		defer cancel()
		models, err := e.back.c.Models(ctx, st.name())
		if err != nil {
			return commandMsg{err: err}
		}
		i := -1
		if n, err := strconv.Atoi(arg); err == nil && n >= 1 && n <= len(models) {
			i = n - 1
		}
		for j, mo := range models {
			if i < 0 && (arg == mo.Provider+"/"+mo.ID || arg == mo.ID) {
				i = j
			}
		}
		if i < 0 {
			return commandMsg{models: models, err: fmt.Errorf("no model %q of %s (see /model)", arg, st.name())}
		}
		chosen := models[i].Model
		return commandMsg{models: models, model: &chosen, text: fmt.Sprintf("model %s/%s is now asked first; the gateway falls back to the others", chosen.Provider, chosen.ID)}
	}
}
