// Package approval holds tool calls that match an agent's "ask" rules
// until a human answers on a channel attached to the session (the web
// console, Telegram, the terminal client).
//
// The [Broker] keeps the pending requests, each with a random id. The first
// answer wins; later ones get [ErrNotPending]. No answer within the rule's
// timeout denies. "always" approves the call and every later call of the
// same agent and session that the same rule matches, for as long as the
// gateway runs (memory only). Channels [Broker.Subscribe] to hear of new
// and resolved requests.
package approval

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Decision is an answer's verdict.
type Decision string

// Values of Decision (and of the API's "decision" field).
const (
	Approve Decision = "approve"
	Deny    Decision = "deny"
	Always  Decision = "always" // approve, and stop asking for this rule in this session
)

// ParseDecision checks an answer's decision.
func ParseDecision(s string) (Decision, error) {
	switch d := Decision(s); d {
	case Approve, Deny, Always:
		return d, nil
	}
	return "", fmt.Errorf("unknown decision %q (want approve, deny or always)", s)
}

// Rules are one agent's ask rules (config.Approval).
type Rules struct {
	Exec    []string
	Tools   []string
	Egress  []string
	Timeout time.Duration
}

// EgressTool is the Tool of a request for a connection through the egress
// proxy; its Args are the "host:port" and the method (CONNECT, GET, …).
const EgressTool = "egress"

// MatchEgress returns the first egress rule that matches a connection to
// host (a lower-case name or an address) and port: a pattern with a ":"
// matches "host:port", where an IPv6 host is in brackets ("[fd00::1]:443",
// "[fd00::*]:*"); any other pattern matches the host alone. Patterns are
// compared in lower case. The rule comes back as "egress:<pattern>".
func (r Rules) MatchEgress(host string, port int) (string, bool) {
	hp := host
	if strings.Contains(host, ":") {
		hp = "[" + host + "]"
	}
	hp += ":" + strconv.Itoa(port)
	for _, p := range r.Egress {
		lp, s := strings.ToLower(p), host
		if strings.Contains(lp, ":") {
			s = hp
		}
		if Match(lp, s) {
			return "egress:" + p, true
		}
	}
	return "", false
}

// Match returns the first rule that matches a call of tool with args:
// exec rules against exec's command (args[0]), tools rules against
// "tool arg1 arg2 …", or that text's first words ("github" matches
// "github pr list"). The rule comes back as "exec:<pattern>" or
// "tools:<pattern>".
func (r Rules) Match(tool string, args []string) (string, bool) {
	if tool == "exec" && len(args) > 0 {
		for _, p := range r.Exec {
			if Match(p, args[0]) {
				return "exec:" + p, true
			}
		}
	}
	if len(r.Tools) == 0 {
		return "", false
	}
	line := strings.Join(append([]string{tool}, args...), " ")
	for _, p := range r.Tools {
		if Match(p, line) || Match(p+" *", line) {
			return "tools:" + p, true
		}
	}
	return "", false
}

