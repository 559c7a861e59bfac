package config

import (
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/titanous/json5"
)

// A node is one value of the parsed JSON5 document, with where it starts.
// Objects keep their keys in file order, which the config needs (hooks run
// in the order plugins are written).
type node struct {
	kind   nodeKind
	pos    Pos
	keys   []string // object: keys in file order
	keyPos []Pos    // object: where each key starts
	vals   []*node  // object values, or array items
	str    string   // string value (before interpolation)
	num    float64  // number value
	b      bool     // bool value
}

type nodeKind int

const (
	kindNull nodeKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k nodeKind) String() string {
	return [...]string{"null", "boolean", "number", "string", "array", "object"}[k]
}

// get returns the value of key in an object node, or nil.
func (n *node) get(key string) *node {
	if n == nil || n.kind != kindObject {
		return nil
	}
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// Pos is a place in the config file: 1-based line and column (in characters).
type Pos struct {
	Line, Col int
}

// parseTree parses a JSON5 document. The syntax is checked by the json5
// package first, so the walker below only has to find where values are; the
// values of literals (strings with escapes, hex numbers, Infinity) are decoded
// by the json5 package too.
func parseTree(data []byte) (*node, error) {
	var v any
	if err := json5.Unmarshal(data, &v); err != nil {
		if se, ok := err.(*json5.SyntaxError); ok {
			off := int(se.Offset) - 1
			if off < 0 {
				off = 0
			}
			return nil, &Error{Pos: posAt(data, off), Msg: "syntax error: " + se.Error()}
		}
		return nil, &Error{Msg: "syntax error: " + err.Error()}
	}
	w := &walker{data: data, line: 1, col: 1}
	w.skipSpace()
	n, err := w.value()
	if err != nil {
		return nil, err
	}
	return n, nil
}

// posAt converts a byte offset into a line and column.
func posAt(data []byte, off int) Pos {
	if off > len(data) {
		off = len(data)
	}
	line, col := 1, 1
	for i := 0; i < off; {
		r, size := utf8.DecodeRune(data[i:])
		if r == '\n' {
			line++
			col = 1
		} else {
			col++
		}
		i += size
	}
	return Pos{line, col}
}

type walker struct {
	data      []byte
	i         int
	line, col int
}

func (w *walker) pos() Pos { return Pos{w.line, w.col} }

func (w *walker) peek() byte {
	if w.i >= len(w.data) {
		return 0
	}
	return w.data[w.i]
}

func (w *walker) advance() {
	if w.i >= len(w.data) {
		return
	}
	r, size := utf8.DecodeRune(w.data[w.i:])
	if r == '\n' {
		w.line++
		w.col = 1
	} else {
		w.col++
	}
	w.i += size
}

func (w *walker) skipSpace() {
	for w.i < len(w.data) {
		c := w.data[w.i]
		switch {
		case c == '/' && w.i+1 < len(w.data) && w.data[w.i+1] == '/':
			for w.i < len(w.data) && w.data[w.i] != '\n' {
				w.advance()
			}
		case c == '/' && w.i+1 < len(w.data) && w.data[w.i+1] == '*':
			w.advance()
			w.advance()
			for w.i < len(w.data) && !(w.data[w.i] == '*' && w.i+1 < len(w.data) && w.data[w.i+1] == '/') {
				w.advance()
			}
			w.advance()
			w.advance()
		case c < utf8.RuneSelf && (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'):
			w.advance()
		case c >= utf8.RuneSelf:
			r, _ := utf8.DecodeRune(w.data[w.i:])
			if !unicode.IsSpace(r) && r != '\uFEFF' {
				return
			}
			w.advance()
		default:
			return
		}
	}
}

func (w *walker) errorf(format string, args ...any) error {
	return &Error{Pos: w.pos(), Msg: "syntax error: " + fmt.Sprintf(format, args...)}
}

func (w *walker) value() (*node, error) {
	p := w.pos()
	switch c := w.peek(); c {
	case '{':
		return w.object(p)
	case '[':
		return w.array(p)
	case '"', '\'':
		raw := w.stringLiteral()
		s, err := decodeString(raw)
		if err != nil {
			return nil, &Error{Pos: p, Msg: "syntax error: " + err.Error()}
		}
		return &node{kind: kindString, pos: p, str: s}, nil
	default:
		start := w.i
		for w.i < len(w.data) && !isDelim(w.data[w.i]) {
			w.advance()
		}
		raw := string(w.data[start:w.i])
		if raw == "" {
			return nil, w.errorf("unexpected character %q", c)
		}
		switch raw {
		case "true", "false":
			return &node{kind: kindBool, pos: p, b: raw == "true"}, nil
		case "null":
			return &node{kind: kindNull, pos: p}, nil
		}
		var f float64
		if err := json5.Unmarshal([]byte(raw), &f); err != nil {
			return nil, &Error{Pos: p, Msg: fmt.Sprintf("syntax error: bad literal %q", raw)}
		}
		return &node{kind: kindNumber, pos: p, num: f}, nil
	}
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ':', ' ', '\t', '\n', '\r', '/':
		return true
	}
	return false
}

// stringLiteral consumes a quoted string and returns its raw text, quotes included.
func (w *walker) stringLiteral() string {
	start := w.i
	q := w.peek()
	w.advance()
	for w.i < len(w.data) {
		c := w.data[w.i]
		if c == '\\' {
			w.advance()
			w.advance()
			continue
		}
		w.advance()
		if c == q {
			break
		}
	}
	return string(w.data[start:w.i])
}

func decodeString(raw string) (string, error) {
	var s string
	if err := json5.Unmarshal([]byte(raw), &s); err != nil {
		return "", err
	}
	return s, nil
}

func (w *walker) object(p Pos) (*node, error) {
	n := &node{kind: kindObject, pos: p}
	w.advance() // {
	for {
		w.skipSpace()
		if w.i >= len(w.data) {
			return nil, w.errorf("unexpected end of input in object")
		}
		if w.peek() == '}' {
			w.advance()
			return n, nil
		}
		kp := w.pos()
		var key string
		if c := w.peek(); c == '"' || c == '\'' {
			s, err := decodeString(w.stringLiteral())
			if err != nil {
				return nil, &Error{Pos: kp, Msg: "syntax error: " + err.Error()}
			}
			key = s
		} else {
			start := w.i
			for w.i < len(w.data) && !isDelim(w.data[w.i]) {
				w.advance()
			}
			key = unescapeIdent(string(w.data[start:w.i]))
		}
		w.skipSpace()
		if w.peek() != ':' {
			return nil, w.errorf("expected ':' after key %q", key)
		}
		w.advance()
		w.skipSpace()
		v, err := w.value()
		if err != nil {
			return nil, err
		}
		n.keys = append(n.keys, key)
		n.keyPos = append(n.keyPos, kp)
		n.vals = append(n.vals, v)
		w.skipSpace()
		if w.peek() == ',' {
			w.advance()
		}
	}
}

// unescapeIdent decodes \uXXXX escapes, which JSON5 allows in unquoted keys.
func unescapeIdent(s string) string {
	if !strings.Contains(s, `\u`) {
		return s
	}
	if d, err := decodeString(`"` + s + `"`); err == nil {
		return d
	}
	return s
}

func (w *walker) array(p Pos) (*node, error) {
	n := &node{kind: kindArray, pos: p}
	w.advance() // [
	for {
		w.skipSpace()
		if w.i >= len(w.data) {
			return nil, w.errorf("unexpected end of input in array")
		}
		if w.peek() == ']' {
			w.advance()
			return n, nil
		}
		v, err := w.value()
		if err != nil {
			return nil, err
		}
		n.vals = append(n.vals, v)
		w.skipSpace()
		if w.peek() == ',' {
			w.advance()
		}
	}
}

// isInt reports whether f is a whole number that fits an int64.
func isInt(f float64) bool {
	return !math.IsInf(f, 0) && !math.IsNaN(f) && f == math.Trunc(f) && math.Abs(f) < 1<<53
}
