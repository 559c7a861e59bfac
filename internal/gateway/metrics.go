package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/httpapi"
	"github.com/beige-dev/beige/internal/metrics"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/tools"
)

// Metrics returns the gateway's metrics.
func (g *Gateway) Metrics() *metrics.Metrics { return g.metrics }

// MetricsAddr is the address of the gateway.metrics.listen listener; ""
// when there is none.
func (g *Gateway) MetricsAddr() string {
	if g.metricsLn == nil {
		return ""
	}
	return g.metricsLn.Addr().String()
}

// setupMetrics bounds the metrics' label values by this config's names
// and points the gauges at this gateway (a restart points them at the new
// one; the counters carry on).
func (g *Gateway) setupMetrics() {
	m := g.metrics
	cfg := g.cfg
	var agents, toolNames, providers, models []string
	toolNames = append(toolNames, tools.ToolRead, tools.ToolWrite, tools.ToolPatch, tools.ToolExec)
	for _, p := range cfg.Plugins {
		if p != nil && p.Manifest != nil {
			toolNames = append(toolNames, p.Manifest.Provides.Tools...)
		}
	}
	for name, a := range cfg.Agents {
		agents = append(agents, name)
		if a == nil {
			continue
		}
		toolNames = append(toolNames, a.Tools...)
		for _, ref := range append([]config.ModelRef{a.Model}, a.FallbackModels...) {
			models = append(models, ref.Provider+"/"+ref.Model)
		}
	}
	for name, p := range cfg.LLM.Providers {
		providers = append(providers, name)
		if p != nil {
			for _, mi := range p.Models {
				models = append(models, name+"/"+mi.ID)
			}
		}
	}
	slices.Sort(toolNames)
	m.SetBounds(agents, slices.Compact(toolNames), providers, models)
	m.SetCooldowns(g.health.ActiveCooldowns)
	mgr := g.manager
	m.SetSessions(func() int { s, _ := mgr.Stats(); return s })
	m.SetPrompts(func() int { _, p := mgr.Stats(); return p })
}

// listenMetrics opens gateway.metrics.listen, when set: a listener that
// serves only GET /metrics, with the API's guards and token.
func (g *Gateway) listenMetrics() error {
	addr := g.cfg.Gateway.Metrics.Listen
	if addr == "" {
		return nil
	}
	if host, _, err := net.SplitHostPort(addr); err == nil && g.cfg.Gateway.AuthToken == "" {
		if ip := net.ParseIP(host); !(host == "localhost" || ip != nil && ip.IsLoopback()) {
			g.log.Warn("gateway.metrics.listen is beyond loopback and gateway.authToken is not set: whoever reaches it reads the metrics", "listen", addr)
		}
	}
	ln, err := listen(addr)
	if err != nil {
		return fmt.Errorf("gateway.metrics.listen: %w", err)
	}
	ms := httpapi.NewMetrics(httpapi.Options{Host: metricsHost(addr), AuthToken: g.cfg.Gateway.AuthToken.Reveal(),
		Logger: g.log.With("component", "metrics"), Metrics: g.metrics})
	srv, lim := ms.HTTPServer(ln, httpapi.ServeOptions{MaxConns: 32, BaseContext: g.baseCtx,
		ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelWarn)})
	g.metricsSrv, g.metricsLn = srv, ln
	go func() {
		if err := srv.Serve(lim); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Error("metrics server stopped", "err", err)
		}
	}()
	g.log.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return nil
}

// metricsHost is the host the metrics listener accepts in Host headers
// besides loopback: the one it listens on (any IP address when that is
// every address).
func metricsHost(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return "0.0.0.0"
	}
	return host
}

// stats is the headline of /api/health, for `beige gateway status`.
func (g *Gateway) stats() *proto.HealthStats {
	s := g.metrics.Stats()
	return &proto.HealthStats{ToolCalls: s.ToolCalls, ToolErrors: s.ToolErrors, Cooldowns: s.Cooldowns, AuditHead: s.AuditHead}
}