// Request is one call that waits for an answer.
type Request struct {
	ID      string    `json:"id"`
	Agent   string    `json:"agent"`
	Session string    `json:"session,omitempty"`
	Channel string    `json:"channel,omitempty"`
	Tool    string    `json:"tool"`
	Args    []string  `json:"args"`
	Rule    string    `json:"rule"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

// Answer is someone's answer to a request.
type Answer struct {
	Decision Decision
	// By is who answered (a Telegram user, "console", the API token's
	// owner); Via the channel ("webui", "telegram", "tui", "api").
	By, Via string
}

// Who is "<by> via <via>", as the audit log and the model see it.
func (a Answer) Who() string {
	by := a.By
	if by == "" {
		by = "someone"
	}
	if a.Via == "" {
		return by
	}
	return by + " via " + a.Via
}

// Outcome is how a request ended.
type Outcome struct {
	Approved bool
	// Answer is the winning answer; zero after a timeout or when an
	// earlier "always" approved the call (Remembered).
	Answer     Answer
	TimedOut   bool
	Remembered bool
	Timeout    time.Duration // the request's timeout, for the refusal's text
}

// Event tells subscribers of a new request ("pending") or one that ended
// ("resolved", with its Outcome).
type Event struct {
	Type    string
	Request Request
	Outcome Outcome
}

// Values of Event.Type.
const (
	EventPending  = "pending"
	EventResolved = "resolved"
)

// ErrNotPending answers an answer to a request that is unknown, was
// already answered or timed out.
var ErrNotPending = errors.New("no such pending approval request (it may have been answered or timed out)")

// Options configure a Broker.
type Options struct {
	// Rules returns an agent's rules; nil means no agent has any.
	Rules func(agent string) Rules
	// Logger receives the broker's logs (default: discarded).
	Logger *slog.Logger
}

// Broker holds the pending requests. It is safe for concurrent use.
type Broker struct {
	rules func(string) Rules
	log   *slog.Logger

	mu      sync.Mutex
	pending map[string]*pending
	always  map[alwaysKey]bool
	subs    map[int]func(Event)
	nextSub int
	changed chan struct{} // closed at the next event
}

type pending struct {
	req    Request
	answer chan Answer // buffered 1; the first Answer fills it
	done   bool
}

type alwaysKey struct{ agent, session, rule string }

// New returns a Broker.
func New(opts Options) *Broker {
	b := &Broker{rules: opts.Rules, log: opts.Logger, pending: map[string]*pending{}, always: map[alwaysKey]bool{}, subs: map[int]func(Event){}, changed: make(chan struct{})}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.rules == nil {
		b.rules = func(string) Rules { return Rules{} }
	}
	return b
}

// Rule returns the rule of agent that asks for a call of tool with args,
// and the timeout of its answer.
func (b *Broker) Rule(agent, tool string, args []string) (rule string, timeout time.Duration, ok bool) {
	r := b.rules(agent)
	rule, ok = r.Match(tool, args)
	timeout = r.Timeout
	if timeout <= 0 {
		timeout = 300 * time.Second
	}
	return rule, timeout, ok
}

// EgressRule returns the rule of agent that asks for a connection to host
// and port through the egress proxy, and the timeout of its answer.
func (b *Broker) EgressRule(agent, host string, port int) (rule string, timeout time.Duration, ok bool) {
	r := b.rules(agent)
	rule, ok = r.MatchEgress(host, port)
	timeout = r.Timeout
	if timeout <= 0 {
		timeout = 300 * time.Second
	}
	return rule, timeout, ok
}

// Remembered reports whether "always" was answered for agent, session and
// rule. A call without a session is never remembered.
func (b *Broker) Remembered(agent, session, rule string) bool {
	if session == "" {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.always[alwaysKey{agent, session, rule}]
}

// EgressRemembered reports whether "always" was answered for a connection
// of agent to hostPort through the egress proxy.
func (b *Broker) EgressRemembered(agent, hostPort string) bool {
	return b.remembered(Request{Agent: agent, Tool: EgressTool, Args: []string{hostPort}})
}

// rememberKey is what an "always" answer to req approves from then on: the
// same rule in the same session for a tool call (none without a session);
// for a connection of the egress proxy, which has no session, the same
// agent and "host:port" (Args[0]), whatever the rule.
func rememberKey(req Request) (alwaysKey, bool) {
	if req.Tool == EgressTool {
		if len(req.Args) == 0 || req.Session != "" {
			return alwaysKey{}, false
		}
		return alwaysKey{agent: req.Agent, rule: EgressTool + " " + req.Args[0]}, true
	}
	if req.Session == "" {
		return alwaysKey{}, false
	}
	return alwaysKey{req.Agent, req.Session, req.Rule}, true
}

func (b *Broker) remembered(req Request) bool {
	k, ok := rememberKey(req)
	if !ok {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.always[k]
}

// Wait registers req (its ID, Created and Expires are set here), tells the
// subscribers, and waits for the first answer, timeout, or ctx. A request
// whose rule was answered "always" in its session is approved at once.
// ctx ending is an error (the call is not run).
func (b *Broker) Wait(ctx context.Context, req Request, timeout time.Duration) (Outcome, error) {
	if b.remembered(req) {
		return Outcome{Approved: true, Remembered: true, Timeout: timeout}, nil
	}
	var id [12]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Outcome{}, fmt.Errorf("approval request id: %w", err)
	}
	req.ID = hex.EncodeToString(id[:])
	req.Created = time.Now().UTC()
	req.Expires = req.Created.Add(timeout)
	req.Args = slices.Clone(req.Args)
	p := &pending{req: req, answer: make(chan Answer, 1)}
	b.mu.Lock()
	b.pending[req.ID] = p
	b.mu.Unlock()
	b.notify(Event{Type: EventPending, Request: req})
	b.log.Info("tool call waits for approval", "id", req.ID, "agent", req.Agent, "session", req.Session, "tool", req.Tool, "rule", req.Rule)

	t := time.NewTimer(timeout)
	defer t.Stop()
	out := Outcome{Timeout: timeout}
	var err error
	select {
	case a := <-p.answer:
		out.Answer = a
		out.Approved = a.Decision == Approve || a.Decision == Always
	case <-t.C:
		out.TimedOut = true
	case <-ctx.Done():
		err = ctx.Err()
	}
	b.mu.Lock()
	p.done = true
	delete(b.pending, req.ID)
	if out.Answer.Decision == "" {
		// An answer accepted (Answer returned nil) just as the timer fired
		// or ctx ended still wins: its answerer was told so.
		select {
		case a := <-p.answer:
			out = Outcome{Timeout: timeout, Answer: a, Approved: a.Decision == Approve || a.Decision == Always}
			err = nil
		default:
		}
	}
	if k, ok := rememberKey(req); ok && out.Answer.Decision == Always {
		b.always[k] = true
	}
	b.mu.Unlock()
	if err != nil {
		out.TimedOut = false
	}
	b.notify(Event{Type: EventResolved, Request: req, Outcome: out})
	return out, err
}

// Answer answers the pending request id. The first answer wins; any other
// gets ErrNotPending.
func (b *Broker) Answer(id string, a Answer) error {
	if _, err := ParseDecision(string(a.Decision)); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.pending[id]
	if !ok || p.done {
		return ErrNotPending
	}
	select {
	case p.answer <- a:
		// Taken out now so that a second answer fails even before Wait wakes.
		delete(b.pending, id)
		return nil
	default:
		return ErrNotPending
	}
}

// Pending returns the pending requests, oldest first. agent "" means all.
func (b *Broker) Pending(agent string) []Request {
	b.mu.Lock()
	out := make([]Request, 0, len(b.pending))
	for _, p := range b.pending {
		if agent == "" || p.req.Agent == agent {
			r := p.req
			r.Args = slices.Clone(r.Args)
			out = append(out, r)
		}
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(x, y Request) int {
		if c := x.Created.Compare(y.Created); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
	return out
}

// Subscribe calls f for every event until cancel is called. f runs on the
// waiting call's goroutine and must not block (hand the event to a
// buffered channel or a goroutine).
func (b *Broker) Subscribe(f func(Event)) (cancel func()) {
	b.mu.Lock()
	id := b.nextSub
	b.nextSub++
	b.subs[id] = f
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		delete(b.subs, id)
		b.mu.Unlock()
	}
}

// Changed returns a channel that is closed when a request is added or
// ends (ask again after each).
func (b *Broker) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

func (b *Broker) notify(e Event) {
	b.mu.Lock()
	close(b.changed)
	b.changed = make(chan struct{})
	fs := make([]func(Event), 0, len(b.subs))
	for _, f := range b.subs {
		fs = append(fs, f)
	}
	b.mu.Unlock()
	for _, f := range fs {
		f(e)
	}
}
