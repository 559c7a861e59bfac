package config

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// decoder turns the node tree into the typed config. It never stops at the
// first problem: each one is recorded with its position and path, and the
// walk goes on, so that one run reports every mistake.
type decoder struct {
	file   string
	dir    string
	lookup func(string) (string, bool) // environment
	errs   ErrorList
	pos    map[string]Pos    // JSON path -> where its value starts
	keyPos map[string]Pos    // JSON path -> where its key starts (map entries)
	interp map[string]string // JSON path -> value of a string that had ${VAR}
}

func (d *decoder) errorf(pos Pos, path, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Pos: pos, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// errorAt reports a problem with the value at path (found by the decoder).
func (d *decoder) errorAt(path, format string, args ...any) {
	d.errorf(d.pos[path], path, format, args...)
}

// nodeDecoder is implemented by types that accept more than one JSON shape.
type nodeDecoder interface {
	decodeNode(d *decoder, n *node, path string)
}

var nodeDecoderType = reflect.TypeFor[nodeDecoder]()

func joinPath(path, key string) string {
	if !identRE.MatchString(key) {
		key = fmt.Sprintf("[%q]", key)
		return path + key
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

var identRE = regexp.MustCompile(`^[A-Za-z0-9_$-]+$`)

func (d *decoder) decode(n *node, path string, v reflect.Value) {
	d.pos[path] = n.pos
	if v.CanAddr() && v.Addr().Type().Implements(nodeDecoderType) {
		v.Addr().Interface().(nodeDecoder).decodeNode(d, n, path)
		return
	}
	t := v.Type()
	switch {
	case t == reflect.TypeFor[Secret](), t.Kind() == reflect.String:
		if s, ok := d.str(n, path); ok {
			v.SetString(s)
		}
	case t.Kind() == reflect.Bool:
		if n.kind != kindBool {
			d.typeError(n, path, "boolean")
			return
		}
		v.SetBool(n.b)
	case t.Kind() == reflect.Int, t.Kind() == reflect.Int64:
		if n.kind != kindNumber {
			d.typeError(n, path, "integer")
			return
		}
		if !isInt(n.num) {
			d.errorf(n.pos, path, "want an integer, got %v", n.num)
			return
		}
		v.SetInt(int64(n.num))
	case t.Kind() == reflect.Float64:
		if n.kind != kindNumber {
			d.typeError(n, path, "number")
			return
		}
		if math.IsInf(n.num, 0) || math.IsNaN(n.num) {
			d.errorf(n.pos, path, "want a finite number, got %v", n.num)
			return
		}
		v.SetFloat(n.num)
	case t.Kind() == reflect.Slice:
		if n.kind != kindArray {
			d.typeError(n, path, "array")
			return
		}
		s := reflect.MakeSlice(t, len(n.vals), len(n.vals))
		for i, item := range n.vals {
			d.decode(item, fmt.Sprintf("%s[%d]", path, i), s.Index(i))
		}
		v.Set(s)
	case t.Kind() == reflect.Map:
		if n.kind != kindObject {
			d.typeError(n, path, "object")
			return
		}
		m := reflect.MakeMapWithSize(t, len(n.keys))
		for i, k := range n.keys {
			ev := reflect.New(t.Elem()).Elem()
			kp := joinPath(path, k)
			d.keyPos[kp] = n.keyPos[i]
			d.decode(n.vals[i], kp, ev)
			m.SetMapIndex(reflect.ValueOf(k), ev)
		}
		v.Set(m)
	case t.Kind() == reflect.Pointer:
		if n.kind == kindNull {
			return
		}
		p := reflect.New(t.Elem())
		d.decode(n, path, p.Elem())
		v.Set(p)
	case t.Kind() == reflect.Interface:
		if x := d.plain(n, path); x != nil {
			v.Set(reflect.ValueOf(x))
		}
	case t.Kind() == reflect.Struct:
		d.decodeStruct(n, path, v)
	default:
		panic(fmt.Sprintf("config: cannot decode into %v", t))
	}
}

func (d *decoder) typeError(n *node, path, want string) {
	d.errorf(n.pos, path, "want %s, got %s", article(want), n.kind)
}

func article(s string) string {
	if strings.ContainsAny(s[:1], "aeiou") {
		return "an " + s
	}
	return "a " + s
}

// str returns a string node's value with ${VAR} references replaced.
func (d *decoder) str(n *node, path string) (string, bool) {
	if n.kind != kindString {
		d.typeError(n, path, "string")
		return "", false
	}
	s, err := interpolate(n.str, d.lookup)
	if err != nil {
		d.errorf(n.pos, path, "%v", err)
		return "", false
	}
	if s != n.str && d.interp != nil {
		d.interp[path] = s
	}
	return s, true
}

// plain converts a node into map[string]any / []any / string / float64 / bool.
func (d *decoder) plain(n *node, path string) any {
	d.pos[path] = n.pos
	switch n.kind {
	case kindObject:
		m := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			kp := joinPath(path, k)
			d.keyPos[kp] = n.keyPos[i]
			m[k] = d.plain(n.vals[i], kp)
		}
		return m
	case kindArray:
		a := make([]any, len(n.vals))
		for i, item := range n.vals {
			a[i] = d.plain(item, fmt.Sprintf("%s[%d]", path, i))
		}
		return a
	case kindString:
		s, _ := d.str(n, path)
		return s
	case kindNumber:
		return n.num
	case kindBool:
		return n.b
	}
	return nil
}

type fieldInfo struct {
	name     string
	index    int
	required bool
	path     bool
}

func structFields(t reflect.Type) []fieldInfo {
	var fields []fieldInfo
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		opts := strings.Split(f.Tag.Get("cfg"), ",")
		fi := fieldInfo{name: name, index: i}
		for _, o := range opts {
			switch o {
			case "required":
				fi.required = true
			case "path":
				fi.path = true
			}
		}
		fields = append(fields, fi)
	}
	return fields
}

func (d *decoder) decodeStruct(n *node, path string, v reflect.Value) {
	if n.kind != kindObject {
		d.typeError(n, path, "object")
		return
	}
	fields := structFields(v.Type())
	known := make([]string, len(fields))
	for i, f := range fields {
		known[i] = f.name
	}
	seen := map[string]bool{}
	explained := map[string]bool{} // missing fields a misspelt key accounts for
	for i, k := range n.keys {
		kp := joinPath(path, k)
		var fi *fieldInfo
		for j := range fields {
			if fields[j].name == k {
				fi = &fields[j]
			}
		}
		if fi == nil {
			msg := fmt.Sprintf("unknown key %q", k)
			if s := suggest(k, known); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
				explained[s] = true
			} else {
				msg += " (known: " + strings.Join(known, ", ") + ")"
			}
			d.errorf(n.keyPos[i], kp, "%s", msg)
			continue
		}
		if seen[k] {
			d.errorf(n.keyPos[i], kp, "duplicate key %q", k)
			continue
		}
		seen[k] = true
		fv := v.Field(fi.index)
		d.decode(n.vals[i], kp, fv)
		if fi.path && fv.Kind() == reflect.String && fv.String() != "" {
			fv.SetString(d.resolvePath(fv.String()))
		}
	}
	for _, f := range fields {
		if f.required && !seen[f.name] && !explained[f.name] {
			d.errorf(n.pos, joinPath(path, f.name), "missing required field %q", f.name)
		}
	}
}

