package gateway

import (
	"context"
	"net/http"
	"strings"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/httpapi"
	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/proto/llmproto"
	"github.com/beige-dev/beige/internal/routing"
)

var (
	_ httpapi.Streamer = (*Gateway)(nil)
	_ httpapi.Hooker   = (*Gateway)(nil)
)

// ChatStream implements httpapi.Streamer: POST /api/chat/stream, the LLM
// proxy for clients without keys (the terminal client). The model must be
// one of the agent's; the agent's other models are its fallbacks. The
// prePrompt and postResponse hooks run here, and every attempt is audited.
func (g *Gateway) ChatStream(ctx context.Context, req llmproto.ChatStreamRequest, emit func(llm.Event)) error {
	if req.AgentName == "" {
		return proto.Errorf(http.StatusBadRequest, `missing "agentName": the proxy serves an agent's models`)
	}
	a, ok := g.agents[req.AgentName]
	if !ok {
		return proto.Errorf(http.StatusNotFound, "unknown agent %q", req.AgentName)
	}
	if req.Provider == "" || req.ModelID == "" {
		return proto.Errorf(http.StatusBadRequest, `missing "provider" or "modelId"`)
	}
	refs := a.models()
	first := -1
	for i, ref := range refs {
		if ref.Provider == req.Provider && ref.Model == req.ModelID {
			first = i
			break
		}
	}
	if first < 0 {
		return proto.Errorf(http.StatusForbidden, "model %s/%s is not one of agent %q's models (%s)", req.Provider, req.ModelID, req.AgentName, joinRefs(refs))
	}
	if len(req.Context.Messages) == 0 {
		return proto.Errorf(http.StatusBadRequest, `"context.messages" is empty`)
	}
	key := req.SessionKey
	if key == "" {
		key = "tui:" + req.AgentName + ":default"
	}
	session := proto.ParseSessionKey(req.AgentName, key)

	// The requested model first, then the agent's others in their order.
	var cands []routing.Candidate
	for _, i := range append([]int{first}, without(len(refs), first)...) {
		c := g.candidate(refs[i])
		applyChatOptions(&c, refs[i], req.Options)
		cands = append(cands, c)
	}

	ps := newPiStream(cands, emit)
	ps.noPartial = req.Partial != nil && !*req.Partial
	defer ps.finish()
	emit = ps.emit

	// prePrompt hooks see (and may change or block) the last user message.
	if last := &req.Context.Messages[len(req.Context.Messages)-1]; last.User != nil {
		ev := &plugin.PrePromptEvent{Agent: req.AgentName, Session: session, Model: cands[0].Key(), Prompt: last.User.Text()}
		if err := g.plugins.RunPrePrompt(ctx, ev); err != nil {
			emit(llm.Event{Type: llm.EventBlocked, Reason: err.Error()})
			return nil
		}
		if ev.Prompt != last.User.Text() {
			u := *last.User
			u.Content = []llm.Content{llm.Text(ev.Prompt)}
			last.User = &u
		}
	}

	rc := g.newRouteCall(req.AgentName, session)
	if !g.plugins.HasPostResponse() {
		rc.stream(ctx, cands, req.Context, emit) // its last event (done or error) says how it went
		return nil
	}
	// postResponse hooks may change or block the answer, so it is held back
	// until they saw it.
	var held []llm.Event
	msg, c, err := rc.stream(ctx, cands, req.Context, func(ev llm.Event) { held = append(held, ev) })
	if err != nil || msg == nil {
		for _, ev := range held {
			emit(ev)
		}
		return nil
	}
	ev := &plugin.PostResponseEvent{Agent: req.AgentName, Session: session, Model: c.Key(), Response: msg.Text()}
	if err := g.plugins.RunPostResponse(ctx, ev); err != nil {
		emit(llm.Event{Type: llm.EventBlocked, Reason: err.Error()})
		return nil
	}
	if ev.Response == msg.Text() {
		for _, e := range held {
			emit(e)
		}
		return nil
	}
	// The answer was rewritten: send it as one text block.
	out := msg.Clone()
	var content []llm.Content
	for _, b := range out.Content {
		if b.Type != "text" {
			content = append(content, b)
		}
	}
	out.Content = append(content, llm.Text(ev.Response))
	idx := len(content)
	begun := out.Clone()
	begun.Content, begun.StopReason = content, llm.StopReasonStop
	emit(llm.Event{Type: llm.EventStart, Partial: begun})
	emit(llm.Event{Type: llm.EventTextStart, ContentIndex: idx})
	emit(llm.Event{Type: llm.EventTextDelta, ContentIndex: idx, Delta: ev.Response})
	emit(llm.Event{Type: llm.EventTextEnd, ContentIndex: idx, Content: ev.Response})
	emit(llm.Event{Type: llm.EventDone, Reason: string(out.StopReason), Message: out})
	return nil
}

