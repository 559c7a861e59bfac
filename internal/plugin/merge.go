package plugin

import "github.com/beige-dev/beige/internal/config"

// MergeConfig merges plugin configurations, later layers winning:
// defaults (the manifest's defaultConfig) < pluginConfig
// (plugins.<p>.config) < agentOverride (agents.<a>.pluginConfigs.<p>).
// It is config.MergePluginConfig, the merge config validation checks
// against the manifest's configSchema, so a plugin gets what was checked.
func MergeConfig(defaults, pluginConfig, agentOverride map[string]any) map[string]any {
	return config.MergePluginConfig(defaults, pluginConfig, agentOverride)
}
