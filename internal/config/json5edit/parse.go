// Package json5edit edits a JSON5 document in place: it inserts, replaces
// and deletes object properties and leaves every other byte (comments,
// order, quoting, indentation, line endings) as it was. It is what
// `beige plugins` uses to change config.json5 without losing the user's
// comments.
//
// The parser keeps only what an edit needs: the byte span of every value
// and, in objects, of every key and comma. It accepts JSON5; callers that
// need the document checked for validity parse it with a full JSON5
// parser too.
package json5edit

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxDepth bounds nesting, so that a hostile document cannot exhaust the
// stack.
const maxDepth = 1000

type kind int

const (
	kScalar kind = iota
	kObject
	kArray
)

// node is one value: [start, end) in the source.
type node struct {
	kind       kind
	start, end int
	members    []*member // objects
	items      []*node   // arrays
	// lastComma is the offset of a comma after the last item of an array,
	// or -1.
	lastComma int
}

// member is one property of an object.
type member struct {
	key              string // decoded
	keyStart, keyEnd int
	val              *node
	comma            int // offset of the comma after the value, or -1
}

// end is where the member ends: after its comma, or after its value.
func (m *member) end() int {
	if m.comma >= 0 {
		return m.comma + 1
	}
	return m.val.end
}

type parser struct {
	src   []byte
	pos   int
	depth int
}

// parse parses a whole document.
func parse(src []byte) (*node, error) {
	p := &parser{src: src}
	p.skipTrivia()
	n, err := p.value()
	if err != nil {
		return nil, err
	}
	p.skipTrivia()
	if p.pos != len(src) {
		return nil, p.errorf("unexpected %q after the document", p.peekRune())
	}
	return n, nil
}

func (p *parser) errorf(format string, args ...any) error {
	line := 1 + strings.Count(string(p.src[:min(p.pos, len(p.src))]), "\n")
	return fmt.Errorf("json5edit: line %d: %s", line, fmt.Sprintf(format, args...))
}

func (p *parser) peekRune() rune {
	if p.pos >= len(p.src) {
		return utf8.RuneError
	}
	r, _ := utf8.DecodeRune(p.src[p.pos:])
	return r
}

// isSpace is JSON5's WhiteSpace and LineTerminator.
func isSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x2028, 0x2029, 0xFEFF:
		return true
	}
	return unicode.Is(unicode.Zs, r)
}

// skipTrivia skips whitespace and comments.
func (p *parser) skipTrivia() {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if c == '/' && p.pos+1 < len(p.src) {
			switch p.src[p.pos+1] {
			case '/':
				for p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' && !p.at("\u2028") && !p.at("\u2029") {
					p.pos++
				}
				continue
			case '*':
				i := strings.Index(string(p.src[p.pos+2:]), "*/")
				if i < 0 {
					return // the caller reports what follows
				}
				p.pos += 2 + i + 2
				continue
			}
		}
		r, size := utf8.DecodeRune(p.src[p.pos:])
		if !isSpace(r) {
			return
		}
		p.pos += size
	}
}

func (p *parser) at(s string) bool { return strings.HasPrefix(string(p.src[p.pos:]), s) }

func (p *parser) value() (*node, error) {
	if p.pos >= len(p.src) {
		return nil, p.errorf("unexpected end of input")
	}
	switch p.src[p.pos] {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"', '\'':
		start := p.pos
		if _, err := p.str(); err != nil {
			return nil, err
		}
		return &node{kind: kScalar, start: start, end: p.pos, lastComma: -1}, nil
	}
	start := p.pos
	for p.pos < len(p.src) {
		r, size := utf8.DecodeRune(p.src[p.pos:])
		if isSpace(r) || strings.ContainsRune("{}[]:,\"'", r) || (r == '/' && (p.at("//") || p.at("/*"))) {
			break
		}
		p.pos += size
	}
	if p.pos == start {
		return nil, p.errorf("unexpected %q", p.peekRune())
	}
	return &node{kind: kScalar, start: start, end: p.pos, lastComma: -1}, nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errorf("nested deeper than %d", maxDepth)
	}
	return nil
}

