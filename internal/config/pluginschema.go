package config

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// MergePluginConfig merges plugin configurations, later layers winning:
// defaults (the manifest's defaultConfig) < pluginConfig
// (plugins.<p>.config) < agentOverride (agents.<a>.pluginConfigs.<p>).
// Objects are merged key by key, recursively; arrays and scalars are
// replaced whole, and an explicit null replaces too. The result is a deep
// copy: changing it changes none of the inputs. It is never nil.
//
// Validation checks exactly what this returns against the manifest's
// configSchema, so the plugins get what was checked.
func MergePluginConfig(defaults, pluginConfig, agentOverride map[string]any) map[string]any {
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

// A configLayer is one source of a plugin's merged config that is written
// in the config file: plugins.<p>.config or agents.<a>.pluginConfigs.<p>.
type configLayer struct {
	path  string         // its JSON path in the config file
	value map[string]any // nil when the file does not have it
}

// pluginSchemas checks every enabled plugin's config against its
// manifest's configSchema: the config the plugin registers with
// (defaultConfig < plugins.<p>.config) and the one each agent's calls get
// (that < agents.<a>.pluginConfigs.<p>). Each problem is reported where
// it is written, like the core config's: an unknown key at the key, with
// the nearest allowed name; a missing one at the object that lacks it.
// A plugin without a configSchema is not checked.
func (v *validator) pluginSchemas() {
	printer := message.NewPrinter(language.English)
	reported := map[string]bool{}
	for _, name := range sortedKeys(v.cfg.Plugins) {
		p := v.cfg.Plugins[name]
		if p == nil || p.Manifest == nil || p.Manifest.ConfigSchema == nil {
			continue
		}
		ppath := joinPath("plugins", name)
		sch, schemaDoc, err := compilePluginSchema(p.Manifest.ConfigSchema)
		if err != nil {
			// Not the user's mistake, and the original Beige never checked
			// plugin configs: published plugins describe their config with
			// schemas that are documentation (the toolkit's say
			// "type": "string | string[]"). Such a config is not checked;
			// PluginSchemaWarnings says so.
			continue
		}
		pluginLayer := configLayer{path: ppath + ".config", value: p.Config}
		check := func(layers []configLayer, merged map[string]any) {
			err := sch.Validate(merged)
			var ve *jsonschema.ValidationError
			if err == nil || !errors.As(err, &ve) {
				if err != nil {
					v.errorAt(ppath, "checking the config against plugin %q's configSchema: %v", name, err)
				}
				return
			}
			for _, e := range v.schemaErrors(ve, merged, layers, ppath, schemaDoc, printer) {
				if k := e.Error(); !reported[k] {
					reported[k] = true
					v.d.errs = append(v.d.errs, e)
				}
			}
		}
		defaults := p.Manifest.DefaultConfig
		check([]configLayer{pluginLayer}, MergePluginConfig(defaults, p.Config, nil))
		for _, agent := range v.cfg.AgentOrder {
			a := v.cfg.Agents[agent]
			if a == nil {
				continue
			}
			override, ok := a.PluginConfigs[name]
			if !ok {
				continue
			}
			agentLayer := configLayer{path: joinPath(joinPath("agents", agent)+".pluginConfigs", name), value: override}
			check([]configLayer{agentLayer, pluginLayer}, MergePluginConfig(defaults, p.Config, override))
		}
	}
}

// schemaURL names a plugin's configSchema for the validator; it is never
// fetched.
const schemaURL = "urn:beige:plugin-config-schema"

// compilePluginSchema compiles a manifest's configSchema (draft 2020-12
// unless it says otherwise). A schema must be self-contained: a $ref to
// anything outside it (a file, a URL) is refused, so a manifest cannot
// make validation read the disk or the network.
// PluginSchemaWarnings says which enabled plugins' configs cannot be
// checked because their plugin.json's configSchema is not a JSON Schema
// (or loads something from outside itself), for `config validate` and
// the gateway's log.
func PluginSchemaWarnings(cfg *Config) []string {
	var out []string
	for _, name := range sortedKeys(cfg.Plugins) {
		p := cfg.Plugins[name]
		if p == nil || p.Manifest == nil || p.Manifest.ConfigSchema == nil {
			continue
		}
		if _, _, err := compilePluginSchema(p.Manifest.ConfigSchema); err != nil {
			where := fmt.Sprintf("the plugin.json of the built-in plugin %q", name)
			if p.Path != "" {
				where = filepath.Join(p.Path, "plugin.json")
			}
			msg := schemaProblem(err)
			out = append(out, fmt.Sprintf("plugins.%s: its config is not checked: the configSchema of %s is not a JSON Schema (%s)", name, where, msg))
		}
	}
	return out
}

// schemaProblem says where a configSchema breaks JSON Schema: the first
// leaf of the metaschema's error tree, with its place in the schema
// ("at /properties/x/type: ..."), rather than the compiler's first line
// (that the whole schema is not valid against the metaschema).
func schemaProblem(err error) string {
	var se *jsonschema.SchemaValidationError
	if !errors.As(err, &se) {
		msg := err.Error()
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		return msg
	}
	var ve *jsonschema.ValidationError
	if !errors.As(se.Err, &ve) {
		return se.Error()
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	return fmt.Sprintf("at /%s: %s", strings.Join(ve.InstanceLocation, "/"), ve.ErrorKind.LocalizedString(message.NewPrinter(language.English)))
}

func compilePluginSchema(doc map[string]any) (*jsonschema.Schema, any, error) {
	// The manifest was decoded by encoding/json; give the compiler its own
	// copy, since it keeps what it is handed.
	cp := deepCopy(doc)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no scheme: nothing is loaded
	if err := c.AddResource(schemaURL, cp); err != nil {
		return nil, nil, err
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, nil, err
	}
	return sch, cp, nil
}

// schemaErrors turns a validation error into config errors, one per
// failed keyword (the leaves of the error tree).
func (v *validator) schemaErrors(ve *jsonschema.ValidationError, merged map[string]any, layers []configLayer, ppath string, schemaDoc any, p *message.Printer) ErrorList {
	var out ErrorList
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		switch e.ErrorKind.(type) {
		case *kind.AnyOf, *kind.OneOf:
			// Every alternative failed: their reasons are noise.
		default:
			if len(e.Causes) > 0 {
				for _, c := range e.Causes {
					walk(c)
				}
				return
			}
		}
		path, pos := v.locate(layers, ppath, e.InstanceLocation)
		switch k := e.ErrorKind.(type) {
		case *kind.AdditionalProperties:
			known := schemaProperties(schemaAt(schemaDoc, e.SchemaURL))
			for _, prop := range k.Properties {
				kp := v.childPath(layers, e.InstanceLocation, path, prop)
				msg := fmt.Sprintf("unknown key %q", prop)
				if s := suggest(prop, known); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				} else if len(known) > 0 {
					msg += " (known: " + strings.Join(known, ", ") + ")"
				}
				kpos, ok := v.d.keyPos[kp]
				if !ok {
					kpos = pos
				}
				out = append(out, &Error{File: v.d.file, Pos: kpos, Path: kp, Msg: msg})
			}
		case *kind.Required:
			// A key the schema does not declare may be the missing one,
			// misspelt (where additionalProperties lets it through).
			obj := schemaAt(schemaDoc, e.SchemaURL)
			known := schemaProperties(obj)
			// With additionalProperties false, the misspelt key is
			// reported as unknown, with this name as its did-you-mean.
			closed := obj["additionalProperties"] == false
			var undeclared []string
			if depth, _, val := walkLayer(configLayer{value: merged}, e.InstanceLocation); depth == len(e.InstanceLocation) {
				inst, _ := val.(map[string]any)
				for key := range inst {
					if !slices.Contains(known, key) {
						undeclared = append(undeclared, key)
					}
				}
				slices.Sort(undeclared)
			}
			for _, m := range k.Missing {
				msg := fmt.Sprintf("missing required field %q", m)
				if s := suggest(m, undeclared); s != "" {
					if closed && suggest(s, known) == m {
						continue
					}
					msg += fmt.Sprintf(" (is %q a misspelling of it?)", s)
				}
				out = append(out, &Error{File: v.d.file, Pos: pos, Path: v.childPath(layers, e.InstanceLocation, path, m), Msg: msg})
			}
		default:
			out = append(out, &Error{File: v.d.file, Pos: pos, Path: path, Msg: schemaMessage(e.ErrorKind, p)})
		}
	}
	walk(ve)
	return out
}