// applyChatOptions applies a proxied request's options to a candidate.
func applyChatOptions(c *routing.Candidate, ref config.ModelRef, o *llmproto.ChatOptions) {
	if o == nil {
		return
	}
	if o.Reasoning != nil {
		switch {
		case !o.Reasoning.On:
			c.Options.ThinkingLevel = llm.ThinkingOff
		case o.Reasoning.Level != "":
			c.Options.ThinkingLevel = o.Reasoning.Level
		case c.Options.ThinkingLevel == llm.ThinkingOff:
			c.Options.ThinkingLevel = llm.ThinkingMedium
		}
	}
	if o.MaxTokens > 0 {
		c.Options.MaxTokens = o.MaxTokens
	}
	c.Options.Temperature = o.Temperature
}

func without(n, skip int) []int {
	var out []int
	for i := range n {
		if i != skip {
			out = append(out, i)
		}
	}
	return out
}

func joinRefs(refs []config.ModelRef) string {
	s := make([]string, len(refs))
	for i, r := range refs {
		s[i] = r.String()
	}
	return strings.Join(s, ", ")
}

// PrePromptHook implements httpapi.Hooker.
func (g *Gateway) PrePromptHook(ctx context.Context, agentName string, req proto.PrePromptRequest) (proto.PrePromptResponse, error) {
	session, err := g.hookSession(agentName, req.SessionKey, req.Channel)
	if err != nil {
		return proto.PrePromptResponse{}, err
	}
	ev := &plugin.PrePromptEvent{Agent: agentName, Session: session, Model: g.primaryModel(agentName), Prompt: req.Message}
	if err := g.plugins.RunPrePrompt(ctx, ev); err != nil {
		reason := err.Error()
		return proto.PrePromptResponse{Message: req.Message, Block: true, Reason: &reason}, nil
	}
	return proto.PrePromptResponse{Message: ev.Prompt}, nil
}

// PostResponseHook implements httpapi.Hooker.
func (g *Gateway) PostResponseHook(ctx context.Context, agentName string, req proto.PostResponseRequest) (proto.PostResponseResponse, error) {
	session, err := g.hookSession(agentName, req.SessionKey, req.Channel)
	if err != nil {
		return proto.PostResponseResponse{}, err
	}
	ev := &plugin.PostResponseEvent{Agent: agentName, Session: session, Model: g.primaryModel(agentName), Response: req.Response}
	if err := g.plugins.RunPostResponse(ctx, ev); err != nil {
		return proto.PostResponseResponse{Response: req.Response, Block: true}, nil
	}
	return proto.PostResponseResponse{Response: ev.Response}, nil
}

// SessionHook implements httpapi.Hooker: session-created and session-disposed.
func (g *Gateway) SessionHook(ctx context.Context, agentName, hook string, req proto.SessionHookRequest) error {
	session, err := g.hookSession(agentName, req.SessionKey, req.Channel)
	if err != nil {
		return err
	}
	if hook == proto.HookSessionCreated {
		err = g.plugins.RunSessionCreated(ctx, &plugin.SessionCreatedEvent{Agent: agentName, Session: session})
	} else {
		err = g.plugins.RunSessionDisposed(ctx, &plugin.SessionDisposedEvent{Agent: agentName, Session: session})
	}
	if err != nil {
		g.log.Warn("session hook failed", "hook", hook, "agent", agentName, "err", err)
	}
	return nil
}

