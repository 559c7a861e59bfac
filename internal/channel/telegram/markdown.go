package telegram

import (
	"regexp"
	"strings"
)

// Answers are sent with parse_mode MarkdownV2. Models write CommonMark-ish
// Markdown, which MarkdownV2 does not accept as it is (every one of
// _*[]()~`>#+-=|{}.! must be escaped outside entities), so markdownV2
// converts a safe subset and escapes everything else:
//
//	**bold**, __bold__         *bold*
//	*italic*, _italic_         _italic_
//	~~strike~~                 ~strike~
//	`code`                     `code`
//	```lang fenced blocks```   pre blocks
//	[text](http://...)         links (http, https, tg, mailto)
//	# Heading                  *Heading* (bold line)
//	- item, * item, + item     • item
//
// The conversion only drops or replaces characters, so the text Telegram
// shows is never longer than the source: a piece of at most MaxMessageLen
// units of source is a valid message. Should Telegram still refuse the
// result ("can't parse entities"), the piece is sent again as plain text.

// mdSpecial are the characters MarkdownV2 wants escaped outside entities.
const mdSpecial = "_*[]()~`>#+-=|{}.!\\"

// escapeMarkdownV2 escapes every character MarkdownV2 treats specially, so
// that s shows as it is.
func escapeMarkdownV2(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(mdSpecial, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// escapeCode escapes the text of a code span or pre block.
func escapeCode(s string) string {
	if !strings.ContainsAny(s, "`\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '`' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// escapeURL escapes the URL of an inline link.
func escapeURL(s string) string {
	return strings.NewReplacer(`\`, `\\`, `)`, `\)`).Replace(s)
}

// fence is an open fenced code block: its marker ("```", "~~~~") and
// language.
type fence struct {
	marker string
	lang   string
}

var (
	fenceOpenRE = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})[ \t]*([^`]*)$")
	langRE      = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)
	headingRE   = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$`)
	bulletRE    = regexp.MustCompile(`^([ \t]*)[-*+][ \t]+(.*)$`)
)

// openFence reports whether line opens a fenced block.
func openFence(line string) (fence, bool) {
	m := fenceOpenRE.FindStringSubmatch(strings.TrimRight(line, "\r"))
	if m == nil {
		return fence{}, false
	}
	lang, _, _ := strings.Cut(strings.TrimSpace(m[2]), " ")
	if !langRE.MatchString(lang) {
		lang = ""
	}
	return fence{marker: m[1], lang: lang}, true
}

// closes reports whether line closes the block f.
func (f fence) closes(line string) bool {
	t := strings.TrimRight(line, " \t\r")
	indent := len(t) - len(strings.TrimLeft(t, " "))
	t = t[indent:]
	return indent <= 3 && len(t) >= len(f.marker) && strings.Trim(t, f.marker[:1]) == ""
}

// fenceAfter returns the fenced block still open at the end of src.
func fenceAfter(src string) (fence, bool) {
	var cur fence
	open := false
	for line := range strings.SplitSeq(src, "\n") {
		switch {
		case open && cur.closes(line):
			open = false
		case !open:
			cur, open = openFence(line)
		}
	}
	return cur, open
}

// markdownV2 converts src, Markdown as a model writes it, into Telegram's
// MarkdownV2 (see the note above). If in is not nil, src starts inside
// that fenced block (the answer was cut inside it). A block left open is
// closed; an empty block is left out (Telegram refuses empty entities).
func markdownV2(src string, in *fence) string {
	lines := strings.Split(src, "\n")
	out := make([]string, 0, len(lines))
	block := func(f fence, from int) int {
		end := len(lines)
		for k := from; k < len(lines); k++ {
			if f.closes(lines[k]) {
				end = k
				break
			}
		}
		code := strings.Join(lines[from:end], "\n")
		if code != "" {
			out = append(out, "```"+f.lang+"\n"+escapeCode(code)+"\n```")
		}
		return end + 1 // past the closing line
	}
	i := 0
	if in != nil {
		i = block(*in, 0)
	}
	for i < len(lines) {
		line := lines[i]
		if f, ok := openFence(line); ok {
			i = block(f, i+1)
			continue
		}
		i++
		var w mdWriter
		if m := headingRE.FindStringSubmatch(line); m != nil && m[1] != "" {
			w.marker("*")
			w.inline(m[1], inlineState{bold: true})
			w.marker("*")
		} else if m := bulletRE.FindStringSubmatch(line); m != nil && m[2] != "" {
			w.raw(m[1] + "• ")
			w.inline(m[2], inlineState{})
		} else {
			w.inline(line, inlineState{})
		}
		out = append(out, w.String())
	}
	return strings.Join(out, "\n")
}

// mdWriter builds MarkdownV2, remembering whether the last thing written
// was an italic marker (MarkdownV2 reads "__" as underline, so an italic
// span may not start right where another ends).
type mdWriter struct {
	strings.Builder
	afterItalic bool
}

func (w *mdWriter) raw(s string) {
	if s != "" {
		w.WriteString(s)
		w.afterItalic = false
	}
}

func (w *mdWriter) marker(s string) {
	w.WriteString(s)
	w.afterItalic = s == "_"
}

func (w *mdWriter) literal(c byte) {
	if strings.IndexByte(mdSpecial, c) >= 0 {
		w.WriteByte('\\')
	}
	w.WriteByte(c)
	w.afterItalic = false
}

// inlineState says which entities enclose the text being converted; they
// do not nest in themselves.
type inlineState struct {
	bold, italic, strike bool
}

// inline converts one line of text.
func (w *mdWriter) inline(s string, st inlineState) {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]):
			w.literal(s[i+1])
			i += 2
			continue
		case c == '`':
			n := runLen(s, i, '`')
			if j := findBackticks(s, i+n, n); j > i+n {
				w.marker("`")
				w.raw(escapeCode(s[i+n : j]))
				w.marker("`")
				i = j + n
				continue
			}
			for range n {
				w.literal('`')
			}
			i += n
			continue
		case c == '[':
			if text, url, end, ok := parseLink(s, i); ok {
				w.marker("[")
				w.raw(escapeMarkdownV2(text))
				w.marker("](" + escapeURL(url) + ")")
				i = end
				continue
			}
		case c == '*' || c == '_':
			n := runLen(s, i, c)
			if n == 2 && !st.bold {
				if j := findCloser(s, i, 2); j >= 0 {
					w.marker("*")
					inner := st
					inner.bold = true
					w.inline(s[i+2:j], inner)
					w.marker("*")
					i = j + 2
					continue
				}
			}
			if n == 1 && !st.italic && !w.afterItalic {
				if j := findCloser(s, i, 1); j >= 0 {
					w.marker("_")
					inner := st
					inner.italic = true
					w.inline(s[i+1:j], inner)
					w.marker("_")
					i = j + 1
					continue
				}
			}
			for range n {
				w.literal(c)
			}
			i += n
			continue
		case c == '~' && strings.HasPrefix(s[i:], "~~") && runLen(s, i, '~') == 2 && !st.strike:
			if j := findCloser(s, i, 2); j >= 0 {
				w.marker("~")
				inner := st
				inner.strike = true
				w.inline(s[i+2:j], inner)
				w.marker("~")
				i = j + 2
				continue
			}
		}
		w.literal(c)
		i++
	}
}

