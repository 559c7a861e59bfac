package telegram

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMarkdownV2(t *testing.T) {
	tests := []struct{ in, want string }{
		{"hello world", "hello world"},
		{"Done. Cost: $5 (approx)!", `Done\. Cost: $5 \(approx\)\!`},
		{"**bold** text", "*bold* text"},
		{"__bold__", "*bold*"},
		{"*it* and _it_", "_it_ and _it_"},
		{"snake_case_name", `snake\_case\_name`},
		{"2 * 3 * 4 = 24", `2 \* 3 \* 4 \= 24`},
		{"`a_b*c`", "`a_b*c`"},
		{"``a ` b``", "`a \\` b`"},
		{"unclosed `code", "unclosed \\`code"},
		{"~~gone~~", "~gone~"},
		{"**bold _it_ bold**", "*bold _it_ bold*"},
		{"*a*_b_", `_a_\_b\_`},
		{"[Beige](https://example.com/a_b)", "[Beige](https://example.com/a_b)"},
		{"[x](https://e.com/a))", `[x](https://e.com/a)\)`},
		{"[x](javascript:alert)", `\[x\]\(javascript:alert\)`},
		{"# Title", "*Title*"},
		{"## Title ##", "*Title*"},
		{"#hashtag", `\#hashtag`},
		{"- one\n  * two\n+ three", "• one\n  • two\n• three"},
		{"1. first", `1\. first`},
		{"> quote", `\> quote`},
		{"a\\*b", `a\*b`},
		{`C:\path`, `C:\\path`},
		{"```go\nx := `y` \\ z\n```\nafter.", "```go\nx := \\`y\\` \\\\ z\n```\nafter\\."},
		{"```\nopen block", "```\nopen block\n```"},
		{"~~~\ncode\n~~~", "```\ncode\n```"},
		{"```we!rd lang\nx\n```", "```\nx\n```"},
		{"| a | b |\n|---|---|", `\| a \| b \|` + "\n" + `\|\-\-\-\|\-\-\-\|`},
		{"**", `\*\*`},
		{"Привет, **мир**! 🎉", "Привет, *мир*\\! 🎉"},
	}
	for _, tt := range tests {
		got := markdownV2(tt.in, nil)
		if got != tt.want {
			t.Errorf("markdownV2(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
		if _, err := checkMarkdownV2(got); err != nil {
			t.Errorf("markdownV2(%q) = %q: %v", tt.in, got, err)
		}
	}
}

func TestMarkdownV2InsideFence(t *testing.T) {
	f := &fence{marker: "```", lang: "go"}
	if got, want := markdownV2("x := 1\n```\ndone.", f), "```go\nx := 1\n```\ndone\\."; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := markdownV2("```\ndone.", f), "done\\."; got != want {
		t.Errorf("a piece starting with the block's end: got %q, want %q", got, want)
	}
	if got, want := markdownV2("still code", f), "```go\nstill code\n```"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestFenceAfter(t *testing.T) {
	tests := []struct {
		in   string
		open bool
		lang string
	}{
		{"text", false, ""},
		{"```python\nx", true, "python"},
		{"```python\nx\n```\n", false, ""},
		{"````\n```\n", true, ""}, // a shorter run does not close
		{"~~~sh\nls\n", true, "sh"},
		{"inline ```x``` here", false, ""},
	}
	for _, tt := range tests {
		f, open := fenceAfter(tt.in)
		if open != tt.open || (open && f.lang != tt.lang) {
			t.Errorf("fenceAfter(%q) = %+v, %v; want open=%v lang=%q", tt.in, f, open, tt.open, tt.lang)
		}
	}
}

func TestSplitText(t *testing.T) {
	para := strings.Repeat("a", 3500) + "\n\n" + strings.Repeat("b", 1000)
	got := splitText(para, MaxMessageLen)
	if len(got) != 2 || got[0] != strings.Repeat("a", 3500)+"\n\n" {
		t.Errorf("not cut at the blank line: %d pieces, first %d long", len(got), len(got[0]))
	}
	// A blank line too early is not used: the piece would be too short.
	early := strings.Repeat("a", 100) + "\n\n" + strings.Repeat("b", 5000)
	if got := splitText(early, MaxMessageLen); len(got[0]) != MaxMessageLen {
		t.Errorf("first piece %d long, want a full %d", len(got[0]), MaxMessageLen)
	}
	// 10,000 characters: 3 messages, whatever the text.
	for _, s := range []string{
		strings.Repeat("x", 10000),
		strings.Repeat("word ", 2000),
		strings.Repeat(strings.Repeat("y", 99)+"\n", 100),
		strings.Repeat(strings.Repeat("z", 2400)+"\n\n", 5)[:10000],
	} {
		if n := len(splitText(s, MaxMessageLen)); n != 3 {
			t.Errorf("%q...: %d pieces, want 3", s[:10], n)
		}
	}
	// Emoji count two units each and are never cut in half.
	emoji := strings.Repeat("🎉", 3000)
	pieces := splitText(emoji, MaxMessageLen)
	for _, p := range pieces {
		if utf16Len(p) > MaxMessageLen || !utf8.ValidString(p) {
			t.Errorf("bad piece: %d units", utf16Len(p))
		}
	}
	if len(pieces) != 2 || strings.Join(pieces, "") != emoji {
		t.Errorf("%d pieces", len(pieces))
	}
}

func TestParseCommand(t *testing.T) {
	tests := []struct {
		text, bot, name, args string
		kind                  commandKind
	}{
		{"/new", "beige_bot", "new", "", isCommand},
		{"/v on", "beige_bot", "verbose", "on", isCommand},
		{"/S  off ", "beige_bot", "streaming", "off", isCommand},
		{"/model openai/gpt-4o", "", "model", "openai/gpt-4o", isCommand},
		{"/status@Beige_Bot", "beige_bot", "status", "", isCommand},
		{"/status@other_bot", "beige_bot", "", "", forOtherBot},
		{"/status@other_bot", "", "status", "", isCommand},
		{"/help", "", "start", "", isCommand},
		{"/etc/hosts is a file", "", "", "", notCommand},
		{"/unknown thing", "", "", "", notCommand},
		{"hello /new", "", "", "", notCommand},
		{"/verbose\non", "", "verbose", "on", isCommand},
	}
	for _, tt := range tests {
		name, args, kind := parseCommand(tt.text, tt.bot)
		if name != tt.name || args != tt.args || kind != tt.kind {
			t.Errorf("parseCommand(%q, %q) = %q, %q, %v; want %q, %q, %v", tt.text, tt.bot, name, args, kind, tt.name, tt.args, tt.kind)
		}
	}
}

func TestRedactToken(t *testing.T) {
	s := redactToken(`Post "https://api.telegram.org/bot123:ABCDEFGHIJ/getMe": x; ABCDEFGHIJ`, "123:ABCDEFGHIJ")
	if strings.Contains(s, "ABCDEFGHIJ") {
		t.Errorf("not redacted: %s", s)
	}
}

// checkMarkdownV2 checks s the way Telegram parses MarkdownV2: every
// special character outside entities escaped, entities well nested, not
// empty and closed, no underline ("__") or spoiler ("||"), which the
// converter never means. It returns the length of the text shown, in
// UTF-16 units.
func checkMarkdownV2(s string) (int, error) {
	type open struct {
		marker string
		at     int
	}
	var stack []open
	vis := 0
	units := func(r rune) int {
		if r >= 0x10000 {
			return 2
		}
		return 1
	}
	toggle := func(m string, i int) error {
		if n := len(stack); n > 0 && stack[n-1].marker == m {
			if stack[n-1].at == vis {
				return fmt.Errorf("empty %s entity at %d", m, i)
			}
			stack = stack[:n-1]
			return nil
		}
		for _, o := range stack {
			if o.marker == m {
				return fmt.Errorf("%s at %d closes across %s", m, i, stack[len(stack)-1].marker)
			}
		}
		stack = append(stack, open{m, vis})
		return nil
	}
	// code scans code text from i to an unescaped end marker; only ` and
	// \ may be escaped. It returns the index after the marker.
	code := func(i int, end string, multiline bool) (int, error) {
		start := vis
		for i < len(s) {
			switch {
			case s[i] == '\\':
				if i+1 >= len(s) || (s[i+1] != '`' && s[i+1] != '\\') {
					return 0, fmt.Errorf("bad escape in code at %d", i)
				}
				vis++
				i += 2
			case strings.HasPrefix(s[i:], end):
				if vis == start {
					return 0, fmt.Errorf("empty code at %d", i)
				}
				return i + len(end), nil
			case s[i] == '`':
				return 0, fmt.Errorf("unescaped ` in code at %d", i)
			case s[i] == '\n' && !multiline:
				return 0, fmt.Errorf("line break in inline code at %d", i)
			default:
				r, n := utf8.DecodeRuneInString(s[i:])
				vis += units(r)
				i += n
			}
		}
		return 0, fmt.Errorf("unclosed code")
	}
	for i := 0; i < len(s); {
		c := s[i]
		var err error
		switch c {
		case '\\':
			if i+1 >= len(s) || s[i+1] < 1 || s[i+1] > 126 {
				return 0, fmt.Errorf("bad escape at %d", i)
			}
			vis++
			i += 2
			continue
		case '`':
			if strings.HasPrefix(s[i:], "```") {
				nl := strings.IndexByte(s[i:], '\n')
				if nl < 0 {
					return 0, fmt.Errorf("pre without a line break at %d", i)
				}
				// The line break before the closing ``` is not shown.
				j, err := code(i+nl+1, "\n```", true)
				if err != nil {
					// An empty last line: "```\n```".
					return 0, err
				}
				i = j
				continue
			}
			j, err := code(i+1, "`", false)
			if err != nil {
				return 0, err
			}
			i = j
			continue
		case '*', '~':
			err = toggle(string(c), i)
		case '_':
			if i+1 < len(s) && s[i+1] == '_' {
				return 0, fmt.Errorf("underline marker at %d", i)
			}
			err = toggle("_", i)
		case '[':
			for _, o := range stack {
				if o.marker == "[" {
					return 0, fmt.Errorf("link in link at %d", i)
				}
			}
			stack = append(stack, open{"[", vis})
		case ']':
			n := len(stack)
			if n == 0 || stack[n-1].marker != "[" || stack[n-1].at == vis {
				return 0, fmt.Errorf("bad ] at %d", i)
			}
			stack = stack[:n-1]
			if i+1 >= len(s) || s[i+1] != '(' {
				return 0, fmt.Errorf("link without a URL at %d", i)
			}
			j := i + 2
			for ; j < len(s) && s[j] != ')'; j++ {
				if s[j] == '\\' {
					j++
				}
			}
			if j >= len(s) {
				return 0, fmt.Errorf("unclosed URL at %d", i)
			}
			i = j + 1
			continue
		case '|', '(', ')', '>', '#', '+', '-', '=', '{', '}', '.', '!':
			return 0, fmt.Errorf("unescaped %q at %d", c, i)
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			vis += units(r)
			i += n
			continue
		}
		if err != nil {
			return 0, err
		}
		i++
	}
	if len(stack) > 0 {
		return 0, fmt.Errorf("unclosed %s", stack[len(stack)-1].marker)
	}
	return vis, nil
}

// FuzzSplitText: the pieces add up to the text, each fits the limit and
// all but the last are at least three quarters full.
func FuzzSplitText(f *testing.F) {
	f.Add("hello\n\nworld how are you", 8)
	f.Add(strings.Repeat("🎉a ", 40), 7)
	f.Add("\xff\xfe bad utf8", 3)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit = 2 + abs(limit)%300
		pieces := splitText(s, limit)
		if strings.Join(pieces, "") != s {
			t.Fatalf("pieces do not add up")
		}
		for i, p := range pieces {
			if p == "" {
				t.Fatalf("empty piece %d", i)
			}
			if n := utf16Len(p); n > limit {
				t.Fatalf("piece %d: %d units > %d", i, n, limit)
			}
			if i < len(pieces)-1 && utf16Len(p) < limit*3/4-1 {
				t.Fatalf("piece %d: only %d units of %d", i, utf16Len(p), limit)
			}
		}
	})
}

// FuzzRender renders text as an answer is sent: cut into pieces, each
// converted to MarkdownV2 (reopening a fenced block the cut went
// through). Every message must parse and show no more than its piece —
// so no more than MaxMessageLen.
func FuzzRender(f *testing.F) {
	f.Add("**bold** _it_ `code` [l](https://x.y) # h\n- a\n```go\nx\n```", 40)
	f.Add("```\n"+strings.Repeat("code line\n", 20)+"```\ntext_after", 30)
	f.Add("*a*_b_ ~~s~~ \\* ``x`` ***y*** __z__ a_b_c", 16)
	f.Add("[a](http://x/(y)) [*b*](https://c) ![img](https://d)", 20)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit = 8 + abs(limit)%200
		off := 0
		for _, piece := range splitText(s, limit) {
			var in *fence
			if fc, open := fenceAfter(s[:off]); open {
				in = &fc
			}
			off += len(piece)
			body := pieceText(piece)
			if body == "" {
				continue
			}
			md := markdownV2(body, in)
			vis, err := checkMarkdownV2(md)
			if err != nil {
				t.Fatalf("markdownV2(%q, %v) = %q: %v", body, in, md, err)
			}
			if n := utf16Len(body); vis > n {
				t.Fatalf("markdownV2(%q) shows %d units, more than the %d of its source", body, vis, n)
			}
		}
	})
}

func abs(n int) int {
	if n < 0 {
		if n == -n { // math.MinInt
			return 0
		}
		return -n
	}
	return n
}