func (p *parser) object() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	n := &node{kind: kObject, start: p.pos, lastComma: -1}
	p.pos++ // {
	for {
		p.skipTrivia()
		if p.pos >= len(p.src) {
			return nil, p.errorf("unterminated object")
		}
		if p.src[p.pos] == '}' {
			p.pos++
			n.end = p.pos
			return n, nil
		}
		if len(n.members) > 0 && n.members[len(n.members)-1].comma < 0 {
			return nil, p.errorf("expected , or } in object")
		}
		m := &member{keyStart: p.pos, comma: -1}
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		m.key, m.keyEnd = key, p.pos
		p.skipTrivia()
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return nil, p.errorf("expected : after key %q", key)
		}
		p.pos++
		p.skipTrivia()
		if m.val, err = p.value(); err != nil {
			return nil, err
		}
		n.members = append(n.members, m)
		p.skipTrivia()
		if p.pos < len(p.src) && p.src[p.pos] == ',' {
			m.comma = p.pos
			p.pos++
		}
	}
}

func (p *parser) array() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	n := &node{kind: kArray, start: p.pos, lastComma: -1}
	p.pos++ // [
	needComma := false
	for {
		p.skipTrivia()
		if p.pos >= len(p.src) {
			return nil, p.errorf("unterminated array")
		}
		if p.src[p.pos] == ']' {
			p.pos++
			n.end = p.pos
			return n, nil
		}
		if needComma {
			return nil, p.errorf("expected , or ] in array")
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		n.items = append(n.items, v)
		n.lastComma = -1
		p.skipTrivia()
		needComma = true
		if p.pos < len(p.src) && p.src[p.pos] == ',' {
			n.lastComma = p.pos
			p.pos++
			needComma = false
		}
	}
}

// key reads a property name: a string or an identifier.
func (p *parser) key() (string, error) {
	if c := p.src[p.pos]; c == '"' || c == '\'' {
		return p.str()
	}
	var b strings.Builder
	start := p.pos
	for p.pos < len(p.src) {
		if p.at(`\u`) && p.pos+6 <= len(p.src) {
			v, err := strconv.ParseUint(string(p.src[p.pos+2:p.pos+6]), 16, 32)
			if err != nil {
				return "", p.errorf("bad \\u escape in key")
			}
			b.WriteRune(rune(v))
			p.pos += 6
			continue
		}
		r, size := utf8.DecodeRune(p.src[p.pos:])
		if !(r == '$' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.In(r, unicode.Mn, unicode.Mc, unicode.Pc, unicode.Nl) || r == 0x200C || r == 0x200D) {
			break
		}
		b.WriteRune(r)
		p.pos += size
	}
	if p.pos == start {
		return "", p.errorf("expected a property name, found %q", p.peekRune())
	}
	return b.String(), nil
}

// str reads a single- or double-quoted string and returns it decoded.
func (p *parser) str() (string, error) {
	q := p.src[p.pos]
	p.pos++
	var b strings.Builder
	for {
		if p.pos >= len(p.src) {
			return "", p.errorf("unterminated string")
		}
		c := p.src[p.pos]
		switch {
		case c == q:
			p.pos++
			return b.String(), nil
		case c == '\n' || c == '\r':
			return "", p.errorf("newline in string")
		case c == '\\':
			p.pos++
			if p.pos >= len(p.src) {
				return "", p.errorf("unterminated string")
			}
			e := p.src[p.pos]
			p.pos++
			switch e {
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'v':
				b.WriteByte('\v')
			case '0':
				b.WriteByte(0)
			case 'x', 'u':
				w := 2
				if e == 'u' {
					w = 4
				}
				if p.pos+w > len(p.src) {
					return "", p.errorf("bad \\%c escape", e)
				}
				v, err := strconv.ParseUint(string(p.src[p.pos:p.pos+w]), 16, 32)
				if err != nil {
					return "", p.errorf("bad \\%c escape", e)
				}
				b.WriteRune(rune(v))
				p.pos += w
			case '\r':
				if p.pos < len(p.src) && p.src[p.pos] == '\n' {
					p.pos++
				}
			case '\n':
			default:
				// Any other character stands for itself (line
				// separators included, as line continuations).
				p.pos--
				r, size := utf8.DecodeRune(p.src[p.pos:])
				if r != 0x2028 && r != 0x2029 {
					b.WriteRune(r)
				}
				p.pos += size
			}
		default:
			r, size := utf8.DecodeRune(p.src[p.pos:])
			b.WriteRune(r)
			p.pos += size
		}
	}
}
