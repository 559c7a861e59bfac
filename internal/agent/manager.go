package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto"
)

// ErrUnknownAgent is what an AgentFunc returns (possibly wrapped) for an
// agent that is not configured; the Manager turns it into a 404 error.
var ErrUnknownAgent = errors.New("agent: unknown agent")

// ErrClosed is returned by a Manager that was closed.
var ErrClosed = errors.New("agent: manager closed")

// errAbortRequested is the cause of a prompt cancelled by Manager.Abort.
var errAbortRequested = errors.New("abort requested")

// AgentSetup is what the Manager needs of an agent for one prompt. It is
// asked for at every prompt, so that a reloaded config or a changed model
// applies to the next prompt.
type AgentSetup struct {
	Model Model
	// Tools may be nil: no tools.
	Tools Tools
	// ToolContext and SkillContext go into the system prompt.
	ToolContext  string
	SkillContext string
	// AgentsMD, if set, returns the workspace's AGENTS.md (see
	// ReadAgentsMD). An error is logged, and the prompt goes on without.
	AgentsMD func() (string, error)
	// CompactionThreshold is the agent's model.compactionThreshold (tokens);
	// 0 means near the model's context window.
	CompactionThreshold int
	// MaxModelCalls bounds the model calls of one prompt; 0 means
	// DefaultMaxModelCalls.
	MaxModelCalls int
}

// AgentFunc returns the setup of an agent, or ErrUnknownAgent. It should be
// cheap and start nothing: the sandbox is reached through Tools, lazily.
type AgentFunc func(ctx context.Context, agent string) (*AgentSetup, error)

// Hooks are the plugin hooks around prompts (the architecture's prePrompt,
// postResponse, sessionCreated). They are defined by a later issue; a nil
// Hooks means none.
type Hooks interface {
	// PrePrompt may rewrite the user's message, or refuse it with an
	// error (the prompt then ends without a model call).
	PrePrompt(ctx context.Context, agent, sessionKey, message string) (string, error)
	// PostResponse may rewrite the answer of a prompt that succeeded.
	PostResponse(ctx context.Context, agent, sessionKey, response string) (string, error)
	// SessionCreated is told when a session key starts a new session file.
	SessionCreated(ctx context.Context, agent, sessionKey string)
}

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	// SessionsDir is $BEIGE_HOME/sessions (home.Home.SessionsDir); it holds
	// session-map.json and a folder of session files per agent. Required.
	SessionsDir string
	// Agents gives each agent's model, tools and prompt inputs. Required.
	Agents AgentFunc
	// Logger may be nil.
	Logger *slog.Logger
	// Hooks may be nil.
	Hooks Hooks
}

// Manager owns the sessions of every agent. Sessions run concurrently; each
// session runs one prompt at a time: a prompt sent while another runs on
// the same session waits for it — prompts are taken in the order they came
// — for as long as its own context allows. It is safe for concurrent use.
//
// The session map is keyed by session key alone, as pi's is: when a key
// (say a Telegram chat) moves to another agent, the map points at the new
// agent's session, and the old agent's session under that key is not
// resumed after a restart (its file stays).
type Manager struct {
	dir    string
	agents AgentFunc
	hooks  Hooks
	log    *slog.Logger

	closed  atomic.Bool
	running sync.WaitGroup // prompts, from arrival to return
	prompts atomic.Int64   // prompts running now, for Stats

	mu       sync.Mutex
	sessions map[string]*session // by agent + "\x00" + key
	index    map[string]mapEntry // session-map.json, by session key
	saved    map[string]mapEntry // the map as this process last read or wrote it (see mergeDiskLocked)
}

// SessionMapFile is the name of the session map in the sessions folder.
const SessionMapFile = "session-map.json"

// NewManager returns a Manager over cfg.SessionsDir, creating the folder
// (0700) and reading its session map. A missing or corrupt session map is
// rebuilt from the session files' headers (a corrupt one is kept as
// *.bad); see openSessionMap.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.SessionsDir == "" || cfg.Agents == nil {
		return nil, errors.New("agent: NewManager needs a sessions folder and an AgentFunc")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(cfg.SessionsDir)
	if err != nil {
		return nil, fmt.Errorf("agent: sessions folder: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: sessions folder: %w", err)
	}
	index, err := openSessionMap(dir, log)
	if err != nil {
		return nil, fmt.Errorf("agent: session map: %w", err)
	}
	return &Manager{
		dir: dir, agents: cfg.Agents, hooks: cfg.Hooks, log: log,
		sessions: map[string]*session{}, index: index, saved: maps.Clone(index),
	}, nil
}

