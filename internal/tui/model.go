package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/spinner"
	"charm.land/bubbles/v2/textarea"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/beige-dev/beige/internal/agent"
	"github.com/beige-dev/beige/internal/client"
	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto"
)

// env is what the model shares with the commands it starts. It is set up
// once, before the program runs, and not changed after.
type env struct {
	mgr  *agent.Manager
	back *backend
	md   *markdown
	// send delivers a message to the program (Program.Send): the prompt
	// goroutine reports its events with it.
	send func(tea.Msg)
	// println prints above the UI; nil means through send (tea.Println).
	println func(string)
	// now is the clock (tests may fix it).
	now func() time.Time
}

// The messages of a prompt, tagged with its turn so that late ones of an
// earlier turn are told apart.
type (
	streamMsg struct {
		turn int
		ev   llm.Event
	}
	replyMsg struct {
		turn int
		msg  *llm.AssistantMessage
	}
	toolStartMsg struct {
		turn int
		name string
		args json.RawMessage
	}
	toolEndMsg struct {
		turn int
		res  *llm.ToolResultMessage
	}
	turnDoneMsg struct {
		turn int
		res  *agent.Result
		err  error
	}
	// printedMsg says the last batch of lines was printed.
	printedMsg struct{}
)

// doubleCtrlC is how close two Ctrl-C must be to quit while a turn runs.
const doubleCtrlC = 2 * time.Second

// model is the root model: the whole UI state. Its methods run on the
// program's goroutine only; everything slow or that talks to the gateway
// runs in commands, and comes back as messages.
type model struct {
	env *env

	ag      agentState
	key     string // the session key
	verbose bool
	dark    bool
	width   int
	height  int

	input textarea.Model
	live  viewport.Model
	spin  spinner.Model

	turn       int // the latest turn's id
	running    bool
	aborting   bool
	liveText   strings.Builder   // the reply streaming now
	activity   string            // what the turn does now
	calls      map[string]string // tool call id -> summary, for the results
	sessionUse bool              // this process used the session (for session-disposed)

	out       printer
	lastCtrlC time.Time
	notice    string // a transient note in the status line
	welcomed  bool
	warning   string // shown after the welcome (an unhealthy gateway)
	quitting  bool

	pollTurn int                    // the turn whose approvals are polled (approval.go)
	approval *proto.ApprovalRequest // the call of this session that waits, or nil
}

// printer prints lines above the UI (Program.Println) in the order they
// were queued: one batch at a time, the next when the last was printed.
// Items are rendered (markdown) in the printing command, off the UI
// goroutine.
type printer struct {
	queue []func() string
	busy  bool
}

func newModel(e *env, ag agentState, verbose bool) *model {
	in := textarea.New()
	in.SetPromptFunc(2, func(info textarea.PromptInfo) string {
		if info.LineNumber == 0 {
			return "› "
		}
		return "  "
	})
	in.Placeholder = "Message " + ag.name() + "… (/help for commands)"
	in.ShowLineNumbers = false
	in.DynamicHeight = true
	in.MinHeight = 1
	in.MaxHeight = 8
	in.CharLimit = 0
	in.MaxWidth = 0
	in.KeyMap.InsertNewline = key.NewBinding(key.WithKeys("ctrl+j", "alt+enter", "shift+enter"))
	in.KeyMap.DeleteCharacterForward = key.NewBinding(key.WithKeys("delete"))
	in.KeyMap.Paste = key.NewBinding(key.WithDisabled()) // the terminal's own paste arrives as a paste
	st := textarea.DefaultDarkStyles()
	st.Focused.CursorLine = lipgloss.NewStyle()
	st.Focused.Base = lipgloss.NewStyle()
	in.SetStyles(st)
	in.Focus()
	m := &model{
		env:     e,
		ag:      ag,
		key:     defaultKey(ag.name()),
		verbose: verbose,
		dark:    true,
		width:   80,
		height:  24,
		input:   in,
		live:    viewport.New(),
		spin:    spinner.New(spinner.WithSpinner(spinner.MiniDot), spinner.WithStyle(styleRunning)),
		calls:   map[string]string{},
	}
	m.resize(80, 24)
	return m
}

// defaultKey is an agent's default terminal session.
func defaultKey(agentName string) string { return "tui:" + agentName + ":default" }

func (m *model) Init() tea.Cmd {
	return tea.RequestBackgroundColor
}

