package telegram

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/beige-dev/beige/internal/approval"
	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/plugin"
)

// fakePC is a scripted PluginContext: prompts answer through answer (by
// default "echo: <message>"), and every call is recorded.
type fakePC struct {
	mu         sync.Mutex
	agents     []string
	answer     func(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error)
	prompts    []plugin.PromptRequest
	news       []string // session keys of NewSession
	aborts     []string
	compacts   []string
	compactErr error // Compact's error
	pinned     map[string]string
	settings   map[string]map[string]any
	running    map[string]context.CancelCauseFunc
	sessMu     map[string]*sync.Mutex
	broker     *approval.Broker // approval requests (approvals_test.go); nil: none
}

func newFakePC(agents ...string) *fakePC {
	if len(agents) == 0 {
		agents = []string{"main"}
	}
	return &fakePC{
		agents:   agents,
		pinned:   map[string]string{},
		settings: map[string]map[string]any{},
		running:  map[string]context.CancelCauseFunc{},
		sessMu:   map[string]*sync.Mutex{},
	}
}

var errAborted = errors.New("fake: prompt aborted")

func (f *fakePC) Agents() []string { return f.agents }

func (f *fakePC) Prompt(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
	f.mu.Lock()
	f.prompts = append(f.prompts, req)
	m := f.sessMu[req.SessionKey]
	if m == nil {
		m = &sync.Mutex{}
		f.sessMu[req.SessionKey] = m
	}
	answer := f.answer
	f.mu.Unlock()
	m.Lock() // prompts of one session run one at a time
	defer m.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	f.mu.Lock()
	f.running[req.SessionKey] = cancel
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.running, req.SessionKey)
		f.mu.Unlock()
	}()
	if answer == nil {
		answer = func(_ context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
			return &plugin.PromptResult{Text: "echo: " + req.Message}, nil
		}
	}
	res, err := answer(ctx, req)
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("%w: %w", errAborted, context.Cause(ctx))
	}
	return res, err
}

// streamText sends text as deltas of n bytes, between a start and a done.
func streamText(req plugin.PromptRequest, text string, n int) {
	if req.OnEvent == nil {
		return
	}
	req.OnEvent(llm.Event{Type: llm.EventStart})
	for len(text) > 0 {
		k := min(n, len(text))
		req.OnEvent(llm.Event{Type: llm.EventTextDelta, Delta: text[:k]})
		text = text[k:]
	}
	req.OnEvent(llm.Event{Type: llm.EventDone, Reason: "stop"})
}

func (f *fakePC) NewSession(_ context.Context, agent, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.news = append(f.news, agent+" "+key)
	return nil
}

func (f *fakePC) Abort(agent, key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.aborts = append(f.aborts, agent+" "+key)
	cancel := f.running[key]
	if cancel == nil {
		return false
	}
	cancel(errAborted)
	return true
}

func (f *fakePC) Compact(_ context.Context, agent, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.compacts = append(f.compacts, agent+" "+key)
	return f.compactErr
}

func (f *fakePC) Status(_ context.Context, agent, key string) (plugin.SessionStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := plugin.SessionStatus{Agent: agent, SessionKey: key, Model: "anthropic/claude", Running: f.running[key] != nil}
	if m := f.pinned[key]; m != "" {
		st.Model, st.Pinned = m, true
	}
	return st, nil
}

func (f *fakePC) Models(string) []string { return []string{"anthropic/claude", "openai/gpt"} }

func (f *fakePC) SetModel(_ context.Context, _, key, model string) error {
	if model != "" && !slices.Contains(f.Models(""), model) {
		return fmt.Errorf("model %q is not one of the agent's", model)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pinned[key] = model
	return nil
}

func (f *fakePC) Settings(key string, channelDefaults map[string]any) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := maps.Clone(plugin.SystemSettings)
	maps.Copy(out, channelDefaults)
	maps.Copy(out, f.settings[key])
	return out
}

func (f *fakePC) SetSetting(key, name string, value any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.settings[key] == nil {
		f.settings[key] = map[string]any{}
	}
	if value == nil {
		delete(f.settings[key], name)
	} else {
		f.settings[key][name] = value
	}
	return nil
}

func (f *fakePC) promptCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.prompts)
}

func (f *fakePC) promptKeys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, p := range f.prompts {
		out = append(out, p.SessionKey)
	}
	return out
}

var _ plugin.PluginContext = (*fakePC)(nil)
