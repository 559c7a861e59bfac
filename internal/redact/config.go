package redact

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/beige-dev/beige/internal/config"
)

// FromConfig returns the Redactor of cfg's secrets: every provider's apiKey
// (llm.providers.<name>.apiKey), gateway.authToken, and every string value in
// plugins.<name>.config and agents.<name>.pluginConfigs.<plugin> whose key
// (at any depth) looks secret: contains token, key, secret, password or
// passwd, in any case; and every ${VAR}-interpolated string in those plugin
// configs, named by its JSON path. Nil when there is none of MinLen bytes or more.
func FromConfig(cfg *config.Config) *Redactor {
	if cfg == nil {
		return nil
	}
	var ss []Secret
	for _, name := range sortedKeys(cfg.LLM.Providers) {
		if p := cfg.LLM.Providers[name]; p != nil {
			ss = append(ss, Secret{"llm.providers." + name + ".apiKey", p.APIKey.Reveal()})
		}
	}
	ss = append(ss, Secret{"gateway.authToken", cfg.Gateway.AuthToken.Reveal()})
	for _, name := range sortedKeys(cfg.Plugins) {
		if p := cfg.Plugins[name]; p != nil {
			ss = walk(ss, "plugins."+name+".config", p.Config, false)
		}
	}
	for _, an := range sortedKeys(cfg.Agents) {
		a := cfg.Agents[an]
		if a == nil {
			continue
		}
		for _, pn := range sortedKeys(a.PluginConfigs) {
			ss = walk(ss, "agents."+an+".pluginConfigs."+pn, a.PluginConfigs[pn], false)
		}
		// Credentials the egress proxy injects: the whole header value
		// and, on its own, each word of it long enough (the token of
		// "Bearer <token>").
		for i, c := range a.Sandbox.Egress.Credentials {
			path := fmt.Sprintf("agents.%s.sandbox.egress.credentials.%d.value", an, i)
			ss = append(ss, Secret{path, c.Value})
			if words := strings.Fields(c.Value); len(words) > 1 {
				for _, w := range words {
					ss = append(ss, Secret{path, w})
				}
			}
		}
	}
	// Any ${VAR}-interpolated value in a plugin's config: what is kept in
	// the environment rather than the file is taken to be secret.
	for _, path := range sortedKeys(cfg.Interpolated) {
		if strings.HasPrefix(path, "plugins.") && strings.Contains(path, ".config") ||
			strings.HasPrefix(path, "agents.") && strings.Contains(path, ".pluginConfigs") {
			ss = append(ss, Secret{path, cfg.Interpolated[path]})
		}
	}
	return New(ss)
}

// walk adds the string values below v whose own key, or an enclosing key,
// looks secret.
func walk(ss []Secret, path string, v any, secret bool) []Secret {
	switch v := v.(type) {
	case string:
		if secret {
			ss = append(ss, Secret{path, v})
		}
	case map[string]any:
		for _, k := range sortedKeys(v) {
			ss = walk(ss, path+"."+k, v[k], secret || secretKey(k))
		}
	case []any:
		for i, e := range v {
			ss = walk(ss, path+"."+strconv.Itoa(i), e, secret)
		}
	}
	return ss
}

func secretKey(k string) bool {
	k = strings.ToLower(k)
	for _, w := range []string{"token", "key", "secret", "password", "passwd"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
