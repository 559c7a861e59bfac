// Package policy decides whether an agent may use a tool. It denies by
// default: an agent may use a plugin tool only when the tool is listed in
// agents.<name>.tools; the four core tools are given to every agent.
package policy

import (
	"fmt"
	"slices"
)

// CoreTools are allowed to every agent.
var CoreTools = []string{"read", "write", "patch", "exec"}

// DeniedError is a refusal. Its message is the spec's exact text, which the
// agent sees on stderr.
type DeniedError struct {
	Agent, Tool string
	Reason      string // empty for the policy's own denial; a hook's reason otherwise
}

func (e *DeniedError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("Permission denied: tool '%s' blocked for agent '%s': %s", e.Tool, e.Agent, e.Reason)
	}
	return fmt.Sprintf("Permission denied: tool '%s' not allowed for agent '%s'", e.Tool, e.Agent)
}

// Engine holds every agent's allowed tools. It is immutable; a config
// reload builds a new one.
type Engine struct {
	allowed map[string][]string
}

// New returns an engine for the given agent -> tools lists.
func New(tools map[string][]string) *Engine {
	e := &Engine{allowed: make(map[string][]string, len(tools))}
	for a, ts := range tools {
		e.allowed[a] = slices.Clone(ts)
	}
	return e
}

// Check returns nil when agent may use tool, else a *DeniedError.
func (e *Engine) Check(agent, tool string) error {
	if slices.Contains(CoreTools, tool) {
		if _, ok := e.allowed[agent]; ok {
			return nil
		}
	} else if slices.Contains(e.allowed[agent], tool) {
		return nil
	}
	return &DeniedError{Agent: agent, Tool: tool}
}
