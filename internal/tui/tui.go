// Package tui is beige's terminal client (`beige tui`): a chat with one
// agent of a running gateway, in a separate process that holds no API key
// and reaches no sandbox. It runs the same agent loop as the gateway
// (internal/agent), over a model that streams through the gateway's
// /api/chat/stream and tools that run through /api/agents/:name/exec
// (client.RemoteModel, client.RemoteTools). Its sessions are kept apart
// from the gateway's, under $BEIGE_HOME/sessions/tui.
//
// The UI is one Bubble Tea root model drawn inline at the bottom of the
// terminal: the reply streaming now, the input and a status line. What is
// finished — messages, rendered answers, tool calls, verbose notices — is
// printed above it, into the terminal's own scrollback. Slash commands are
// handled here and never reach the model.
package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/beige-dev/beige/internal/agent"
	"github.com/beige-dev/beige/internal/client"
	"github.com/beige-dev/beige/internal/proto"
)

// SessionsFolder is the folder of the terminal's sessions under
// $BEIGE_HOME/sessions: apart from the gateway's, so that the two
// processes never write the same session-map.json.
const SessionsFolder = "tui"

// Options configures Run.
type Options struct {
	// Client reaches the gateway. Required.
	Client *client.Client
	// Agent is the agent to talk to; "" means the gateway's first.
	Agent string
	// SessionsDir holds the terminal's sessions: $BEIGE_HOME/sessions/tui
	// (see SessionsFolder). Required.
	SessionsDir string
	// Verbose starts with verbose mode on.
	Verbose bool
	// Logger may be nil. The terminal is the UI's: log to a file.
	Logger *slog.Logger
	// Input and Output replace the terminal (tests); nil means stdin and
	// stdout.
	Input  io.Reader
	Output io.Writer
}

// startTimeout bounds the calls to the gateway before the UI starts.
const startTimeout = 15 * time.Second

// Run checks that the gateway answers, picks the agent, and runs the UI
// until the user quits. Errors before the UI starts (the gateway cannot be
// reached, an unknown agent) are returned for the command line to print.
func Run(ctx context.Context, opts Options) error {
	if opts.Client == nil || opts.SessionsDir == "" {
		return errors.New("tui: Run needs a client and a sessions folder")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	back := newBackend(opts.Client, log)

	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	list, err := back.agents(sctx)
	var st agentState
	if err == nil {
		var info proto.AgentInfo
		info, err = pickAgent(opts.Agent, list)
		if err == nil {
			st, err = back.loadInfo(sctx, info)
		}
	}
	var health proto.Health
	if err == nil {
		health, _ = opts.Client.Health(sctx) // only for a warning
	}
	cancel()
	if err != nil {
		return err
	}

	mgr, err := agent.NewManager(agent.ManagerConfig{
		SessionsDir: filepath.Clean(opts.SessionsDir),
		Agents:      back.setup,
		Logger:      log,
		Hooks:       back,
	})
	if err != nil {
		return err
	}
	e := &env{mgr: mgr, back: back, md: &markdown{}, now: time.Now}
	m := newModel(e, st, opts.Verbose)
	m.warning = healthWarning(health, st.name())

	popts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithFilter(interruptAsCtrlC)}
	if opts.Input != nil {
		popts = append(popts, tea.WithInput(opts.Input))
	}
	if opts.Output != nil {
		popts = append(popts, tea.WithOutput(opts.Output))
	}
	p := tea.NewProgram(m, popts...)
	e.send = p.Send
	final, runErr := p.Run()

	// Abort a running turn and wait for it, then say goodbye to the session.
	mgr.Close()
	if fm, ok := final.(*model); ok {
		e.leave(fm.ag.name(), fm.key, fm.sessionUse)
	}
	switch {
	case runErr == nil, errors.Is(runErr, context.Canceled), errors.Is(runErr, tea.ErrInterrupted):
		return nil
	}
	return fmt.Errorf("terminal UI: %w", runErr)
}

// interruptAsCtrlC turns a SIGINT (which arrives as a message only when
// the input is not a terminal in raw mode) into a Ctrl-C key press, so
// that it aborts the turn rather than killing the program.
func interruptAsCtrlC(_ tea.Model, msg tea.Msg) tea.Msg {
	if _, ok := msg.(tea.InterruptMsg); ok {
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	}
	return msg
}

// pickAgent finds the agent named, or the first one.
func pickAgent(name string, list []proto.AgentInfo) (proto.AgentInfo, error) {
	if name == "" {
		if len(list) == 0 {
			return proto.AgentInfo{}, errors.New("the gateway has no agents: add one to the config's agents")
		}
		return list[0], nil
	}
	i := slices.IndexFunc(list, func(a proto.AgentInfo) bool { return a.Name == name })
	if i < 0 {
		return proto.AgentInfo{}, unknownAgentError(name, list)
	}
	return list[i], nil
}

// healthWarning says what is wrong with a gateway that is not healthy, or
// "".
func healthWarning(h proto.Health, agentName string) string {
	if h.Status == "" || h.Status == "ok" {
		return ""
	}
	w := "the gateway is " + h.Status
	if p, ok := h.Agents[agentName]; ok {
		w += ": agent " + agentName + ": " + p
	}
	if h.Config != "" {
		w += " (its last config reload was refused: " + h.Config + ")"
	}
	return w + " · beige gateway status"
}
