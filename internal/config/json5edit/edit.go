package json5edit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ErrNotFound is returned by Delete when the path names no property.
var ErrNotFound = errors.New("json5edit: no such property")

// Object is an object whose members keep their order when rendered.
type Object []Member

// Member is one property of an Object.
type Member struct {
	Key   string
	Value any
}

// Values that Set renders: nil, bool, string, numbers, []any,
// map[string]any (keys sorted), Object, and json.RawMessage (JSON whose
// objects keep their order).

// Has reports whether path names a property of the document.
func Has(src []byte, path ...string) (bool, error) {
	root, err := parse(src)
	if err != nil {
		return false, err
	}
	n, _, err := walk(root, path)
	if err != nil {
		return false, err
	}
	return n != nil, nil
}

// walk follows path from root. It returns the node at path (nil when a
// property is missing) and the deepest object on the way with how many
// path elements it consumed.
func walk(root *node, path []string) (*node, int, error) {
	n := root
	for i, k := range path {
		if n.kind != kObject {
			return nil, 0, fmt.Errorf("json5edit: %s is not an object", strings.Join(path[:i], "."))
		}
		m := find(n, k)
		if m == nil {
			return nil, i, nil
		}
		n = m.val
	}
	return n, len(path), nil
}

// find returns the last member named key (the one JSON5 parsers keep).
func find(o *node, key string) *member {
	for i := len(o.members) - 1; i >= 0; i-- {
		if o.members[i].key == key {
			return o.members[i]
		}
	}
	return nil
}

// Set sets the property at path (at least one key) to v: it replaces the
// value of an existing property, and otherwise appends the property to its
// object, creating the missing objects on the way. Nothing else changes.
func Set(src []byte, path []string, v any) ([]byte, error) {
	if len(path) == 0 {
		return nil, errors.New("json5edit: empty path")
	}
	root, err := parse(src)
	if err != nil {
		return nil, err
	}
	if root.kind != kObject {
		return nil, errors.New("json5edit: the document is not an object")
	}
	e := newEditor(src, root)
	parent, depth, err := walk(root, path[:len(path)-1])
	if err != nil {
		return nil, err
	}
	if parent != nil {
		if parent.kind != kObject {
			return nil, fmt.Errorf("json5edit: %s is not an object", strings.Join(path[:len(path)-1], "."))
		}
		if m := find(parent, path[len(path)-1]); m != nil {
			return e.replace(m, v)
		}
		return e.insert(parent, path[len(path)-1], v)
	}
	// Build the missing objects inside out.
	for i := len(path) - 1; i > depth; i-- {
		v = Object{{Key: path[i], Value: v}}
	}
	obj, _, _ := walk(root, path[:depth])
	return e.insert(obj, path[depth], v)
}

// Delete removes the property at path, with its comma and the rest of its
// line when it has lines of its own, as a person would. Every property of
// that name in its object goes (JSON5 keeps the last of duplicates).
func Delete(src []byte, path ...string) ([]byte, error) {
	if len(path) == 0 {
		return nil, errors.New("json5edit: empty path")
	}
	deleted := false
	for {
		root, err := parse(src)
		if err != nil {
			return nil, err
		}
		parent, _, err := walk(root, path[:len(path)-1])
		if err != nil {
			return nil, err
		}
		if parent == nil || parent.kind != kObject {
			break
		}
		idx := -1
		for i, m := range parent.members {
			if m.key == path[len(path)-1] {
				idx = i
			}
		}
		if idx < 0 {
			break
		}
		src = newEditor(src, root).delete(parent, idx)
		deleted = true
	}
	if !deleted {
		return nil, ErrNotFound
	}
	return src, nil
}

// editor holds the document and the style detected in it.
type editor struct {
	src []byte
	// nl is the line ending; unit one level of indentation.
	nl, unit string
	// trailingComma: whether a new last member of an empty object gets a
	// comma (the document's habit).
	trailingComma bool
	// quoteKeys: whether keys are written quoted (the root's habit).
	quoteKeys bool
}

func newEditor(src []byte, root *node) *editor {
	e := &editor{src: src, nl: "\n", unit: "  ", trailingComma: true}
	if i := bytes.IndexByte(src, '\n'); i > 0 && src[i-1] == '\r' {
		e.nl = "\r\n"
	}
	if len(root.members) > 0 {
		c := src[root.members[0].keyStart]
		e.quoteKeys = c == '"' || c == '\''
	}
	e.detect(root, &unitFound{}, &commaFound{})
	return e
}

type unitFound struct{ done bool }
type commaFound struct{ done bool }

// detect finds the indentation unit and the trailing comma habit: the
// first object, depth first, that shows them.
func (e *editor) detect(n *node, u *unitFound, c *commaFound) {
	switch n.kind {
	case kObject:
		if len(n.members) > 0 {
			if !c.done && e.ownLine(n.members[len(n.members)-1]) {
				e.trailingComma, c.done = n.members[len(n.members)-1].comma >= 0, true
			}
			if !u.done {
				if ci, ok := e.blankBefore(n.members[0].keyStart); ok {
					li := e.indentOf(n.start)
					if strings.HasPrefix(ci, li) && len(ci) > len(li) {
						e.unit, u.done = ci[len(li):], true
					}
				}
			}
		}
		for _, m := range n.members {
			e.detect(m.val, u, c)
		}
	case kArray:
		for _, it := range n.items {
			e.detect(it, u, c)
		}
	}
}