func (m *model) welcome() func() string {
	width, name, model, key, warning := m.width, m.ag.name(), m.ag.modelName(), m.key, m.warning
	return func() string {
		s := dimLine(fmt.Sprintf("beige tui · agent %s · model %s · session %s\n"+
			"Enter sends · Ctrl-J new line · Ctrl-C aborts the turn (twice quits) · Ctrl-D quits · /help", name, model, key), width)
		if warning != "" {
			s += "\n" + styleNotice.Render(wrap("⚠ "+warning, width))
		}
		return s
	}
}

func (m *model) resize(w, h int) {
	m.width, m.height = max(w, 20), max(h, 6)
	m.input.SetWidth(m.width)
	m.live.SetWidth(m.width)
	m.refreshLive()
}

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.resize(msg.Width, msg.Height)
		if !m.welcomed { // once the width is known
			m.welcomed = true
			return m, m.print(m.welcome())
		}
		return m, nil
	case tea.BackgroundColorMsg:
		m.dark = msg.IsDark()
		return m, nil
	case printedMsg:
		m.out.busy = false
		return m, m.flush()
	case tea.KeyPressMsg:
		return m, m.onKey(msg)
	case spinner.TickMsg:
		if !m.running {
			return m, nil
		}
		var cmd tea.Cmd
		m.spin, cmd = m.spin.Update(msg)
		m.refreshLive()
		return m, cmd
	case streamMsg:
		if msg.turn == m.turn {
			return m, m.onEvent(msg.ev)
		}
		return m, nil
	case replyMsg:
		if msg.turn == m.turn {
			return m, m.onReply(msg.msg)
		}
		return m, nil
	case toolStartMsg:
		if msg.turn == m.turn {
			return m, m.onToolStart(msg.name, msg.args)
		}
		return m, nil
	case toolEndMsg:
		if msg.turn == m.turn {
			return m, m.onToolEnd(msg.res)
		}
		return m, nil
	case turnDoneMsg:
		if msg.turn == m.turn {
			return m, m.onTurnDone(msg.res, msg.err)
		}
		return m, nil
	case commandMsg:
		return m, m.onCommandResult(msg)
	case approvalPollMsg:
		return m, m.onApprovalPoll(msg)
	case approvalsMsg:
		return m, m.onApprovals(msg)
	case approvalAnsweredMsg:
		return m, m.onApprovalAnswered(msg)
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	return m, cmd
}

// onKey handles a key press.
func (m *model) onKey(msg tea.KeyPressMsg) tea.Cmd {
	if cmd, ok := m.answerApproval(msg.String()); ok {
		return cmd
	}
	switch msg.String() {
	case "ctrl+c":
		return m.ctrlC()
	case "ctrl+d":
		return m.quit()
	case "esc":
		if m.running && !m.aborting {
			return m.abort()
		}
		return nil
	case "enter":
		return m.submit()
	case "pgup":
		m.live.PageUp()
		return nil
	case "pgdown":
		m.live.PageDown()
		return nil
	}
	m.notice = ""
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	return cmd
}

// ctrlC aborts the running turn; a second Ctrl-C soon after, or one when
// idle with an empty input, quits. When idle, a first one clears the input.
func (m *model) ctrlC() tea.Cmd {
	now := m.env.now()
	double := now.Sub(m.lastCtrlC) < doubleCtrlC
	m.lastCtrlC = now
	switch {
	case m.running && !(m.aborting && double):
		return m.abort()
	case m.running, double, m.input.Value() == "":
		return m.quit()
	}
	m.input.Reset()
	m.notice = "input cleared · Ctrl-C again to quit"
	return nil
}

// abort aborts the running turn.
func (m *model) abort() tea.Cmd {
	m.aborting = true
	m.activity = "aborting"
	m.notice = "aborting… (Ctrl-C again to quit)"
	m.refreshLive()
	mgr, name, key := m.env.mgr, m.ag.name(), m.key
	return func() tea.Msg { mgr.Abort(name, key); return nil }
}

// quit prints what is still queued and ends the program. A running turn
// is aborted by Run, which closes the Manager.
func (m *model) quit() tea.Cmd {
	m.quitting = true
	batch := m.out.queue
	m.out.queue = nil
	return m.printCmd(batch, tea.QuitMsg{})
}

// submit sends the input: a /command is handled here, anything else is a
// prompt. "//" starts a message that begins with a slash.
func (m *model) submit() tea.Cmd {
	text := strings.TrimSpace(m.input.Value())
	if text == "" {
		return nil
	}
	if strings.HasPrefix(text, "/") && !strings.HasPrefix(text, "//") {
		m.input.Reset()
		m.notice = ""
		return m.command(text)
	}
	if m.running {
		m.notice = "a turn is running: wait for it, or Ctrl-C to abort it"
		return nil
	}
	m.input.Reset()
	m.notice = ""
	return m.startTurn(strings.TrimPrefix(text, "/"))
}