// schemaMessage words one failed keyword. The validator's own words are
// kept, except where they would quote the value: that may be a secret
// (a token from ${VAR}), and errors end up in logs.
func schemaMessage(k jsonschema.ErrorKind, p *message.Printer) string {
	switch k := k.(type) {
	case *kind.Type:
		return fmt.Sprintf("want %s, got %s", strings.Join(k.Want, " or "), k.Got)
	case *kind.Pattern:
		return fmt.Sprintf("does not match the pattern %q", k.Want)
	case *kind.Format:
		return fmt.Sprintf("is not a valid %s", k.Want)
	}
	return k.LocalizedString(p)
}

// locate returns the config path and the position of the merged config's
// value at loc (a JSON pointer's tokens). The path is where the value is
// written: in the last layer that has it. The position is that value's;
// for a value no layer has (it comes from the manifest's defaultConfig, or
// is missing), it is the innermost enclosing value the file has.
func (v *validator) locate(layers []configLayer, ppath string, loc []string) (string, Pos) {
	best, bestDepth, bestPath := -1, -1, ""
	for i, l := range layers {
		if l.value == nil {
			continue
		}
		depth, path, _ := walkLayer(l, loc)
		if depth > bestDepth {
			best, bestDepth, bestPath = i, depth, path
		}
	}
	if best < 0 {
		path := layerPath(layers[len(layers)-1].path, loc)
		return path, v.nearestPos(path, ppath)
	}
	if bestDepth == len(loc) {
		return bestPath, v.d.pos[bestPath]
	}
	// Only an enclosing object is written: name the value as it would be
	// written there, and point at what encloses it.
	return layerPath(layers[best].path, loc), v.d.pos[bestPath]
}