func (g *Gateway) hookSession(agentName, key, channel string) (proto.SessionContext, error) {
	if _, ok := g.agents[agentName]; !ok {
		return proto.SessionContext{}, proto.Errorf(http.StatusNotFound, "unknown agent %q", agentName)
	}
	if key == "" {
		key = "tui:" + agentName + ":default"
	}
	sc := proto.ParseSessionKey(agentName, key)
	if channel != "" {
		sc.Channel = channel
	}
	return sc, nil
}

// piStream shapes the events of a proxied call as a pi client reads them
// (pi's AssistantMessageEventStream, which the original terminal client
// feeds them into): one start, then the blocks, then exactly one done or
// error carrying the whole message; every start, _start, _delta and _end
// event carries partial, the message so far, which pi's agent loop keeps
// as the conversation's last message and its UI draws. The router's
// stream is one per attempt: a fallback after a failed attempt would start
// a second message, which pi's loop keeps as an empty assistant message in
// the next request. So only the first start is sent; a later attempt's
// blocks replace the failed one's in partial (it is rebuilt per attempt),
// model_fallback events pass through (pi clients skip them), and a stream
// that ends without done or error gets an error.
//
// Sending partial on every delta repeats the message so far: the bytes
// on the wire grow with the square of the answer's length, as with pi's
// own providers. A client that does not need it asks for "partial": false
// (our own client does).
type piStream struct {
	out     func(llm.Event)
	cands   []routing.Candidate
	cur     routing.Candidate // the model being tried
	acc     llm.Accumulator   // this attempt's message so far
	started bool
	ended   bool
	// noPartial leaves partial out of the block events (the request's
	// "partial": false).
	noPartial bool
}

func newPiStream(cands []routing.Candidate, out func(llm.Event)) *piStream {
	p := &piStream{out: out, cands: cands}
	if len(cands) > 0 {
		p.cur = cands[0]
	}
	p.reset(nil)
	return p
}

// reset starts a new attempt's message, from base when the attempt's start
// carried one.
func (p *piStream) reset(base *llm.AssistantMessage) {
	p.acc = llm.Accumulator{}
	if base == nil {
		base = &llm.AssistantMessage{
			Content: []llm.Content{}, API: p.cur.Model.API, Provider: candProvider(p.cur), Model: p.cur.Model.ID,
			StopReason: llm.StopReasonStop, Timestamp: llm.Now(),
		}
	}
	p.acc.Apply(llm.Event{Type: llm.EventStart, Partial: base})
}

func (p *piStream) begin() {
	if !p.started {
		p.started = true
		p.out(llm.Event{Type: llm.EventStart, Partial: p.acc.Message()})
	}
}

func (p *piStream) emit(ev llm.Event) {
	if p.ended {
		return // one final event; nothing after it
	}
	switch ev.Type {
	case llm.EventBlocked:
		p.ended = true
		p.out(ev)
	case llm.EventModelFallback:
		for _, c := range p.cands {
			if candProvider(c) == ev.Provider && c.Model.ID == ev.ModelID {
				p.cur = c
				break
			}
		}
		p.reset(nil)
		p.out(ev)
	case llm.EventStart:
		p.reset(ev.Partial)
		p.begin()
	case llm.EventDone, llm.EventError:
		p.begin()
		p.ended = true
		if ev.Type == llm.EventDone && ev.Message == nil {
			ev.Message = p.acc.Message()
		}
		if ev.Type == llm.EventError && ev.Error == nil {
			m := p.acc.Message()
			m.StopReason = llm.StopReasonError
			m.ErrorMessage = "the model call failed"
			ev.Error = m
		}
		p.out(ev)
	default:
		p.begin()
		p.acc.Apply(ev)
		ev.Partial = nil
		if !p.noPartial {
			ev.Partial = p.acc.Message()
		}
		p.out(ev)
	}
}

// finish ends a stream that got no done, error or blocked event.
func (p *piStream) finish() {
	if p.ended {
		return
	}
	m := p.acc.Message()
	m.StopReason, m.ErrorMessage = llm.StopReasonError, "the model stream ended without an answer"
	p.emit(llm.Event{Type: llm.EventError, Reason: string(llm.StopReasonError), Error: m})
}

// candProvider is the provider's name in the config, as the client names it.
func candProvider(c routing.Candidate) string {
	if c.Provider != "" {
		return c.Provider
	}
	return c.Model.Provider
}
