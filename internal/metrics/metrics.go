// Package metrics owns the gateway's Prometheus metrics: one private
// registry per gateway (never the global default one, so that a test can run
// several gateways in one process), every metric the gateway exports, and
// the small API the components call to count what they do.
//
// Label values are bounded: agent, tool, provider and model names are kept
// only when the config names them (SetBounds); any other value, which a
// client or an agent could choose freely (a tool that does not exist, a
// model a session asked for), is counted as "_other". No metric carries a
// session key, a path or anything else without a bound.
//
// Every method is safe on a nil *Metrics (it does nothing), so that a
// component built without metrics needs no checks.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Other is the label value of a name the config does not know.
const Other = "_other"

// Values of the decision label of beige_tool_calls_total.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
)

// Values of the outcome labels.
const (
	OutcomeOK       = "ok"       // the call or attempt succeeded
	OutcomeError    = "error"    // it ran and failed (a tool's error, a provider's error)
	OutcomeDenied   = "denied"   // a tool call the policy refused: it did not run
	OutcomeCanceled = "canceled" // the caller went away or the gateway stopped
)

// Directions of beige_llm_tokens_total.
const (
	TokensInput  = "input"
	TokensOutput = "output"
)

// Buckets of the duration histograms, in seconds: tool calls and HTTP
// requests span milliseconds (a read) to minutes (a long exec, a prompt).
var (
	durationBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	// An LLM attempt's first token comes after 0.2 to 30 s, its end after
	// up to the idle timeout.
	llmBuckets = []float64{.1, .25, .5, 1, 2, 4, 8, 15, 30, 60, 120, 300, 600}
	// Waits for a concurrency slot: none usually, or as long as a call.
	waitBuckets = []float64{.001, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300}
)

// Metrics is one gateway's metrics.
type Metrics struct {
	reg *prometheus.Registry

	toolCalls    *prometheus.CounterVec
	toolDuration *prometheus.HistogramVec

	helperRestarts *prometheus.CounterVec
	execFallbacks  *prometheus.CounterVec

	llmAttempts  *prometheus.CounterVec
	llmTTFT      *prometheus.HistogramVec
	llmDuration  *prometheus.HistogramVec
	llmTokens    *prometheus.CounterVec
	queueWait    *prometheus.HistogramVec
	queueDepth   *prometheus.GaugeVec
	cooldownsFn  atomic.Pointer[func() int]
	sessionsFn   atomic.Pointer[func() int]
	promptsFn    atomic.Pointer[func() int]
	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec

	auditRecords prometheus.Counter
	auditHead    prometheus.Gauge
	auditHeadSet atomic.Bool

	egressConns *prometheus.CounterVec

	// Headline figures for `beige gateway status` (Stats).
	calls, errors atomic.Int64
	auditHeadSeq  atomic.Int64

	mu    sync.RWMutex
	known bounds
}

// bounds are the label values the config allows.
type bounds struct {
	agents, tools, providers map[string]bool
	models                   map[string]bool // "provider/model"
}

