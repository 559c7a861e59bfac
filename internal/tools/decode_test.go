package tools

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		tool, params string
		want         Call
	}{
		{"read", `{"path":"/workspace/file.txt"}`, &ReadCall{Path: "/workspace/file.txt"}},
		{"read", `{"path":"notes/a.md"}`, &ReadCall{Path: "/workspace/notes/a.md"}},
		{"read", `{"path":"./a//b/../c"}`, &ReadCall{Path: "/workspace/a/c"}},
		{"read", `{"path":"../etc/hosts"}`, &ReadCall{Path: "/etc/hosts"}},
		{"read", `{"path":"/tmp/x/"}`, &ReadCall{Path: "/tmp/x"}},
		{"read", `{"path":"a","offset":10,"limit":5}`, &ReadCall{Path: "/workspace/a", Offset: 10, Limit: 5}},
		{"read", `{"path":"a","offset":3.0,"limit":1e2}`, &ReadCall{Path: "/workspace/a", Offset: 3, Limit: 100}},
		{"read", `{"path":"a","offset":null,"limit":null}`, &ReadCall{Path: "/workspace/a"}},
		{"read", " \n{ \"path\" : \"a\" }\n", &ReadCall{Path: "/workspace/a"}},
		{"write", `{"path":"/workspace/output.txt","content":"Hello, world!"}`, &WriteCall{Path: "/workspace/output.txt", Content: "Hello, world!"}},
		{"write", `{"path":"empty","content":""}`, &WriteCall{Path: "/workspace/empty", Content: ""}},
		{"write", `{"content":"\u00e9\n\t\"q\"","path":"x"}`, &WriteCall{Path: "/workspace/x", Content: "é\n\t\"q\""}},
		{"patch", `{"path":"a","oldText":"x","newText":""}`, &PatchCall{Path: "/workspace/a", OldText: "x", NewText: ""}},
		{"patch", `{"path":"a","oldText":"x","newText":"y"}`, &PatchCall{Path: "/workspace/a", OldText: "x", NewText: "y"}},
		{"exec", `{"command":"ls -la /workspace"}`, &ExecCall{Command: "ls -la /workspace"}},
		{"exec", `{"command":"sleep 1","timeout":30}`, &ExecCall{Command: "sleep 1", Timeout: 30 * time.Second}},
		{"exec", `{"command":"sleep 1","timeout":1.5}`, &ExecCall{Command: "sleep 1", Timeout: 1500 * time.Millisecond}},
		{"exec", `{"command":"x","timeout":null}`, &ExecCall{Command: "x"}},
		{"exec", `{"command":"x","timeout":86400}`, &ExecCall{Command: "x", Timeout: 24 * time.Hour}},
	}
	for _, tt := range tests {
		got, err := Decode(tt.tool, json.RawMessage(tt.params))
		if err != nil {
			t.Errorf("Decode(%s, %s): %v", tt.tool, tt.params, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Decode(%s, %s) = %#v, want %#v", tt.tool, tt.params, got, tt.want)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	long := strings.Repeat("a", 5000)
	tests := []struct {
		tool, params string
		param        string // DecodeError.Param
		want         string // the whole message, or its start when it ends in "…"
	}{
		// The tool.
		{"x", `{}`, "", `unknown tool "x" (known: exec, patch, read, write)`},
		{"Read", `{"path":"a"}`, "", `unknown tool "Read" (known: exec, patch, read, write)`},
		{"", `{}`, "", `missing tool name (known: exec, patch, read, write)`},
		// The params object.
		{"read", `[1]`, "", `params: want object, got array`},
		{"read", `"a"`, "", `params: want object, got string`},
		{"read", `42`, "", `params: want object, got number`},
		{"read", `{"path":`, "", `params: invalid JSON: …`},
		{"read", `{"path":"a"} x`, "", `params: invalid JSON: …`},
		// Required and unknown parameters.
		{"read", `{}`, "path", `params.path: required`},
		{"read", ``, "path", `params.path: required`},
		{"read", `null`, "path", `params.path: required`},
		{"write", `{"path":"a"}`, "content", `params.content: required`},
		{"patch", `{"path":"a","oldText":"x"}`, "newText", `params.newText: required`},
		{"exec", `{}`, "command", `params.command: required`},
		{"exec", `{"cmd":"ls"}`, "cmd", `params: unknown parameter "cmd" (exec takes command, timeout)`},
		{"read", `{"path":"a","Path":"b"}`, "Path", `params: unknown parameter "Path" (read takes path, offset, limit)`},
		{"read", `{"path":"a","zz":1,"extra":true}`, "extra", `params: unknown parameter "extra" (read takes path, offset, limit)`},
		{"write", `{"path":"a","content":"b","mode":"0644"}`, "mode", `params: unknown parameter "mode" (write takes path, content)`},
		// Types.
		{"read", `{"path":1}`, "path", `params.path: want string, got number`},
		{"read", `{"path":null}`, "path", `params.path: want string, got null`},
		{"read", `{"path":["a"]}`, "path", `params.path: want string, got array`},
		{"write", `{"path":"a","content":{"x":1}}`, "content", `params.content: want string, got object`},
		{"exec", `{"command":true}`, "command", `params.command: want string, got boolean`},
		{"exec", `{"command":"ls","timeout":"30"}`, "timeout", `params.timeout: want number, got string`},
		{"read", `{"path":"a","offset":"2"}`, "offset", `params.offset: want number, got string`},
		{"read", `{"path":"a","offset":1.5}`, "offset", `params.offset: want integer, got 1.5`},
		{"read", `{"path":"a","limit":1e400}`, "limit", `params.limit: number 1e400 is out of range`},
		// Ranges.
		{"read", `{"path":"a","offset":0}`, "offset", `params.offset: must be at least 1 (lines are numbered from 1)`},
		{"read", `{"path":"a","offset":-3}`, "offset", `params.offset: must be at least 1 (lines are numbered from 1)`},
		{"read", `{"path":"a","limit":0}`, "limit", `params.limit: must be at least 1`},
		{"read", `{"path":"a","limit":1e12}`, "limit", `params.limit: must be at most 100000000`},
		{"exec", `{"command":"ls","timeout":0}`, "timeout", `params.timeout: must be positive (seconds)`},
		{"exec", `{"command":"ls","timeout":-5}`, "timeout", `params.timeout: must be positive (seconds)`},
		{"exec", `{"command":"ls","timeout":1e-9}`, "timeout", `params.timeout: must be at least 0.001 seconds`},
		{"exec", `{"command":"ls","timeout":86401}`, "timeout", `params.timeout: must be at most 86400 seconds`},
		// Values.
		{"read", `{"path":""}`, "path", `params.path: must not be empty`},
		{"read", `{"path":"a\u0000b"}`, "path", `params.path: must not contain a NUL byte`},
		{"read", `{"path":"` + long + `"}`, "path", `params.path: is longer than 4096 bytes`},
		{"patch", `{"path":"a","oldText":"","newText":"x"}`, "oldText", `params.oldText: must not be empty`},
		{"patch", `{"path":"a","oldText":"x","newText":"x"}`, "newText", `params.newText: is the same as oldText; nothing would change`},
		{"exec", `{"command":""}`, "command", `params.command: must not be empty`},
		{"exec", `{"command":" \n\t"}`, "command", `params.command: must not be empty`},
		{"exec", `{"command":"ls\u0000"}`, "command", `params.command: must not contain a NUL byte`},
	}
	for _, tt := range tests {
		c, err := Decode(tt.tool, json.RawMessage(tt.params))
		if err == nil {
			t.Errorf("Decode(%s, %.60s) = %#v, want error %q", tt.tool, tt.params, c, tt.want)
			continue
		}
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Errorf("Decode(%s, %.60s): error %T, want *DecodeError", tt.tool, tt.params, err)
			continue
		}
		if prefix, ok := strings.CutSuffix(tt.want, "…"); ok {
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("Decode(%s, %.60s) = %q, want %q…", tt.tool, tt.params, err, prefix)
			}
		} else if err.Error() != tt.want {
			t.Errorf("Decode(%s, %.60s) = %q, want %q", tt.tool, tt.params, err, tt.want)
		}
		if de.Param != tt.param {
			t.Errorf("Decode(%s, %.60s): Param %q, want %q", tt.tool, tt.params, de.Param, tt.param)
		}
	}
}