// startTurn runs a prompt in a goroutine (the command's); its events come
// back through env.send.
func (m *model) startTurn(text string) tea.Cmd {
	m.turn++
	id := m.turn
	m.running, m.aborting = true, false
	m.liveText.Reset()
	m.activity = "waiting for the model"
	m.sessionUse = true
	clear(m.calls)
	m.refreshLive()
	e, st, sessionKey := m.env, m.ag, m.key
	run := func() tea.Msg {
		send := e.send
		opts := &agent.PromptOptions{
			OnEvent: func(ev llm.Event) {
				switch ev.Type {
				case llm.EventTextDelta, llm.EventThinkingStart, llm.EventToolCallStart, llm.EventToolCallEnd, llm.EventModelFallback:
					ev.Partial = nil
					send(streamMsg{id, ev})
				}
			},
			OnToolStart: func(name string, args json.RawMessage) { send(toolStartMsg{id, name, args}) },
			OnToolEnd:   func(name string, res *llm.ToolResultMessage) { send(toolEndMsg{id, res}) },
			OnMessage: func(msg llm.Message) {
				if msg.Assistant != nil {
					send(replyMsg{id, msg.Assistant})
				}
			},
		}
		res, err := e.mgr.Prompt(withAgent(context.Background(), st), st.name(), sessionKey, text, opts)
		return turnDoneMsg{id, res, err}
	}
	width := m.width
	return tea.Batch(m.print(func() string { return userLine(text, width) }), run, m.spin.Tick)
}

func (m *model) onEvent(ev llm.Event) tea.Cmd {
	switch ev.Type {
	case llm.EventTextDelta:
		m.liveText.WriteString(ev.Delta)
		m.activity = "streaming"
	case llm.EventThinkingStart:
		m.activity = "thinking"
	case llm.EventToolCallStart:
		m.activity = "preparing a tool call"
	case llm.EventToolCallEnd:
		if ev.ToolCall != nil {
			m.activity = "calling " + agent.ToolCallSummary(ev.ToolCall.Name, ev.ToolCall.Arguments)
		}
	case llm.EventModelFallback:
		width := m.width
		m.refreshLive()
		return m.print(func() string {
			return dimLine(fmt.Sprintf("↪ the gateway fell back to %s/%s", ev.Provider, ev.ModelID), width)
		})
	}
	m.refreshLive()
	return nil
}

// onReply prints a finished reply: as markdown when complete, as plain
// text when it was cut off.
func (m *model) onReply(msg *llm.AssistantMessage) tea.Cmd {
	m.liveText.Reset()
	m.activity = "waiting for the model"
	for _, c := range msg.ToolCalls() {
		m.calls[c.ID] = agent.ToolCallSummary(c.Name, c.Arguments)
	}
	m.refreshLive()
	text := strings.TrimSpace(msg.Text())
	if text == "" {
		return nil
	}
	width, dark, md := m.width, m.dark, m.env.md
	if msg.StopReason == llm.StopReasonAborted || msg.StopReason == llm.StopReasonError {
		return m.print(func() string { return wrap(text, width) })
	}
	return m.print(func() string { return md.render(text, width, dark) })
}

func (m *model) onToolStart(name string, args json.RawMessage) tea.Cmd {
	summary := agent.ToolCallSummary(name, args)
	m.activity = "running " + summary
	m.refreshLive()
	poll := m.pollApprovals()
	if !m.verbose {
		return poll
	}
	width := m.width
	return tea.Batch(poll, m.print(func() string { return verboseLine(summary, width) }))
}

func (m *model) onToolEnd(res *llm.ToolResultMessage) tea.Cmd {
	summary := m.calls[res.ToolCallID]
	if summary == "" {
		summary = res.ToolName
	}
	m.activity = "waiting for the model"
	m.refreshLive()
	width := m.width
	return m.print(func() string { return toolLine(summary, res, width) })
}

func (m *model) onTurnDone(res *agent.Result, err error) tea.Cmd {
	m.running, m.aborting = false, false
	m.activity = ""
	m.liveText.Reset()
	if m.notice == "aborting… (Ctrl-C again to quit)" {
		m.notice = ""
	}
	m.refreshLive()
	width := m.width
	switch {
	case err == nil:
		if res != nil && res.Limited {
			return m.print(func() string {
				return dimLine("(stopped at the limit of model calls: send another message to go on)", width)
			})
		}
		return nil
	case errors.Is(err, agent.ErrAborted):
		return m.print(func() string { return styleNotice.Render("⏹ aborted") })
	}
	msg := turnError(err)
	return m.print(func() string { return errorLine(msg, width) })
}

