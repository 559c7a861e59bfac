package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
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

// TestJSONSchemaChecksConfigs runs the schema through a JSON Schema
// validator, as an editor would, over configs the loader accepts and over
// genuine mistakes.
func TestJSONSchemaChecksConfigs(t *testing.T) {
	b, err := JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("config.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("config.schema.json")
	if err != nil {
		t.Fatalf("the schema does not compile: %v", err)
	}
	tests := []struct {
		name, src string
		wantErr   string // in the validator's report; "" = valid
	}{
		{"template", string(home.ConfigTemplate()), ""},
		{"spec example", specExample, ""},
		{"original dev config", originalDevConfig, ""},
		{"sizes and mounts", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", memoryLimit: "2g", pidsLimit: 10, extraMounts: ["/a:/b:ro", {source: "/c", target: "/d", readOnly: true}]`, 1), ""},
		{"typo", minimal("", "", `gateway: { prot: 8080 },`), "at '/gateway': additional properties 'prot' not allowed"},
		{"missing sandbox", strings.Replace(minimal("", "", ""), `sandbox: { image: "img" },`, "", 1), "at '/agents/a1': missing property 'sandbox'"},
		{"wrong type", minimal("", "", `gateway: { port: "80" },`), "at '/gateway/port': got string, want integer"},
		{"unknown api", minimal(`api: "openai"`, "", ""), "at '/llm/providers/anthropic/api': value must be one of"},
		{"bad mount", strings.Replace(minimal("", "", ""), `image: "img"`, `image: "img", extraMounts: [{source: "/c"}]`, 1), "at '/agents/a1/sandbox/extraMounts/0': 'oneOf' failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v any
			if err := json5.Unmarshal([]byte(tt.src), &v); err != nil {
				t.Fatal(err)
			}
			err := sch.Validate(v)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("valid config refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("errors %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func asSlice(v any) []any { a, _ := v.([]any); return a }
