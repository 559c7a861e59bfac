package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/beige-dev/beige/internal/agent"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/webui"
)

// consoleChat is the web console's Chat over the agent manager.
type consoleChat struct{ g *Gateway }

// PromptStream implements webui.Chat.
func (c consoleChat) PromptStream(ctx context.Context, agentName, sessionKey, message string, emit func(webui.ChatEvent)) error {
	g := c.g
	if _, ok := g.agents[agentName]; !ok {
		return proto.Errorf(http.StatusNotFound, "unknown agent %q", agentName)
	}
	n := 0
	var started time.Time
	opts := &agent.PromptOptions{
		OnEvent: func(ev llm.Event) {
			switch ev.Type {
			case llm.EventTextDelta:
				emit(webui.ChatEvent{Type: "text_delta", Delta: ev.Delta})
			case llm.EventThinkingDelta:
				emit(webui.ChatEvent{Type: "thinking_delta", Delta: ev.Delta})
			}
		},
		// The loop runs tool calls one after the other, so a start and
		// the next end are the same call.
		OnToolStart: func(name string, args json.RawMessage) {
			n++
			started = time.Now()
			if !json.Valid(args) {
				args = nil
			}
			emit(webui.ChatEvent{Type: "tool_start", ID: strconv.Itoa(n), Tool: name, Args: args})
		},
		OnToolEnd: func(name string, res *llm.ToolResultMessage) {
			ev := webui.ChatEvent{Type: "tool_end", ID: strconv.Itoa(n), Tool: name, DurationMs: time.Since(started).Milliseconds()}
			if res != nil {
				var b strings.Builder
				for _, ct := range res.Content {
					if ct.Type == llm.ContentText {
						b.WriteString(ct.Text)
					}
				}
				ev.Output, ev.IsError = b.String(), res.IsError
				ev.ExitCode = execExitCode(name, ev.Output)
			}
			emit(ev)
		},
	}
	res, err := g.manager.Prompt(ctx, agentName, sessionKey, message, opts)
	if err != nil {
		if errors.Is(err, agent.ErrAborted) && !g.stopping.Load() {
			emit(webui.ChatEvent{Type: "error", Error: "aborted"})
			return nil
		}
		return g.stopError(err)
	}
	emit(webui.ChatEvent{Type: "done", Text: res.Text})
	return nil
}

// execExitCode reads the exit code off an exec result ("Exit code: N" is
// its first line); nil for other tools.
func execExitCode(tool, out string) *int {
	if tool != "exec" {
		return nil
	}
	line, _, _ := strings.Cut(out, "\n")
	s, ok := strings.CutPrefix(line, "Exit code: ")
	if !ok {
		return nil
	}
	code, err := strconv.Atoi(s)
	if err != nil {
		return nil
	}
	return &code
}

// Abort implements webui.Chat.
func (c consoleChat) Abort(agentName, sessionKey string) bool {
	return c.g.manager.Abort(agentName, sessionKey)
}

// NewSession implements webui.Chat.
func (c consoleChat) NewSession(ctx context.Context, agentName, sessionKey string) error {
	if _, ok := c.g.agents[agentName]; !ok {
		return proto.Errorf(http.StatusNotFound, "unknown agent %q", agentName)
	}
	return c.g.manager.NewSession(ctx, agentName, sessionKey)
}

// History implements webui.Chat: the session file's messages as the
// events of a prompt.
func (c consoleChat) History(ctx context.Context, agentName, sessionKey string) ([]webui.ChatEvent, error) {
	if _, ok := c.g.agents[agentName]; !ok {
		return nil, proto.Errorf(http.StatusNotFound, "unknown agent %q", agentName)
	}
	msgs, err := c.g.manager.History(ctx, agentName, sessionKey)
	if err != nil {
		return nil, err
	}
	return historyEvents(msgs), nil
}