// turnError says why a turn failed, without the layers of wrapping.
func turnError(err error) string {
	var u *client.UnreachableError
	var b *client.BlockedError
	switch {
	case errors.As(err, &u):
		return u.Error()
	case errors.As(err, &b):
		return b.Error()
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "agent: model call failed: ")
	return msg
}

// refreshLive lays out the live area: the reply streaming now, and what
// the turn is doing.
func (m *model) refreshLive() {
	if !m.running && m.liveText.Len() == 0 {
		m.live.SetContent("")
		m.live.SetHeight(0)
		return
	}
	var b strings.Builder
	if m.liveText.Len() > 0 {
		b.WriteString(wrap(liveTail(m.liveText.String()), m.width))
		b.WriteString("\n")
	}
	if m.running && m.approval != nil {
		b.WriteString(m.spin.View() + " " + m.approvalLine())
	} else if m.running {
		b.WriteString(m.spin.View() + " " + styleDim.Render(m.activity))
	}
	content := strings.TrimRight(b.String(), "\n")
	lines := strings.Count(content, "\n") + 1
	maxH := max(m.height-m.input.Height()-2, 1)
	atBottom := m.live.AtBottom() || m.live.Height() == 0
	m.live.SetHeight(min(lines, maxH))
	m.live.SetContent(content)
	if atBottom {
		m.live.GotoBottom()
	}
}

// maxLiveBytes bounds the text of the streaming reply laid out at each
// event; the whole reply is printed when it is complete.
const maxLiveBytes = 16 << 10

// liveTail returns the end of a long streaming reply.
func liveTail(s string) string {
	if len(s) <= maxLiveBytes {
		return s
	}
	i := len(s) - maxLiveBytes
	if j := strings.IndexByte(s[i:], '\n'); j >= 0 && j < 1024 {
		i += j + 1
	} else {
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
	}
	return "…\n" + s[i:]
}

func (m *model) View() tea.View {
	if m.quitting {
		return tea.NewView("")
	}
	var parts []string
	if m.live.Height() > 0 {
		parts = append(parts, m.live.View())
	}
	parts = append(parts, m.input.View(), m.statusView())
	return tea.NewView(strings.Join(parts, "\n"))
}

// statusView is the status line: agent, model, session, state, verbose.
func (m *model) statusView() string {
	state := "idle"
	switch {
	case m.aborting:
		state = "aborting"
	case m.running && m.liveText.Len() > 0:
		state = "streaming"
	case m.running:
		state = "working"
	}
	verbose := "verbose off"
	if m.verbose {
		verbose = "verbose on"
	}
	session := strings.TrimPrefix(m.key, "tui:"+m.ag.name()+":")
	left := fmt.Sprintf(" %s · %s · session %s · %s · %s ", m.ag.name(), m.ag.modelName(), session, state, verbose)
	right := " /help "
	if m.notice != "" {
		right = " " + m.notice + " "
	}
	gap := m.width - lipgloss.Width(left) - lipgloss.Width(right)
	if gap < 1 {
		return styleStatus.Render(clip(left+right, m.width))
	}
	return styleStatus.Render(left + strings.Repeat(" ", gap) + right)
}

// print queues lines to print above the UI.
func (m *model) print(items ...func() string) tea.Cmd {
	m.out.queue = append(m.out.queue, items...)
	return m.flush()
}

// flush prints the queue unless a batch is being printed; printedMsg
// brings the next.
func (m *model) flush() tea.Cmd {
	if m.out.busy || len(m.out.queue) == 0 {
		return nil
	}
	batch := m.out.queue
	m.out.queue = nil
	m.out.busy = true
	return m.printCmd(batch, printedMsg{})
}

// printCmd renders the items and prints them above the UI, then returns
// then. The lines reach the program before then does, so batches keep
// their order.
func (m *model) printCmd(batch []func() string, then tea.Msg) tea.Cmd {
	e := m.env
	return func() tea.Msg {
		parts := make([]string, 0, len(batch))
		for _, f := range batch {
			if s := f(); s != "" {
				parts = append(parts, s)
			}
		}
		if len(parts) > 0 {
			e.print(strings.Join(parts, "\n"))
		}
		return then
	}
}

// print prints above the UI.
func (e *env) print(s string) {
	if e.println != nil {
		e.println(s)
		return
	}
	e.send(tea.Println(s)())
}