// New returns the metrics of one gateway on a registry of their own, with
// the Go runtime and process collectors.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "beige_tool_calls_total",
		Help: "Tool calls (core and plugin tools) by agent, tool, policy decision and outcome (ok, error, denied, canceled).",
	}, []string{"agent", "tool", "decision", "outcome"})
	m.toolDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "beige_tool_call_duration_seconds",
		Help:    "Duration of tool calls, from the policy check to the result, by agent and tool.",
		Buckets: durationBuckets,
	}, []string{"agent", "tool"})
	m.helperRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "beige_sandbox_helper_restarts_total",
		Help: "Restarts of the in-sandbox helper (beige-sandbox serve), by agent.",
	}, []string{"agent"})
	m.execFallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "beige_sandbox_exec_fallbacks_total",
		Help: "Tool calls run by a per-call exec in the sandbox because the helper was not available, by agent.",
	}, []string{"agent"})
	m.llmAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "beige_llm_attempts_total",
		Help: "Model requests (each attempt of the fallback chain) by provider, model and outcome (ok, error, canceled).",
	}, []string{"provider", "model", "outcome"})
	m.llmTTFT = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "beige_llm_time_to_first_token_seconds",
		Help:    "Time from sending a model request to the first text, thinking or tool call it streams, by provider and model.",
		Buckets: llmBuckets,
	}, []string{"provider", "model"})
	m.llmDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "beige_llm_attempt_duration_seconds",
		Help:    "Duration of model requests, to the end of the stream, by provider and model.",
		Buckets: llmBuckets,
	}, []string{"provider", "model"})
	m.llmTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "beige_llm_tokens_total",
		Help: "Tokens the providers reported, by provider, model and direction (input, output).",
	}, []string{"provider", "model", "direction"})
	m.queueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "beige_llm_queue_wait_seconds",
		Help:    "Time a model request waited for a slot of its provider's concurrency limit.",
		Buckets: waitBuckets,
	}, []string{"provider"})
	m.queueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "beige_llm_queue_depth",
		Help: "Model requests waiting for a slot of their provider's concurrency limit.",
	}, []string{"provider"})
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "beige_http_requests_total",
		Help: `HTTP API requests by route (the API's route pattern; "none" for requests refused before routing) and status code.`,
	}, []string{"route", "status"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "beige_http_request_duration_seconds",
		Help:    "Duration of HTTP API requests by route.",
		Buckets: durationBuckets,
	}, []string{"route"})
	m.auditRecords = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "beige_audit_records_total",
		Help: "Records written to the audit log.",
	})
	m.auditHead = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "beige_audit_head_sequence",
		Help: "Sequence number of the last record of the audit chain (data/audit-head).",
	})
	m.egressConns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "beige_egress_connections_total",
		Help: "Connections through the agents' egress proxies by agent and decision (allow, deny).",
	}, []string{"agent", "decision"})
	m.reg.MustRegister(m.toolCalls, m.toolDuration, m.helperRestarts, m.execFallbacks,
		m.llmAttempts, m.llmTTFT, m.llmDuration, m.llmTokens, m.queueWait, m.queueDepth,
		m.httpRequests, m.httpDuration, m.auditRecords, m.auditHead, m.egressConns,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "beige_llm_cooldowns_active",
			Help: "Models in cooldown after failures (skipped by the fallback chain until it ends).",
		}, func() float64 { return float64(call(&m.cooldownsFn)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "beige_sessions_active",
			Help: "Sessions open in the gateway.",
		}, func() float64 { return float64(call(&m.sessionsFn)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "beige_prompts_active",
			Help: "Prompts running now.",
		}, func() float64 { return float64(call(&m.promptsFn)) }),
	)
	return m
}

func call(p *atomic.Pointer[func() int]) int {
	if f := p.Load(); f != nil {
		return (*f)()
	}
	return 0
}

// Registry is the registry the metrics are registered on.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text exposition format.
// It does no authentication: mount it behind the API's guard.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// SetBounds sets the names the config knows: agents, tools (core and
// plugin tools), providers and models ("provider/model"). Label values
// outside them are counted as Other. It is called at every (re)start.
func (m *Metrics) SetBounds(agents, tools, providers, models []string) {
	if m == nil {
		return
	}
	set := func(l []string) map[string]bool {
		s := make(map[string]bool, len(l))
		for _, v := range l {
			s[v] = true
		}
		return s
	}
	m.mu.Lock()
	m.known = bounds{agents: set(agents), tools: set(tools), providers: set(providers), models: set(models)}
	m.mu.Unlock()
}

func (m *Metrics) bound(set map[string]bool, v string) string {
	if set[v] {
		return v
	}
	return Other
}

func (m *Metrics) agentTool(agent, tool string) (string, string) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.bound(m.known.agents, agent), m.bound(m.known.tools, tool)
}

func (m *Metrics) agentLabel(agent string) string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.bound(m.known.agents, agent)
}

func (m *Metrics) providerModel(provider, model string) (string, string) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p := m.bound(m.known.providers, provider)
	if p == Other || !m.known.models[provider+"/"+model] {
		return p, Other
	}
	return p, model
}

// ToolCall counts one tool call, core or plugin tool, once it is over:
// the agent, the tool, the policy's decision (DecisionAllow, DecisionDeny),
// the outcome (OutcomeOK, OutcomeError, OutcomeDenied, OutcomeCanceled) and
// how long it took. The tool pipeline calls it once per call, whatever the
// outcome; a denied call counts as an error in Stats.
func (m *Metrics) ToolCall(agent, tool, decision, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	a, t := m.agentTool(agent, tool)
	if decision != DecisionAllow {
		decision = DecisionDeny
	}
	switch outcome {
	case OutcomeOK, OutcomeError, OutcomeDenied, OutcomeCanceled:
	default:
		outcome = OutcomeError
	}
	m.toolCalls.WithLabelValues(a, t, decision, outcome).Inc()
	m.toolDuration.WithLabelValues(a, t).Observe(d.Seconds())
	m.calls.Add(1)
	if outcome != OutcomeOK {
		m.errors.Add(1)
	}
}

// HelperRestart counts a restart of an agent's in-sandbox helper.
func (m *Metrics) HelperRestart(agent string) {
	if m == nil {
		return
	}
	m.helperRestarts.WithLabelValues(m.agentLabel(agent)).Inc()
}

// ExecFallback counts a call run by a per-call exec because the agent's
// helper was not available.
func (m *Metrics) ExecFallback(agent string) {
	if m == nil {
		return
	}
	m.execFallbacks.WithLabelValues(m.agentLabel(agent)).Inc()
}