// The schemas given to the model must say what Decode accepts.
func TestDefinitionsMatchDecode(t *testing.T) {
	defs := Definitions()
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
		if len(d.Description) < 40 {
			t.Errorf("%s: description too short: %q", d.Name, d.Description)
		}
		var schema struct {
			Type                 string                     `json:"type"`
			Properties           map[string]json.RawMessage `json:"properties"`
			Required             []string                   `json:"required"`
			AdditionalProperties *bool                      `json:"additionalProperties"`
		}
		if err := json.Unmarshal(d.Parameters, &schema); err != nil {
			t.Fatalf("%s: schema: %v", d.Name, err)
		}
		if schema.Type != "object" || schema.AdditionalProperties == nil || *schema.AdditionalProperties {
			t.Errorf("%s: schema must be a closed object", d.Name)
		}
		specs := toolParams[d.Name]
		if len(specs) != len(schema.Properties) {
			t.Errorf("%s: schema has %d properties, Decode %d", d.Name, len(schema.Properties), len(specs))
		}
		var required []string
		for _, p := range specs {
			var prop struct {
				Type        string `json:"type"`
				Description string `json:"description"`
			}
			raw, ok := schema.Properties[p.name]
			if !ok {
				t.Errorf("%s: schema lacks %s", d.Name, p.name)
				continue
			}
			if err := json.Unmarshal(raw, &prop); err != nil {
				t.Fatal(err)
			}
			want := map[kind]string{kString: "string", kLine: "integer", kSeconds: "number"}[p.kind]
			if prop.Type != want || prop.Description == "" {
				t.Errorf("%s.%s: schema type %q (want %q), description %q", d.Name, p.name, prop.Type, want, prop.Description)
			}
			if p.required {
				required = append(required, p.name)
			}
		}
		if !slices.Equal(required, schema.Required) {
			t.Errorf("%s: schema requires %v, Decode %v", d.Name, schema.Required, required)
		}
	}
	if strings.Join(names, ",") != "read,write,patch,exec" {
		t.Errorf("definitions %v", names)
	}
	slices.Sort(names)
	if strings.Join(names, ", ") != knownTools {
		t.Errorf("knownTools %q, definitions %v", knownTools, names)
	}
	// Callers get copies.
	defs[0].Parameters[0] = 'X'
	if Definitions()[0].Parameters[0] != '{' {
		t.Error("Definitions shares its schemas")
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []struct{ tool, params string }{
		{"read", `{"path":"a","offset":2,"limit":3}`},
		{"read", `{"path":"a","offset":1e400}`},
		{"write", `{"path":"/x","content":"\u0000"}`},
		{"patch", `{"path":"a","oldText":"x","newText":"y"}`},
		{"exec", `{"command":"ls","timeout":1.5}`},
		{"exec", `{"command":"ls","timeout":-0}`},
		{"exec", `null`},
		{"nope", `[]`},
		{"read", `{"path":"a","path":"b"}`},
		{"read", "{\"path\":\"\xff\"}"},
	} {
		f.Add(s.tool, []byte(s.params))
	}
	f.Fuzz(func(t *testing.T, tool string, params []byte) {
		c, err := Decode(tool, params)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || de.Msg == "" {
				t.Fatalf("error %T %q", err, err)
			}
			return
		}
		if c.Tool() != tool {
			t.Fatalf("Decode(%q) gave a %s call", tool, c.Tool())
		}
		// A decoded call passes Run's check unchanged, and audits as JSON.
		again := clone(c)
		if err := again.check(); err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("check of %#v: %v, %#v", c, err, again)
		}
		if args := audit.StringArgs(c.auditArgs()); !json.Valid(args) {
			t.Fatalf("audit args %s", args)
		}
	})
}
