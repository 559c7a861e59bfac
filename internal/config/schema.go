package config

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strings"

	"github.com/invopop/jsonschema"
)

// configSource is the file that declares the config's types: its doc
// comments become the schema's descriptions, so that editors show the
// same words as the code.
//
//go:embed config.go
var configSource []byte

// SchemaFile is the name of the schema `beige setup` writes next to the
// config, and that the config template's $schema points at.
const SchemaFile = "config.schema.json"

// JSONSchema returns the JSON Schema (draft 2020-12) of config.json5,
// generated from the types the loader decodes into, so that editors
// complete and check the file. It is as strict as the loader on keys
// (additionalProperties: false; required as the loader requires) and
// describes the shapes the loader accepts (a size as "2g" or bytes, a mount
// as "host:container[:ro]" or an object). What needs more than the file
// (a plugin folder, an environment variable, a provider name known to
// beige) is left to `beige config validate`.
func JSONSchema() ([]byte, error) {
	r := &jsonschema.Reflector{
		Anonymous:                  true,
		ExpandedStruct:             true,
		RequiredFromJSONSchemaTags: true, // set from our cfg tags below
		Mapper:                     schemaMapper,
		LookupComment:              docComments(),
	}
	s := r.Reflect(&Config{})
	s.Title = "Beige config.json5"
	setRequired(s, s.Definitions, reflect.TypeFor[Config](), map[reflect.Type]bool{})
	if p := defProp(s.Definitions, "Provider", "api"); p != nil {
		p.Enum = toAny(APIs)
	}
	if p := defProp(s.Definitions, "ModelRef", "thinkingLevel"); p != nil {
		p.Enum = toAny(ThinkingLevels)
	}
	out, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("config schema: %w", err)
	}
	return append(out, '\n'), nil
}

// schemaMapper gives the types with more than one JSON shape their schema
// (what their decodeNode accepts).
func schemaMapper(t reflect.Type) *jsonschema.Schema {
	switch t {
	case reflect.TypeFor[ByteSize]():
		return &jsonschema.Schema{
			Description: `A size: "512m", "2g", "1.5G" or a number of bytes.`,
			OneOf: []*jsonschema.Schema{
				{Type: "string"},
				{Type: "integer", Minimum: "0"},
			},
		}
	case reflect.TypeFor[Mount]():
		props := jsonschema.NewProperties()
		props.Set("source", &jsonschema.Schema{Type: "string", Description: "Host path (relative to the config's folder)."})
		props.Set("target", &jsonschema.Schema{Type: "string", Description: "Absolute path in the sandbox."})
		props.Set("readOnly", &jsonschema.Schema{Type: "boolean"})
		return &jsonschema.Schema{
			Description: `An extra bind mount: "hostPath:containerPath[:ro|rw]" or {source, target, readOnly}.`,
			OneOf: []*jsonschema.Schema{
				{Type: "string"},
				{Type: "object", Properties: props, Required: []string{"source", "target"}, AdditionalProperties: jsonschema.FalseSchema},
			},
		}
	}
	return nil
}

// setRequired marks the fields the loader requires (cfg:"required") in the
// schema of t and of every struct type reachable from it.
func setRequired(root *jsonschema.Schema, defs jsonschema.Definitions, t reflect.Type, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] || schemaMapper(t) != nil {
		return
	}
	seen[t] = true
	s := root
	if t != reflect.TypeFor[Config]() {
		s = defs[t.Name()]
	}
	if s != nil {
		s.Required = nil
		for _, f := range structFields(t) {
			if f.required {
				s.Required = append(s.Required, f.name)
			}
		}
	}
	for _, f := range structFields(t) {
		setRequired(root, defs, t.Field(f.index).Type, seen)
	}
}

func defProp(defs jsonschema.Definitions, def, prop string) *jsonschema.Schema {
	d := defs[def]
	if d == nil || d.Properties == nil {
		return nil
	}
	p, _ := d.Properties.Get(prop)
	return p
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// docComments reads the doc comments of configSource's struct types and
// fields, for the schema's descriptions.
func docComments() func(reflect.Type, string) string {
	docs := map[string]string{} // "Type" or "Type.Field"
	f, err := parser.ParseFile(token.NewFileSet(), "config.go", configSource, parser.ParseComments)
	if err == nil {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil {
					doc = gd.Doc
				}
				docs[ts.Name.Name] = commentText(doc)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				for _, fld := range st.Fields.List {
					text := commentText(fld.Doc)
					if text == "" {
						text = commentText(fld.Comment)
					}
					for _, n := range fld.Names {
						docs[ts.Name.Name+"."+n.Name] = text
					}
				}
			}
		}
	}
	pkg := reflect.TypeFor[Config]().PkgPath()
	return func(t reflect.Type, field string) string {
		if t.PkgPath() != pkg {
			return ""
		}
		if field == "" {
			return docs[t.Name()]
		}
		return docs[t.Name()+"."+field]
	}
}

func commentText(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.TrimSpace(strings.Join(strings.Fields(g.Text()), " "))
}