// findCloser finds the delimiter run closing the emphasis that opens at
// s[open] (n characters of s[open]): the same run, not touching more of
// the character, with no space just inside; for '_' also not inside a
// word. Code spans and escapes are skipped. It returns -1 if there is none.
func findCloser(s string, open, n int) int {
	c := s[open]
	start := open + n
	if start >= len(s) || isSpace(s[start]) {
		return -1
	}
	if c == '_' && open > 0 && isWordByte(s[open-1]) {
		return -1
	}
	for j := start; j < len(s); {
		switch s[j] {
		case '\\':
			j += 2
			continue
		case '`':
			m := runLen(s, j, '`')
			if k := findBackticks(s, j+m, m); k > j+m {
				j = k + m
			} else {
				j += m
			}
			continue
		case c:
			m := runLen(s, j, c)
			if m == n && j > start && !isSpace(s[j-1]) &&
				(c != '_' || j+m >= len(s) || !isWordByte(s[j+m])) {
				return j
			}
			j += m
			continue
		}
		j++
	}
	return -1
}

// findBackticks finds a run of exactly n backticks at or after from.
func findBackticks(s string, from, n int) int {
	for j := from; j < len(s); {
		if s[j] != '`' {
			j++
			continue
		}
		m := runLen(s, j, '`')
		if m == n {
			return j
		}
		j += m
	}
	return -1
}

// parseLink parses [text](url) at s[i]; it returns the text, the URL and
// where the link ends. Only absolute http(s), tg and mailto links are
// taken; the text is shown as it is.
func parseLink(s string, i int) (text, url string, end int, ok bool) {
	k := strings.IndexByte(s[i+1:], ']')
	if k <= 0 {
		return "", "", 0, false
	}
	k += i + 1
	text = s[i+1 : k]
	if strings.ContainsAny(text, "[") || k+1 >= len(s) || s[k+1] != '(' {
		return "", "", 0, false
	}
	m := strings.IndexByte(s[k+2:], ')')
	if m <= 0 {
		return "", "", 0, false
	}
	url = s[k+2 : k+2+m]
	if strings.ContainsAny(url, " \t(<>\"\\`") || strings.TrimSpace(text) == "" {
		return "", "", 0, false
	}
	lower := strings.ToLower(url)
	if !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") &&
		!strings.HasPrefix(lower, "tg://") && !strings.HasPrefix(lower, "mailto:") {
		return "", "", 0, false
	}
	return text, url, k + 2 + m + 1, true
}

func runLen(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

func isASCIIPunct(c byte) bool {
	return c >= '!' && c <= '/' || c >= ':' && c <= '@' || c >= '[' && c <= '`' || c >= '{' && c <= '~'
}