// resolvePath expands a leading ~ and makes relative paths relative to the
// config file's folder.
func (d *decoder) resolvePath(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, p[1:])
		}
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(d.dir, p)
	}
	return filepath.Clean(p)
}

func (b *ByteSize) decodeNode(d *decoder, n *node, path string) {
	switch n.kind {
	case kindNumber:
		if !isInt(n.num) || n.num < 0 {
			d.errorf(n.pos, path, "want a size like \"2g\" or a whole number of bytes, got %v", n.num)
			return
		}
		*b = ByteSize(n.num)
	case kindString:
		s, ok := d.str(n, path)
		if !ok {
			return
		}
		size, err := ParseByteSize(s)
		if err != nil {
			d.errorf(n.pos, path, "%v", err)
			return
		}
		*b = size
	default:
		d.typeError(n, path, "size like \"2g\"")
	}
}

// ParseByteSize parses a size: a whole number of bytes ("1048576") or a
// number with a k, m, g or t suffix in powers of 1024, optionally followed
// by "b" or "ib" ("512m", "2g", "1.5G", "3gb", "64MiB"). Only digits and a
// dot are a number here (no sign, exponent, hex or Inf), and a size that
// does not fit 63 bits is refused, not wrapped around.
func ParseByteSize(s string) (ByteSize, error) {
	bad := fmt.Errorf("invalid size %q (want e.g. \"512m\", \"2g\" or a number of bytes)", s)
	t := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), "b")
	if n := len(t); n >= 2 && t[n-1] == 'i' && sizeUnits[t[n-2]] != 0 {
		t = t[:n-1]
	}
	mult := int64(1)
	if n := len(t); n > 0 {
		if m, ok := sizeUnits[t[n-1]]; ok {
			mult, t = m, t[:n-1]
		}
	}
	if t == "" || strings.Trim(t, "0123456789.") != "" {
		return 0, bad
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		if n > math.MaxInt64/mult {
			return 0, bad
		}
		return ByteSize(n * mult), nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f*float64(mult) >= math.MaxInt64 {
		return 0, bad
	}
	return ByteSize(f * float64(mult)), nil
}

var sizeUnits = map[byte]int64{'k': 1 << 10, 'm': 1 << 20, 'g': 1 << 30, 't': 1 << 40}

func (m *Mount) decodeNode(d *decoder, n *node, path string) {
	switch n.kind {
	case kindString:
		s, ok := d.str(n, path)
		if !ok {
			return
		}
		parts := strings.Split(s, ":")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
			d.errorf(n.pos, path, "want \"hostPath:containerPath[:ro|rw]\", got %q", s)
			return
		}
		m.Source, m.Target = d.resolvePath(parts[0]), parts[1]
		if len(parts) == 3 {
			switch parts[2] {
			case "ro":
				m.ReadOnly = true
			case "rw":
			default:
				d.errorf(n.pos, path, "mount mode must be \"ro\" or \"rw\", got %q", parts[2])
			}
		}
	case kindObject:
		type plainMount Mount // no decodeNode method
		var pm plainMount
		d.decodeStruct(n, path, reflect.ValueOf(&pm).Elem())
		*m = Mount(pm)
	default:
		d.typeError(n, path, "mount (\"host:container[:ro]\" or {source, target, readOnly})")
	}
}