// childPath is the path of key inside the value at loc, which locate
// placed at path: in the layer that has that key, if one does.
func (v *validator) childPath(layers []configLayer, loc []string, path, key string) string {
	child := append(slices.Clip(loc), key)
	for _, l := range layers {
		if l.value == nil {
			continue
		}
		if depth, p, _ := walkLayer(l, child); depth == len(child) {
			return p
		}
	}
	return joinPath(path, key)
}

// nearestPos is the position of path or of its nearest ancestor up to
// ppath (the plugin's entry, which is always written).
func (v *validator) nearestPos(path, ppath string) Pos {
	for p := path; len(p) > len(ppath); {
		if pos, ok := v.d.pos[p]; ok {
			return pos
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return v.d.pos[ppath]
}

// walkLayer follows loc into a layer's value, returning how many tokens it
// found, the config path of the deepest value reached and that value.
func walkLayer(l configLayer, loc []string) (int, string, any) {
	var cur any = l.value
	path := l.path
	for i, tok := range loc {
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return i, path, cur
			}
			cur, path = next, joinPath(path, tok)
		case []any:
			n, err := strconv.Atoi(tok)
			if err != nil || n < 0 || n >= len(c) {
				return i, path, cur
			}
			cur, path = c[n], fmt.Sprintf("%s[%d]", path, n)
		default:
			return i, path, cur
		}
	}
	return len(loc), path, cur
}

// layerPath is the config path of loc inside a layer written at base.
func layerPath(base string, loc []string) string {
	path := base
	for _, tok := range loc {
		if n, err := strconv.Atoi(tok); err == nil && n >= 0 {
			path = fmt.Sprintf("%s[%d]", path, n)
			continue
		}
		path = joinPath(path, tok)
	}
	return path
}

// schemaAt is the schema object at schemaURL#<pointer> in doc, or nil.
func schemaAt(doc any, loc string) map[string]any {
	_, frag, _ := strings.Cut(loc, "#")
	cur := doc
	if frag != "" {
		if !strings.HasPrefix(frag, "/") {
			return nil // an anchor, not a pointer
		}
		for _, tok := range strings.Split(frag[1:], "/") {
			if t, err := url.PathUnescape(tok); err == nil {
				tok = t
			}
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch c := cur.(type) {
			case map[string]any:
				cur = c[tok]
			case []any:
				n, err := strconv.Atoi(tok)
				if err != nil || n < 0 || n >= len(c) {
					return nil
				}
				cur = c[n]
			default:
				return nil
			}
		}
	}
	obj, _ := cur.(map[string]any)
	return obj
}

// schemaProperties lists the names a schema object declares in
// "properties", sorted: the keys a did-you-mean may offer.
func schemaProperties(obj map[string]any) []string {
	props, _ := obj["properties"].(map[string]any)
	return sortedKeys(props)
}
