package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/titanous/json5"

	"github.com/beige-dev/beige/internal/home"
)

func loadSchema(t *testing.T) map[string]any {
	t.Helper()
	b, err := JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	return s
}

// TestJSONSchemaMatchesLoader: every object of the schema has exactly the
// keys the loader decodes, requires what the loader requires, and refuses
// other keys.
func TestJSONSchemaMatchesLoader(t *testing.T) {
	s := loadSchema(t)
	if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v", s["$schema"])
	}
	defs, _ := s["$defs"].(map[string]any)
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(rt reflect.Type) {
		for rt.Kind() == reflect.Pointer || rt.Kind() == reflect.Slice || rt.Kind() == reflect.Map {
			rt = rt.Elem()
		}
		if rt.Kind() != reflect.Struct || seen[rt] || rt == reflect.TypeFor[Mount]() {
			return
		}
		seen[rt] = true
		obj := s
		if rt != reflect.TypeFor[Config]() {
			obj, _ = defs[rt.Name()].(map[string]any)
		}
		if obj == nil {
			t.Errorf("%s: no schema", rt.Name())
			return
		}
		props, _ := obj["properties"].(map[string]any)
		var keys, want, wantReq []string
		for k := range props {
			keys = append(keys, k)
		}
		for _, f := range structFields(rt) {
			want = append(want, f.name)
			if f.required {
				wantReq = append(wantReq, f.name)
			}
			walk(rt.Field(f.index).Type)
		}
		slices.Sort(keys)
		slices.Sort(want)
		if !slices.Equal(keys, want) {
			t.Errorf("%s: schema keys %v, loader keys %v", rt.Name(), keys, want)
		}
		var req []string
		for _, r := range asSlice(obj["required"]) {
			req = append(req, r.(string))
		}
		if !slices.Equal(req, wantReq) {
			t.Errorf("%s: schema requires %v, loader %v", rt.Name(), req, wantReq)
		}
		if obj["additionalProperties"] != false {
			t.Errorf("%s: additionalProperties = %v, want false", rt.Name(), obj["additionalProperties"])
		}
	}
	walk(reflect.TypeFor[Config]())
	if len(seen) < 10 {
		t.Errorf("walked only %d types", len(seen))
	}
	api := defs["Provider"].(map[string]any)["properties"].(map[string]any)["api"].(map[string]any)
	if fmt.Sprint(api["enum"]) != fmt.Sprint(APIs) || !strings.Contains(fmt.Sprint(api["description"]), "wire format") {
		t.Errorf("provider api = %v", api)
	}
}

// TestJSONSchemaChecksConfigs runs the schema, as an editor would, over
// configs the loader accepts and over genuine mistakes.
func TestJSONSchemaChecksConfigs(t *testing.T) {
	s := loadSchema(t)
	tests := []struct {
		name, src string
		wantErr   string // "" = valid
	}{
		{"template", string(home.ConfigTemplate()), ""},
		{"spec example", specExample, ""},
		{"original dev config", originalDevConfig, ""},
		{"sizes and mounts", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", memoryLimit: "2g", pidsLimit: 10, extraMounts: ["/a:/b:ro", {source: "/c", target: "/d", readOnly: true}]`, 1), ""},
		{"typo", minimal("", "", `gateway: { prot: 8080 },`), "gateway: unknown key prot"},
		{"missing sandbox", strings.Replace(minimal("", "", ""), `sandbox: { image: "img" },`, "", 1), "agents.a1: missing sandbox"},
		{"wrong type", minimal("", "", `gateway: { port: "80" },`), "gateway.port: want integer"},
		{"unknown api", minimal(`api: "openai"`, "", ""), "llm.providers.anthropic.api: not in enum"},
		{"bad mount", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", extraMounts: [{source: "/c"}]`, 1), "agents.a1.sandbox.extraMounts[0]: no alternative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var doc any
			if err := json5.Unmarshal([]byte(tt.src), &doc); err != nil {
				t.Fatal(err)
			}
			errs := checkSchema(s, s, doc, "")
			switch {
			case tt.wantErr == "" && len(errs) > 0:
				t.Errorf("valid config refused: %v", errs)
			case tt.wantErr != "" && !slices.Contains(errs, tt.wantErr):
				t.Errorf("errors %q, want %q", errs, tt.wantErr)
			}
		})
	}
}

func asSlice(v any) []any { a, _ := v.([]any); return a }

// checkSchema is a small JSON Schema checker for the keywords JSONSchema
// uses ($ref, type, properties, additionalProperties, required, items,
// oneOf, enum).
func checkSchema(root, s map[string]any, v any, path string) []string {
	if ref, ok := s["$ref"].(string); ok {
		def := root["$defs"].(map[string]any)[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
		return checkSchema(root, def, v, path)
	}
	if alts := asSlice(s["oneOf"]); alts != nil {
		n := 0
		for _, a := range alts {
			if len(checkSchema(root, a.(map[string]any), v, path)) == 0 {
				n++
			}
		}
		if n != 1 {
			return []string{path + ": no alternative"}
		}
		return nil
	}
	if enum := asSlice(s["enum"]); enum != nil && !slices.Contains(enum, v) {
		return []string{path + ": not in enum"}
	}
	var errs []string
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch typ, _ := s["type"].(string); typ {
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			return []string{path + ": want object"}
		}
		props, _ := s["properties"].(map[string]any)
		for _, r := range asSlice(s["required"]) {
			if _, ok := obj[r.(string)]; !ok {
				errs = append(errs, path+": missing "+r.(string))
			}
		}
		for k, val := range obj {
			if ps, ok := props[k].(map[string]any); ok {
				errs = append(errs, checkSchema(root, ps, val, join(k))...)
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					errs = append(errs, path+": unknown key "+k)
				}
			case map[string]any:
				errs = append(errs, checkSchema(root, ap, val, join(k))...)
			}
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			return []string{path + ": want array"}
		}
		if items, ok := s["items"].(map[string]any); ok {
			for i, it := range arr {
				errs = append(errs, checkSchema(root, items, it, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	case "string":
		if _, ok := v.(string); !ok {
			return []string{path + ": want string"}
		}
	case "integer":
		f, ok := v.(float64)
		if !ok || f != float64(int64(f)) {
			return []string{path + ": want integer"}
		}
	case "number":
		if _, ok := v.(float64); !ok {
			return []string{path + ": want number"}
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return []string{path + ": want boolean"}
		}
	}
	return errs
}