// historyEvents turns messages into the console's chat events.
func historyEvents(msgs []llm.Message) []webui.ChatEvent {
	var out []webui.ChatEvent
	for _, m := range msgs {
		switch {
		case m.User != nil:
			var b strings.Builder
			for _, ct := range m.User.Content {
				if ct.Type == llm.ContentText {
					b.WriteString(ct.Text)
				}
			}
			out = append(out, webui.ChatEvent{Type: "user", Text: b.String()})
		case m.Assistant != nil:
			for _, ct := range m.Assistant.Content {
				switch ct.Type {
				case llm.ContentText:
					out = append(out, webui.ChatEvent{Type: "text_delta", Delta: ct.Text})
				case llm.ContentThinking:
					if !ct.Redacted {
						out = append(out, webui.ChatEvent{Type: "thinking_delta", Delta: ct.Thinking})
					}
				case llm.ContentToolCall:
					args := ct.Arguments
					if !json.Valid(args) {
						args = nil
					}
					out = append(out, webui.ChatEvent{Type: "tool_start", ID: ct.ID, Tool: ct.Name, Args: args})
				}
			}
			if m.Assistant.ErrorMessage != "" {
				out = append(out, webui.ChatEvent{Type: "error", Error: m.Assistant.ErrorMessage})
			}
		case m.ToolResult != nil:
			ev := webui.ChatEvent{Type: "tool_end", ID: m.ToolResult.ToolCallID, Tool: m.ToolResult.ToolName, IsError: m.ToolResult.IsError}
			var b strings.Builder
			for _, ct := range m.ToolResult.Content {
				if ct.Type == llm.ContentText {
					b.WriteString(ct.Text)
				}
			}
			ev.Output = b.String()
			ev.ExitCode = execExitCode(ev.Tool, ev.Output)
			out = append(out, ev)
		}
	}
	return out
}

// thinkingSetting is the session setting that overrides the thinking level
// of the session's models (the web console's switch).
const thinkingSetting = "thinkingLevel"

// sessionThinking is the session's thinking level, or "" for the models' own.
func (g *Gateway) sessionThinking(sessionKey string) llm.ThinkingLevel {
	v, ok := g.settings.Get(sessionKey, thinkingSetting)
	if !ok {
		return ""
	}
	s, _ := v.(string)
	level, err := llm.ParseThinkingLevel(s)
	if err != nil || s == "" {
		return ""
	}
	return level
}

// SetThinking implements webui.Chat: "" returns the session to its models'
// own levels.
func (c consoleChat) SetThinking(ctx context.Context, agentName, sessionKey, level string) error {
	if _, ok := c.g.agents[agentName]; !ok {
		return proto.Errorf(http.StatusNotFound, "unknown agent %q", agentName)
	}
	if level == "" {
		return c.g.settings.Set(sessionKey, thinkingSetting, nil)
	}
	l, err := llm.ParseThinkingLevel(level)
	if err != nil {
		return proto.Errorf(http.StatusBadRequest, "%v", err)
	}
	return c.g.settings.Set(sessionKey, thinkingSetting, string(l))
}

// Thinking implements webui.Chat.
func (c consoleChat) Thinking(agentName, sessionKey string) string {
	return string(c.g.sessionThinking(sessionKey))
}

// consoleStatus is the console's Agents and health view.
func (g *Gateway) consoleStatus(ctx context.Context) webui.Status {
	st := webui.Status{Health: g.Health(ctx)}
	for _, name := range g.cfg.AgentOrder {
		a := g.agents[name]
		s := a.cfg.Sandbox
		as := webui.AgentStatus{
			Name: name, Model: a.cfg.Model.String(), Tools: a.cfg.Tools, Skills: a.cfg.Skills,
			Image: s.Image, Network: s.Network, State: "ready", Limits: map[string]string{},
		}
		if as.Network == "" {
			as.Network = config.NetworkProxy
		}
		for _, m := range a.models() {
			as.Models = append(as.Models, m.String())
		}
		if p := st.Health.Agents[name]; p != "" {
			as.State = p
		}
		if s.MemoryLimit != 0 {
			as.Limits["memory"] = strconv.FormatInt(int64(s.MemoryLimit)>>20, 10) + " MiB"
		}
		if s.CPUs != 0 {
			as.Limits["cpus"] = strconv.FormatFloat(s.CPUs, 'g', -1, 64)
		}
		if s.PidsLimit != 0 {
			as.Limits["pids"] = strconv.FormatInt(s.PidsLimit, 10)
		}
		st.Agents = append(st.Agents, as)
	}
	snap := g.health.Snapshot()
	keys := map[string]bool{}
	for _, a := range g.agents {
		for _, m := range a.models() {
			keys[m.Provider+"/"+m.Model] = true
		}
	}
	for k := range snap {
		keys[k] = true
	}
	now := g.health.Now()
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		e := snap[k]
		ps := webui.ProviderStatus{Key: k, Failures: e.ConsecutiveFailures, LastError: e.LastError}
		if e.RetryAfter.After(now) {
			until := e.RetryAfter.UTC()
			ps.CooldownUntil = &until
		}
		provider, _, _ := strings.Cut(k, "/")
		ps.InUse, ps.Waiting = g.router.QueueStats(provider)
		st.Providers = append(st.Providers, ps)
	}
	return st
}