// LLMAttempt is what is known of one model request when it ends.
type LLMAttempt struct {
	Provider, Model string
	Outcome         string        // OutcomeOK, OutcomeError or OutcomeCanceled
	FirstToken      time.Duration // to the first text, thinking or tool call streamed; 0: none arrived
	Duration        time.Duration
	InputTokens     int64
	OutputTokens    int64
}

// LLM counts one model request (one attempt of the fallback chain).
func (m *Metrics) LLM(a LLMAttempt) {
	if m == nil {
		return
	}
	p, mo := m.providerModel(a.Provider, a.Model)
	switch a.Outcome {
	case OutcomeOK, OutcomeError, OutcomeCanceled:
	default:
		a.Outcome = OutcomeError
	}
	m.llmAttempts.WithLabelValues(p, mo, a.Outcome).Inc()
	if a.FirstToken > 0 {
		m.llmTTFT.WithLabelValues(p, mo).Observe(a.FirstToken.Seconds())
	}
	m.llmDuration.WithLabelValues(p, mo).Observe(a.Duration.Seconds())
	if a.InputTokens > 0 {
		m.llmTokens.WithLabelValues(p, mo, TokensInput).Add(float64(a.InputTokens))
	}
	if a.OutputTokens > 0 {
		m.llmTokens.WithLabelValues(p, mo, TokensOutput).Add(float64(a.OutputTokens))
	}
}

// QueueEnter counts a model request that starts waiting for a slot of
// provider's concurrency limit; the func it returns ends the wait (call it
// once, when the slot is had or the wait given up).
func (m *Metrics) QueueEnter(provider string) func() {
	if m == nil {
		return func() {}
	}
	m.mu.RLock()
	p := m.bound(m.known.providers, provider)
	m.mu.RUnlock()
	g := m.queueDepth.WithLabelValues(p)
	g.Inc()
	start := time.Now()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.Dec()
			m.queueWait.WithLabelValues(p).Observe(time.Since(start).Seconds())
		})
	}
}

// SetCooldowns sets the func that counts the models in cooldown now.
func (m *Metrics) SetCooldowns(f func() int) {
	if m != nil {
		setFunc(&m.cooldownsFn, f)
	}
}

// SetSessions sets the func that counts the open sessions.
func (m *Metrics) SetSessions(f func() int) {
	if m != nil {
		setFunc(&m.sessionsFn, f)
	}
}

// SetPrompts sets the func that counts the prompts running now.
func (m *Metrics) SetPrompts(f func() int) {
	if m != nil {
		setFunc(&m.promptsFn, f)
	}
}

func setFunc(p *atomic.Pointer[func() int], f func() int) {
	if f == nil {
		p.Store(nil)
		return
	}
	p.Store(&f)
}

// HTTPRequest counts an HTTP API request: route is the mux pattern that
// served it ("" for a request refused before routing), never the raw path.
func (m *Metrics) HTTPRequest(route string, status int, d time.Duration) {
	if m == nil {
		return
	}
	if route == "" {
		route = "none"
	}
	if status < 100 || status > 599 {
		status = 0
	}
	m.httpRequests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.httpDuration.WithLabelValues(route).Observe(d.Seconds())
}

// AuditRecord counts one record written to the audit log.
func (m *Metrics) AuditRecord() {
	if m == nil {
		return
	}
	m.auditRecords.Inc()
}

// AuditHead sets the sequence number of the audit chain's last record
// (the chain's data/audit-head).
func (m *Metrics) AuditHead(seq int64) {
	if m == nil {
		return
	}
	m.auditHead.Set(float64(seq))
	m.auditHeadSeq.Store(seq)
	m.auditHeadSet.Store(true)
}

// EgressConnection counts one connection through an agent's egress proxy
// and the policy's decision (DecisionAllow or DecisionDeny).
func (m *Metrics) EgressConnection(agent, decision string) {
	if m == nil {
		return
	}
	if decision != DecisionAllow {
		decision = DecisionDeny
	}
	m.egressConns.WithLabelValues(m.agentLabel(agent), decision).Inc()
}

// Stats are the headline figures of `beige gateway status`, from the same
// counters as /metrics.
type Stats struct {
	ToolCalls  int64  // tool calls since the gateway started
	ToolErrors int64  // of them, those that failed or were denied
	Cooldowns  int    // models in cooldown now
	AuditHead  *int64 // the audit chain's head sequence; nil when unknown
}

// Stats returns the headline figures.
func (m *Metrics) Stats() Stats {
	if m == nil {
		return Stats{}
	}
	s := Stats{ToolCalls: m.calls.Load(), ToolErrors: m.errors.Load(), Cooldowns: call(&m.cooldownsFn)}
	if m.auditHeadSet.Load() {
		v := m.auditHeadSeq.Load()
		s.AuditHead = &v
	}
	return s
}