func isBlank(s []byte) bool {
	for _, c := range s {
		if c != ' ' && c != '\t' {
			return false
		}
	}
	return true
}

// lineStart is the offset of the first byte of the line holding i.
func (e *editor) lineStart(i int) int {
	return bytes.LastIndexByte(e.src[:i], '\n') + 1
}

// indentOf is the leading spaces and tabs of the line holding i.
func (e *editor) indentOf(i int) string {
	ls := e.lineStart(i)
	j := ls
	for j < len(e.src) && (e.src[j] == ' ' || e.src[j] == '\t') {
		j++
	}
	return string(e.src[ls:j])
}

// blankBefore returns the text from the start of i's line to i when it is
// only spaces and tabs.
func (e *editor) blankBefore(i int) (string, bool) {
	ls := e.lineStart(i)
	if !isBlank(e.src[ls:i]) {
		return "", false
	}
	return string(e.src[ls:i]), true
}

// restOfLine returns the offset after the end of i's line when what
// follows i on it is only spaces, tabs and a line comment.
func (e *editor) restOfLine(i int) (int, bool) {
	for i < len(e.src) && (e.src[i] == ' ' || e.src[i] == '\t') {
		i++
	}
	if bytes.HasPrefix(e.src[i:], []byte("//")) {
		for i < len(e.src) && e.src[i] != '\n' && e.src[i] != '\r' && !bytes.HasPrefix(e.src[i:], []byte("\u2028")) && !bytes.HasPrefix(e.src[i:], []byte("\u2029")) {
			i++
		}
	}
	if bytes.HasPrefix(e.src[i:], []byte("\r\n")) {
		return i + 2, true
	}
	if i < len(e.src) && e.src[i] == '\n' {
		return i + 1, true
	}
	return 0, false
}

// ownLine: the member starts its line and nothing but a comment follows it.
func (e *editor) ownLine(m *member) bool {
	_, before := e.blankBefore(m.keyStart)
	_, after := e.restOfLine(m.end())
	return before && after
}

// lineComment matches an inner text whose first line is a line comment.
var lineComment = regexp.MustCompile("^[ \t]*//[^\r\n\u2028\u2029]*\r?\n")

func (e *editor) splice(edits ...edit) []byte {
	sort.Slice(edits, func(i, j int) bool { return edits[i].start > edits[j].start })
	out := append([]byte(nil), e.src...)
	for _, ed := range edits {
		out = append(out[:ed.start], append([]byte(ed.text), out[ed.end:]...)...)
	}
	return out
}

type edit struct {
	start, end int
	text       string
}

func (e *editor) replace(m *member, v any) ([]byte, error) {
	ind, ok := e.blankBefore(m.keyStart)
	text, err := e.render(v, ind, !ok)
	if err != nil {
		return nil, err
	}
	return e.splice(edit{m.val.start, m.val.end, text}), nil
}

// insert appends key: v to the object o.
//
// Every insertion is one that delete undoes byte for byte:
//   - into an object whose closing brace has a line of its own, the member
//     gets a line before it (and the last member a comma when it had none);
//   - into a one-line object, it follows the last member on its line;
//   - into an empty object, it gets a line after the opening brace (after
//     the first line when that is a line comment), and the brace's line
//     its own closing line.
func (e *editor) insert(o *node, key string, v any) ([]byte, error) {
	k := e.renderKey(key)
	if len(o.members) == 0 {
		li := e.indentOf(o.start)
		ci := li + e.unit
		val, err := e.render(v, ci, false)
		if err != nil {
			return nil, err
		}
		comma := ""
		if e.trailingComma {
			comma = ","
		}
		inner := e.src[o.start+1 : o.end-1]
		if loc := lineComment.FindIndex(inner); loc != nil {
			return e.splice(edit{o.start + 1 + loc[1], o.start + 1 + loc[1], ci + k + ": " + val + comma + e.nl}), nil
		}
		return e.splice(edit{o.start + 1, o.start + 1, e.nl + ci + k + ": " + val + comma + e.nl + li}), nil
	}
	last := o.members[len(o.members)-1]
	closeLS := e.lineStart(o.end - 1)
	if isBlank(e.src[closeLS:o.end-1]) && last.end() <= closeLS {
		ci, ok := e.blankBefore(o.members[0].keyStart)
		if !ok {
			ci = e.indentOf(o.start) + e.unit
		}
		val, err := e.render(v, ci, false)
		if err != nil {
			return nil, err
		}
		if last.comma >= 0 {
			return e.splice(edit{closeLS, closeLS, ci + k + ": " + val + "," + e.nl}), nil
		}
		return e.splice(
			edit{last.val.end, last.val.end, ","},
			edit{closeLS, closeLS, ci + k + ": " + val + e.nl},
		), nil
	}
	val, err := e.render(v, "", true)
	if err != nil {
		return nil, err
	}
	if last.comma >= 0 {
		return e.splice(edit{last.comma + 1, last.comma + 1, " " + k + ": " + val + ","}), nil
	}
	return e.splice(edit{last.val.end, last.val.end, ", " + k + ": " + val}), nil
}

