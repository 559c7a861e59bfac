package plugin

import (
	"reflect"
	"testing"
)

func TestMergeConfig(t *testing.T) {
	tests := []struct {
		name                  string
		defaults, plugin, agt map[string]any
		want                  map[string]any
	}{
		{"all nil", nil, nil, nil, map[string]any{}},
		{"defaults only", map[string]any{"a": 1.0}, nil, nil, map[string]any{"a": 1.0}},
		{"precedence", map[string]any{"a": 1.0, "b": 1.0, "c": 1.0}, map[string]any{"b": 2.0, "c": 2.0}, map[string]any{"c": 3.0},
			map[string]any{"a": 1.0, "b": 2.0, "c": 3.0}},
		{"objects merge deeply",
			map[string]any{"o": map[string]any{"x": 1.0, "deep": map[string]any{"p": "d", "q": "d"}}},
			map[string]any{"o": map[string]any{"y": 2.0, "deep": map[string]any{"q": "p"}}},
			map[string]any{"o": map[string]any{"deep": map[string]any{"r": "a"}}},
			map[string]any{"o": map[string]any{"x": 1.0, "y": 2.0, "deep": map[string]any{"p": "d", "q": "p", "r": "a"}}}},
		{"arrays replace", map[string]any{"l": []any{"a", "b"}}, map[string]any{"l": []any{"c"}}, nil,
			map[string]any{"l": []any{"c"}}},
		{"agent array replaces", nil, map[string]any{"allowForcePush": []any{"main"}}, map[string]any{"allowForcePush": []any{"del"}},
			map[string]any{"allowForcePush": []any{"del"}}},
		{"empty array replaces", map[string]any{"l": []any{"a"}}, nil, map[string]any{"l": []any{}},
			map[string]any{"l": []any{}}},
		{"object replaces scalar", map[string]any{"v": "s"}, map[string]any{"v": map[string]any{"k": true}}, nil,
			map[string]any{"v": map[string]any{"k": true}}},
		{"scalar replaces object", map[string]any{"v": map[string]any{"k": true}}, nil, map[string]any{"v": false},
			map[string]any{"v": false}},
		{"null replaces", map[string]any{"v": "x"}, map[string]any{"v": nil}, nil, map[string]any{"v": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MergeConfig(tt.defaults, tt.plugin, tt.agt)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestMergeConfigCopies(t *testing.T) {
	inner := map[string]any{"k": "v"}
	list := []any{"a", map[string]any{"m": 1.0}}
	defaults := map[string]any{"o": inner, "l": list}
	got := MergeConfig(defaults, nil, nil)
	got["o"].(map[string]any)["k"] = "changed"
	got["l"].([]any)[1].(map[string]any)["m"] = 2.0
	got["new"] = true
	if inner["k"] != "v" || list[1].(map[string]any)["m"] != 1.0 || len(defaults) != 2 {
		t.Errorf("MergeConfig shares memory with its input: %v %v %v", inner, list, defaults)
	}
	// Merging into the copy of a nested object must not write through.
	plugin := map[string]any{"o": map[string]any{"k2": "x"}}
	_ = MergeConfig(defaults, plugin, nil)
	if len(inner) != 1 {
		t.Errorf("nested defaults changed: %v", inner)
	}
}
