package plugin

// MergeConfig merges plugin configurations, later layers winning:
// defaults (the manifest's defaultConfig) < pluginConfig
// (plugins.<p>.config) < agentOverride (agents.<a>.pluginConfigs.<p>).
// Objects are merged key by key, recursively; arrays and scalars are
// replaced whole, and an explicit null replaces too. The result is a deep
// copy: changing it changes none of the inputs. It is never nil.
func MergeConfig(defaults, pluginConfig, agentOverride map[string]any) map[string]any {
	out := map[string]any{}
	for _, layer := range []map[string]any{defaults, pluginConfig, agentOverride} {
		mergeInto(out, layer)
	}
	return out
}

func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				mergeInto(dv, sv)
				continue
			}
		}
		dst[k] = deepCopy(v)
	}
}

// deepCopy copies the maps and slices of a decoded JSON value.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, e := range v {
			s[i] = deepCopy(e)
		}
		return s
	case []string:
		return append([]string(nil), v...)
	}
	return v
}