// delete removes member i of o; see insert for the shapes it undoes.
func (e *editor) delete(o *node, i int) []byte {
	m := o.members[i]
	if e.ownLine(m) {
		ls := e.lineStart(m.keyStart)
		le, _ := e.restOfLine(m.end())
		if len(o.members) == 1 {
			li := e.indentOf(o.start)
			rest := e.src[le : o.end-1]
			if string(e.src[o.start+1:ls]) == e.nl && bytes.HasPrefix(rest, []byte(li)) && lineComment.Find(rest[len(li):]) == nil {
				return e.splice(edit{o.start + 1, le + len(li), ""})
			}
			return e.splice(edit{ls, le, ""})
		}
		if i == len(o.members)-1 && m.comma < 0 {
			prev := o.members[i-1]
			return e.splice(edit{ls, le, ""}, edit{prev.comma, prev.comma + 1, ""})
		}
		return e.splice(edit{ls, le, ""})
	}
	switch {
	case len(o.members) == 1:
		return e.splice(edit{m.keyStart, m.end(), ""})
	case i > 0 && m.comma >= 0:
		return e.splice(edit{o.members[i-1].end(), m.end(), ""})
	case i > 0:
		return e.splice(edit{o.members[i-1].val.end, m.val.end, ""})
	default:
		return e.splice(edit{m.keyStart, o.members[1].keyStart, ""})
	}
}

var identifier = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

func (e *editor) renderKey(k string) string {
	if !e.quoteKeys && identifier.MatchString(k) {
		return k
	}
	return quote(k)
}

func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// render writes v as JSON5; ind is the indentation of the line it starts
// on; inline writes it on one line.
func (e *editor) render(v any, ind string, inline bool) (string, error) {
	switch v := v.(type) {
	case nil:
		return "null", nil
	case bool:
		return strconv.FormatBool(v), nil
	case string:
		return quote(v), nil
	case int:
		return strconv.Itoa(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "", fmt.Errorf("json5edit: cannot write %v", v)
		}
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case literal:
		return string(v), nil
	case json.RawMessage:
		parsed, err := fromJSON(v)
		if err != nil {
			return "", err
		}
		return e.render(parsed, ind, inline)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		obj := make(Object, 0, len(v))
		for _, k := range keys {
			obj = append(obj, Member{k, v[k]})
		}
		return e.render(obj, ind, inline)
	case Object:
		if len(v) == 0 {
			return "{}", nil
		}
		parts := make([]string, len(v))
		for i, m := range v {
			s, err := e.render(m.Value, ind+e.unit, inline)
			if err != nil {
				return "", err
			}
			parts[i] = e.renderKey(m.Key) + ": " + s
		}
		if inline {
			return "{ " + strings.Join(parts, ", ") + " }", nil
		}
		return e.block("{", "}", parts, ind), nil
	case []any:
		if len(v) == 0 {
			return "[]", nil
		}
		parts := make([]string, len(v))
		flat := true
		for i, it := range v {
			switch it.(type) {
			case Object, map[string]any, []any, json.RawMessage:
				flat = false
			}
			s, err := e.render(it, ind+e.unit, inline)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		if inline || flat {
			return "[" + strings.Join(parts, ", ") + "]", nil
		}
		return e.block("[", "]", parts, ind), nil
	}
	return "", fmt.Errorf("json5edit: cannot write a %T", v)
}

func (e *editor) block(open, close string, parts []string, ind string) string {
	var b strings.Builder
	b.WriteString(open + e.nl)
	for i, p := range parts {
		b.WriteString(ind + e.unit + p)
		if i < len(parts)-1 || e.trailingComma {
			b.WriteString(",")
		}
		b.WriteString(e.nl)
	}
	b.WriteString(ind + close)
	return b.String()
}

// literal is a scalar written as is (taken from valid JSON).
type literal string

// fromJSON turns JSON into Objects (in the JSON's order), []any and
// literals.
func fromJSON(raw []byte) (any, error) {
	if !json.Valid(raw) {
		return nil, errors.New("json5edit: invalid JSON value")
	}
	n, err := parse(raw)
	if err != nil {
		return nil, err
	}
	return convert(raw, n), nil
}

func convert(src []byte, n *node) any {
	switch n.kind {
	case kObject:
		obj := make(Object, 0, len(n.members))
		for _, m := range n.members {
			obj = append(obj, Member{m.key, convert(src, m.val)})
		}
		return obj
	case kArray:
		items := make([]any, 0, len(n.items))
		for _, it := range n.items {
			items = append(items, convert(src, it))
		}
		return items
	}
	return literal(src[n.start:n.end])
}
