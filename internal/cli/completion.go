package cli

import (
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/beige-dev/beige/internal/agent"
	"github.com/beige-dev/beige/internal/config"
)

// Shell completion (`beige completion bash|zsh|fish|powershell`) completes
// agent names from the config and session keys from $BEIGE_HOME's session
// maps. Completion reads those files and nothing else: it starts nothing,
// talks to no gateway, runs no setup and prints nothing when they are
// missing or broken.

// registerCompletions gives every command in the tree under root that
// takes an agent or a session key (a flag named "agent" or "session") its
// completion, so that a command added later gets it by naming its flag so.
func (a *app) registerCompletions(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Flags().Lookup("agent") != nil {
			_ = c.RegisterFlagCompletionFunc("agent", a.completeAgents) // an error: already registered
		}
		if c.Flags().Lookup("session") != nil {
			_ = c.RegisterFlagCompletionFunc("session", a.completeSessions)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// completeAgentArg completes a command's one positional agent name.
func (a *app) completeAgentArg(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.completeAgents(cmd, args, toComplete)
}

// completeAgents lists the config's agents that start with toComplete.
func (a *app) completeAgents(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return a.completeNames("agents", toComplete)
}

// completePluginArg completes a command's one positional plugin name
// with the config's plugins.
func (a *app) completePluginArg(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.completeNames("plugins", toComplete)
}

// completeNames lists the names under section of the config -c names (or
// the default one) that start with toComplete; none when it cannot be
// read.
func (a *app) completeNames(section, toComplete string) ([]string, cobra.ShellCompDirective) {
	var out []string
	if path, err := a.config(); err == nil {
		names, _ := config.Names(path, section)
		for _, name := range names {
			if strings.HasPrefix(name, toComplete) {
				out = append(out, name)
			}
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeSessions lists the session keys that start with toComplete,
// with their agent as the description; with --agent given (or a
// positional agent), only that agent's.
func (a *app) completeSessions(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	var agentName string
	if f := cmd.Flags().Lookup("agent"); f != nil && f.Changed {
		agentName = f.Value.String()
	}
	h, err := a.home()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	sessions := readSessionKeys(h.SessionsDir())
	var out []string
	for _, key := range slices.Sorted(maps.Keys(sessions)) {
		if agentName != "" && sessions[key] != agentName {
			continue
		}
		if strings.HasPrefix(key, toComplete) {
			out = append(out, key+"\t"+sessions[key])
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// maxSessionMap bounds how much of a session map completion reads.
const maxSessionMap = 16 << 20

// readSessionKeys reads the session maps under dir: the gateway's
// (dir/session-map.json) and those of other clients' session folders
// (dir/<folder>/session-map.json, e.g. the terminal's sessions/tui).
// It returns session key → agent; unreadable maps are skipped.
func readSessionKeys(dir string) map[string]string {
	out := map[string]string{}
	paths := []string{filepath.Join(dir, agent.SessionMapFile)}
	if more, err := filepath.Glob(filepath.Join(dir, "*", agent.SessionMapFile)); err == nil {
		paths = append(paths, more...)
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(f, maxSessionMap))
		f.Close()
		if err != nil {
			continue
		}
		var m map[string]struct {
			AgentName string `json:"agentName"`
		}
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		for key, e := range m {
			if key != "" && !strings.ContainsAny(key, "\t\n") {
				out[key] = e.AgentName
			}
		}
	}
	return out
}