// Stats counts the sessions open in memory and the prompts running now
// (the beige_sessions_active and beige_prompts_active gauges).
func (m *Manager) Stats() (sessions, prompts int) {
	m.mu.Lock()
	sessions = len(m.sessions)
	m.mu.Unlock()
	return sessions, int(m.prompts.Load())
}

// DefaultSessionKey is the session of POST /api/agents/:name/prompt when
// the request names none.
func DefaultSessionKey(agent string) string { return "api:" + agent + ":default" }

// setup asks for an agent's setup, mapping an unknown agent to a 404.
func (m *Manager) setup(ctx context.Context, agent string) (*AgentSetup, error) {
	if agent == "" || agent != filepath.Base(agent) || strings.ContainsAny(agent, `/\`) || agent == "." || agent == ".." {
		return nil, proto.Errorf(http.StatusNotFound, "unknown agent %q", agent)
	}
	s, err := m.agents(ctx, agent)
	if errors.Is(err, ErrUnknownAgent) || (err == nil && s == nil) {
		return nil, proto.Errorf(http.StatusNotFound, "unknown agent %q", agent)
	}
	if err != nil {
		return nil, err
	}
	if s.Model == nil {
		return nil, fmt.Errorf("agent %q: no model", agent)
	}
	return s, nil
}

// checkKey refuses session keys that could not be stored or shown safely.
func checkKey(key string) error {
	if len(key) > 512 {
		return proto.Errorf(http.StatusBadRequest, "session key too long (%d bytes, at most 512)", len(key))
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return proto.Errorf(http.StatusBadRequest, "session key contains a control character")
		}
	}
	return nil
}

// mapKey is the key of a session in Manager.sessions.
func mapKey(agent, key string) string { return agent + "\x00" + key }

// loaded returns the session of agent and key (the agent's default
// session for ""), or nil when none was made: unlike session, it creates
// nothing.
func (m *Manager) loaded(agent, key string) *session {
	if key == "" {
		key = DefaultSessionKey(agent)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sessions[mapKey(agent, key)]
}

// MaxMessageBytes bounds a user message (a prompt or a steering message):
// more than any model's context window holds as text.
const MaxMessageBytes = 4 << 20

// checkMessage refuses an empty or oversized user message.
func checkMessage(message string) error {
	if len(message) > MaxMessageBytes {
		return proto.Errorf(http.StatusRequestEntityTooLarge, "message too long (%d bytes, at most %d)", len(message), MaxMessageBytes)
	}
	if strings.TrimSpace(message) == "" {
		return proto.Errorf(http.StatusBadRequest, "message is empty")
	}
	return nil
}

// session returns the session of agent and key, creating it.
func (m *Manager) session(agent, key string) *session {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := mapKey(agent, key)
	s := m.sessions[id]
	if s == nil {
		s = &session{agent: agent, key: key}
		m.sessions[id] = s
	}
	return s
}

// Prompt sends message to agent in the session sessionKey ("" means
// DefaultSessionKey) and runs the loop until the model has answered. If a
// prompt is running in that session, this one waits its turn (FIFO) as
// long as ctx allows. Cancelling ctx, or Abort, aborts the prompt: the
// error then wraps ErrAborted. An unknown agent gives a *proto.Error with
// status 404, an empty message one with 400. The Result is nil only when
// the prompt did not start; otherwise it holds what happened, even with an
// error.
func (m *Manager) Prompt(ctx context.Context, agent, sessionKey, message string, opts *PromptOptions) (*Result, error) {
	if err := checkMessage(message); err != nil {
		return nil, err
	}
	if sessionKey == "" {
		sessionKey = DefaultSessionKey(agent)
	}
	var res *Result
	err := m.withTurn(ctx, agent, sessionKey, func(pctx context.Context, setup *AgentSetup, conv *conversation) (err error) {
		m.prompts.Add(1)
		defer m.prompts.Add(-1)
		res, err = m.prompt(pctx, agent, sessionKey, message, opts, setup, conv)
		return err
	})
	return res, err
}

// withTurn runs fn as the session's turn: the key checked, the agent's
// setup, the session's turn (waiting for one that runs), and its
// conversation loaded and marked running, so that Abort cancels fn's ctx.
func (m *Manager) withTurn(ctx context.Context, agent, sessionKey string, fn func(ctx context.Context, setup *AgentSetup, conv *conversation) error) error {
	if err := checkKey(sessionKey); err != nil {
		return err
	}
	setup, err := m.setup(ctx, agent)
	if err != nil {
		return err
	}
	s, release, err := m.acquire(ctx, agent, sessionKey)
	if err != nil {
		return err
	}
	defer release()
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	conv, err := m.begin(pctx, s, cancel)
	if err != nil {
		return err
	}
	defer m.end(s, conv)
	return fn(pctx, setup, conv)
}

// prompt is Prompt, in the session's turn.
func (m *Manager) prompt(pctx context.Context, agent, sessionKey, message string, opts *PromptOptions, setup *AgentSetup, conv *conversation) (*Result, error) {
	var err error
	sc := proto.ParseSessionKey(agent, sessionKey)
	if opts != nil && opts.Channel != "" {
		sc.Channel = opts.Channel
	}
	if m.hooks != nil {
		if message, err = m.hooks.PrePrompt(pctx, agent, sessionKey, message); err != nil {
			return nil, err
		}
	}
	if opts != nil && opts.ReplyTo != nil {
		if err := m.SetSessionMetadata(sessionKey, replyToKey, opts.ReplyTo); err != nil {
			m.log.Warn("reply target of the prompt not stored", "agent", agent, "session", sessionKey, "err", err)
		}
	}
	system := m.systemPrompt(agent, sc.Channel, setup)
	var defs []llm.Tool
	if setup.Tools != nil {
		defs = setup.Tools.Definitions()
	}
	model := setup.Model
	if opts != nil && opts.Model != nil {
		model = opts.Model
	}
	comp := &Compactor{Model: model, Threshold: setup.CompactionThreshold}
	var notify *compactNotify
	if opts != nil && (opts.OnCompactionStart != nil || opts.OnCompactionEnd != nil) {
		notify = &compactNotify{start: opts.OnCompactionStart, end: opts.OnCompactionEnd}
	}
	s := m.session(agent, sessionKey)
	loop := &Loop{
		Model: model, Tools: setup.Tools, SystemPrompt: system, Session: sc,
		MaxModelCalls: setup.MaxModelCalls,
		Steering:      m.steering(pctx, s, agent, sessionKey),
		Record:        conv.appendMessage,
		Compact: func(ctx context.Context, msgs []llm.Message) ([]llm.Message, *Compaction, error) {
			if len(msgs) != len(conv.msgs) {
				// Cannot happen: every message went through Record.
				m.log.Error("agent: loop and session out of step; compaction skipped", "agent", agent, "session", sessionKey)
				return msgs, nil, nil
			}
			c, err := conv.compact(ctx, comp, system, defs, false, notify)
			if c == nil || err != nil {
				return msgs, nil, err
			}
			return conv.messages(), c, nil
		},
		Logger: m.log.With("agent", agent, "session", sessionKey),
	}
	start := time.Now()
	res, err := loop.Run(pctx, conv.messages(), llm.UserText(message), opts)
	s.mu.Lock()
	s.steerable = false // an abort or a failure does not poll again
	s.mu.Unlock()
	m.log.Info("prompt", "agent", agent, "session", sessionKey, "duration", time.Since(start),
		"modelCalls", res.ModelCalls, "stopReason", res.StopReason, "err", err)
	if err == nil && m.hooks != nil {
		if res.Text, err = m.hooks.PostResponse(pctx, agent, sessionKey, res.Text); err != nil {
			return res, err
		}
	}
	return res, err
}

// acquire waits for the session's turn. release gives it back.
func (m *Manager) acquire(ctx context.Context, agent, key string) (*session, func(), error) {
	if m.closed.Load() {
		return nil, nil, ErrClosed
	}
	m.running.Add(1)
	s := m.session(agent, key)
	if err := s.turn.lock(ctx); err != nil {
		m.running.Done()
		return nil, nil, abortError(ctx)
	}
	if m.closed.Load() {
		s.turn.unlock()
		m.running.Done()
		return nil, nil, ErrClosed
	}
	return s, func() { s.turn.unlock(); m.running.Done() }, nil
}

// begin loads the session's conversation if needed, and marks it running
// with cancel as its abort.
func (m *Manager) begin(ctx context.Context, s *session, cancel context.CancelCauseFunc) (*conversation, error) {
	s.mu.Lock()
	conv := s.conv
	s.mu.Unlock()
	if conv == nil {
		var err error
		if conv, err = m.load(ctx, s); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	switch {
	case s.conv == nil:
		s.conv = conv
	case s.conv != conv:
		conv.close() // NewSession came first
		conv = s.conv
	}
	s.busy, s.cancel, s.steerable = conv, cancel, true
	s.mu.Unlock()
	if m.closed.Load() {
		cancel(ErrClosed)
	}
	return conv, nil
}

// end marks the session idle, closing its conversation if NewSession
// replaced it meanwhile.
func (m *Manager) end(s *session, conv *conversation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy, s.cancel, s.steerable = nil, nil, false
	if s.conv != conv {
		if err := conv.close(); err != nil {
			m.log.Warn("close session file", "file", conv.path, "err", err)
		}
	}
}

// load resumes the session named in the session map, or starts one.
func (m *Manager) load(ctx context.Context, s *session) (*conversation, error) {
	m.mu.Lock()
	e, ok := m.entryLocked(s.key)
	m.mu.Unlock()
	log := m.log.With("agent", s.agent, "session", s.key)
	if ok && e.AgentName == s.agent && e.SessionFile != "" {
		conv, err := openConversation(e.SessionFile, log)
		if err == nil {
			log.Debug("session resumed", "file", e.SessionFile, "messages", len(conv.msgs))
			return conv, nil
		}
		if errors.Is(err, errNoHeader) {
			setAsideSessionFile(e.SessionFile, err, log)
		} else {
			log.Warn("session file cannot be resumed; starting a new session", "file", e.SessionFile, "err", err)
		}
	} else if ok && e.AgentName != s.agent {
		log.Info("session key now used by another agent; starting a new session", "previousAgent", e.AgentName)
	}
	return m.create(ctx, s.agent, s.key)
}

// create starts a new session file for agent and key and points the map
// at it.
func (m *Manager) create(ctx context.Context, agent, key string) (*conversation, error) {
	log := m.log.With("agent", agent, "session", key)
	conv, err := createConversation(filepath.Join(m.dir, agent), agent, key, log)
	if err != nil {
		return nil, fmt.Errorf("agent %q session %q: %w", agent, key, err)
	}
	m.mu.Lock()
	old, had := m.index[key]
	m.index[key] = mapEntry{AgentName: agent, SessionFile: conv.path, CreatedAt: isoTime(conv.createdAt)}
	err = m.saveIndexLocked()
	if err != nil {
		if had {
			m.index[key] = old
		} else {
			delete(m.index, key)
		}
	}
	m.mu.Unlock()
	if err != nil {
		conv.close()
		os.Remove(conv.path)
		return nil, fmt.Errorf("agent: save session map: %w", err)
	}
	log.Info("session created", "file", conv.path)
	if m.hooks != nil {
		m.hooks.SessionCreated(ctx, agent, key)
	}
	return conv, nil
}

// NewSession starts a new session file for agent and sessionKey ("" means
// DefaultSessionKey) and points the session map at it; the old file stays.
// A prompt running in the session finishes in the old file; the next one
// uses the new.
func (m *Manager) NewSession(ctx context.Context, agent, sessionKey string) error {
	if m.closed.Load() {
		return ErrClosed
	}
	if sessionKey == "" {
		sessionKey = DefaultSessionKey(agent)
	}
	if err := checkKey(sessionKey); err != nil {
		return err
	}
	if _, err := m.setup(ctx, agent); err != nil {
		return err
	}
	conv, err := m.create(ctx, agent, sessionKey)
	if err != nil {
		return err
	}
	s := m.session(agent, sessionKey)
	s.mu.Lock()
	old := s.conv
	s.conv = conv
	s.steer = nil // meant for the old session
	if old != nil && old != s.busy {
		old.close()
	}
	if m.closed.Load() { // Close may have closed the files already
		conv.close()
	}
	s.mu.Unlock()
	return nil
}

// Compact summarises the older part of a session now, whatever its size
// (the /compact command). It waits for the session's turn. It returns nil
// when there was nothing to summarise.
func (m *Manager) Compact(ctx context.Context, agent, sessionKey string) (*Compaction, error) {
	if sessionKey == "" {
		sessionKey = DefaultSessionKey(agent)
	}
	var c *Compaction
	err := m.withTurn(ctx, agent, sessionKey, func(pctx context.Context, setup *AgentSetup, conv *conversation) (err error) {
		comp := &Compactor{Model: setup.Model, Threshold: setup.CompactionThreshold}
		c, err = conv.compact(pctx, comp, "", nil, true, nil)
		return err
	})
	return c, err
}

// Sessions lists the sessions of agent from the session map, the most
// recently updated first. UpdatedAt is the session file's modification
// time.
func (m *Manager) Sessions(ctx context.Context, agent string) ([]proto.SessionInfo, error) {
	if _, err := m.setup(ctx, agent); err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.mergeDiskLocked()
	var out []proto.SessionInfo
	for key, e := range m.index {
		if e.AgentName == agent {
			out = append(out, proto.SessionInfo{ID: key, File: e.SessionFile, CreatedAt: e.CreatedAt, UpdatedAt: e.CreatedAt,
				SessionFile: e.SessionFile, SessionID: sessionID(e.SessionFile), AgentName: agent})
		}
	}
	m.mu.Unlock()
	for i := range out {
		// The file's time comes from a coarser clock than createdAt's.
		if fi, err := os.Stat(out[i].File); err == nil && fi.ModTime().UnixMilli() > millis(out[i].CreatedAt) {
			out[i].UpdatedAt = isoTime(fi.ModTime())
		}
		out[i].FirstMessage = firstMessage(out[i].File)
	}
	slices.SortFunc(out, func(a, b proto.SessionInfo) int {
		if c := strings.Compare(b.UpdatedAt, a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if out == nil {
		out = []proto.SessionInfo{}
	}
	return out, nil
}

// Abort cancels the prompt running in the session, if any, and reports
// whether there was one. Prompts waiting for their turn are not affected;
// steering messages not yet taken (Steer) are dropped, as pi's terminal
// takes them back from the agent when its user aborts.
func (m *Manager) Abort(agent, sessionKey string) bool {
	s := m.loaded(agent, sessionKey)
	if s == nil {
		return false
	}
	s.mu.Lock()
	if n := len(s.steer); n > 0 {
		s.steer = nil
		m.log.Info("steering messages dropped by an abort", "agent", s.agent, "session", s.key, "dropped", n)
	}
	s.mu.Unlock()
	return s.abort(errAbortRequested)
}

// Bounds on the steering messages waiting in one session.
const (
	maxSteerQueue      = 32
	maxSteerQueueBytes = MaxMessageBytes
)

// Steer queues message for the session sessionKey of agent ("" means the
// agent whose prompt runs under the key, else the one the session map
// names for it), as pi's steer does (the original Beige's steerSession):
// the running prompt takes it after its current tool call finishes, skips
// the reply's remaining calls (each gets the result SkippedForSteering),
// records it as a user message and calls the model again; several are taken
// one at a time, in order. The prePrompt hooks see it when it is taken and
// may rewrite or refuse it (a refused one is left out, logged).
//
// When no prompt runs, the message waits, as in pi, and the next prompt of
// the session takes it right after its own message (NewSession drops the
// waiting ones); with runningOnly it is refused instead (false): true then
// means the running prompt will take it. It reports false, and does
// nothing, when no such session exists. The message is checked like a
// prompt's (empty, MaxMessageBytes).
func (m *Manager) Steer(ctx context.Context, agent, sessionKey, message string, runningOnly bool) (bool, error) {
	if m.closed.Load() {
		return false, ErrClosed
	}
	if sessionKey == "" {
		if agent == "" {
			return false, proto.Errorf(http.StatusBadRequest, "session key is empty")
		}
		sessionKey = DefaultSessionKey(agent)
	}
	if err := checkKey(sessionKey); err != nil {
		return false, err
	}
	if err := checkMessage(message); err != nil {
		return false, err
	}
	agent = m.steeredAgent(agent, sessionKey)
	if agent == "" {
		return false, nil
	}
	s := m.session(agent, sessionKey)
	s.mu.Lock()
	defer s.mu.Unlock()
	if runningOnly && !s.steerable {
		return false, nil
	}
	size := len(message)
	for _, q := range s.steer {
		size += len(q)
	}
	if len(s.steer) >= maxSteerQueue || size > maxSteerQueueBytes {
		return false, proto.Errorf(http.StatusTooManyRequests, "too many steering messages wait in session %q (at most %d, %d bytes)", sessionKey, maxSteerQueue, maxSteerQueueBytes)
	}
	s.steer = append(s.steer, message)
	m.log.Info("steering message queued", "agent", agent, "session", sessionKey, "running", s.busy != nil, "queued", len(s.steer))
	return true, nil
}

// steering is the Loop's Steering of a prompt in session s: its queued
// messages, each through the prePrompt hooks.
func (m *Manager) steering(ctx context.Context, s *session, agent, sessionKey string) func(bool) (llm.Message, bool) {
	return func(last bool) (llm.Message, bool) {
		for {
			text, ok := s.takeSteering(last)
			if !ok {
				return llm.Message{}, false
			}
			if m.hooks != nil {
				var err error
				if text, err = m.hooks.PrePrompt(ctx, agent, sessionKey, text); err == nil {
					err = checkMessage(text)
				}
				if err != nil {
					m.log.Warn("steering message refused by a prePrompt hook; left out", "agent", agent, "session", sessionKey, "err", err)
					continue
				}
			}
			return llm.UserText(text), true
		}
	}
}

// steeredAgent returns the agent of the session a steering message is for:
// the one given, if it has the session; else the agent whose prompt runs
// under the key, else the one the session map names; "" for none.
func (m *Manager) steeredAgent(agent, key string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	running := ""
	for _, s := range m.sessions {
		if s.key != key || (agent != "" && s.agent != agent) {
			continue
		}
		s.mu.Lock()
		busy := s.busy != nil
		s.mu.Unlock()
		if busy && (running == "" || s.agent < running) {
			running = s.agent
		}
	}
	if running != "" {
		return running
	}
	e, ok := m.entryLocked(key)
	if ok && (agent == "" || e.AgentName == agent) {
		return e.AgentName
	}
	return ""
}

// Dispose drops the session's conversation from memory, so that the next
// prompt reads it again from its session file (after a plugin changed the
// session's model or agent). A running prompt keeps its conversation until
// it ends. It reports whether the session was in memory.
func (m *Manager) Dispose(agent, sessionKey string) bool {
	s := m.loaded(agent, sessionKey)
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	conv := s.conv
	if conv == nil {
		return false
	}
	s.conv = nil
	if s.busy != conv {
		if err := conv.close(); err != nil {
			m.log.Warn("close session file", "file", conv.path, "err", err)
		}
	}
	return true
}

// Shutdown stops taking prompts and waits for the running ones (and those
// waiting their turn) to finish; if ctx ends first, it aborts them and
// waits for them to stop. Then it closes the session files.
func (m *Manager) Shutdown(ctx context.Context) error {
	m.closed.Store(true)
	done := make(chan struct{})
	go func() { m.running.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		m.abortAll()
		<-done
	}
	m.closeFiles()
	return err
}

// Close aborts the running prompts, waits for them to stop and closes the
// session files. Prompts after Close (or Shutdown) return ErrClosed.
func (m *Manager) Close() error {
	m.closed.Store(true)
	m.abortAll()
	m.running.Wait()
	m.closeFiles()
	return nil
}

func (m *Manager) abortAll() {
	m.mu.Lock()
	ss := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		ss = append(ss, s)
	}
	m.mu.Unlock()
	for _, s := range ss {
		s.abort(ErrClosed)
	}
}

func (m *Manager) closeFiles() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.sessions {
		s.mu.Lock()
		if s.conv != nil {
			if err := s.conv.close(); err != nil {
				m.log.Warn("close session file", "file", s.conv.path, "err", err)
			}
		}
		s.mu.Unlock()
	}
}

// systemPrompt renders the agent's system prompt; a problem with AGENTS.md
// is logged and the prompt goes on without it.
func (m *Manager) systemPrompt(agent, channel string, s *AgentSetup) string {
	in := PromptInput{AgentName: agent, Channel: channel, ToolContext: s.ToolContext, SkillContext: s.SkillContext}
	if s.AgentsMD != nil {
		md, err := s.AgentsMD()
		if err != nil {
			m.log.Warn("AGENTS.md not read", "agent", agent, "err", err)
		}
		in.AgentsMD = md
	}
	p, err := SystemPrompt(in)
	if err != nil { // the template is fixed: cannot happen
		m.log.Error("system prompt", "agent", agent, "err", err)
	}
	return p
}
