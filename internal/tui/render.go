package tui

import (
	"fmt"
	"strings"
	"sync"

	"charm.land/glamour/v2"
	"charm.land/glamour/v2/styles"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/beige-dev/beige/internal/llm"
)

// Styles of the conversation and the status line.
var (
	styleUser    = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("12"))
	styleDim     = lipgloss.NewStyle().Foreground(lipgloss.Color("8"))
	styleTool    = lipgloss.NewStyle().Foreground(lipgloss.Color("13"))
	styleNotice  = lipgloss.NewStyle().Foreground(lipgloss.Color("11"))
	styleError   = lipgloss.NewStyle().Foreground(lipgloss.Color("9"))
	styleInfo    = lipgloss.NewStyle().Foreground(lipgloss.Color("14"))
	styleStatus  = lipgloss.NewStyle().Foreground(lipgloss.Color("7")).Background(lipgloss.Color("236"))
	styleRunning = lipgloss.NewStyle().Foreground(lipgloss.Color("10"))
)

// markdown renders answers with glamour. Renderers are cached by width and
// style; it is safe for concurrent use.
type markdown struct {
	mu    sync.Mutex
	key   string
	r     *glamour.TermRenderer
	plain bool // no styling at all (tests)
}

// render returns text rendered as markdown for a terminal width wide, or
// the text as it is when rendering fails.
func (md *markdown) render(text string, width int, dark bool) string {
	if md.plain {
		return wrap(text, width)
	}
	md.mu.Lock()
	defer md.mu.Unlock()
	style := styles.DarkStyle
	if !dark {
		style = styles.LightStyle
	}
	key := fmt.Sprint(width, style)
	if md.r == nil || md.key != key {
		r, err := glamour.NewTermRenderer(glamour.WithStandardStyle(style), glamour.WithWordWrap(max(width-4, 20)), glamour.WithEmoji())
		if err != nil {
			return wrap(text, width)
		}
		md.r, md.key = r, key
	}
	out, err := md.r.Render(text)
	if err != nil {
		return wrap(text, width)
	}
	return trimBlankLines(out)
}

// trimBlankLines removes the blank lines glamour puts around a document.
func trimBlankLines(s string) string {
	lines := strings.Split(s, "\n")
	blank := func(l string) bool { return strings.TrimSpace(ansi.Strip(l)) == "" }
	for len(lines) > 0 && blank(lines[0]) {
		lines = lines[1:]
	}
	for len(lines) > 0 && blank(lines[len(lines)-1]) {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}

// wrap word-wraps plain text to width columns.
func wrap(s string, width int) string {
	if width < 10 {
		width = 10
	}
	return ansi.Wrap(s, width, "")
}

// clip shortens one line to width columns.
func clip(s string, width int) string {
	return ansi.Truncate(s, max(width, 4), "…")
}

// userLine shows what the user sent.
func userLine(text string, width int) string {
	lines := strings.Split(wrap(text, width-2), "\n")
	for i, l := range lines {
		if i == 0 {
			lines[i] = styleUser.Render("› ") + styleUser.Render(l)
		} else {
			lines[i] = "  " + styleUser.Render(l)
		}
	}
	return "\n" + strings.Join(lines, "\n")
}

// previewLines is how many lines of a tool result are shown.
const previewLines = 4

// toolLine shows a finished tool call compactly: its summary, then the
// first lines of its result.
func toolLine(summary string, res *llm.ToolResultMessage, width int) string {
	var b strings.Builder
	mark, style := "⚙", styleTool
	if res != nil && res.IsError {
		mark, style = "✗", styleError
	}
	b.WriteString(style.Render(clip(mark+" "+summary, width)))
	if res == nil {
		return b.String()
	}
	text := strings.TrimRight(res.Text(), "\n")
	for _, c := range res.Content {
		if c.Type == llm.ContentImage {
			text += fmt.Sprintf("\n[%s image]", c.MimeType)
		}
	}
	if text == "" {
		text = "(no output)"
	}
	lines := strings.Split(text, "\n")
	more := 0
	if len(lines) > previewLines {
		more = len(lines) - previewLines
		lines = lines[:previewLines]
	}
	for i, l := range lines {
		prefix := "    "
		if i == 0 {
			prefix = "  ⎿ "
		}
		b.WriteString("\n" + styleDim.Render(clip(prefix+strings.ReplaceAll(l, "\t", "  "), width)))
	}
	if more > 0 {
		b.WriteString("\n" + styleDim.Render(fmt.Sprintf("    … %d more %s", more, plural(more, "line", "lines"))))
	}
	return b.String()
}

// verboseLine is the notice of verbose mode, shown before a tool runs.
func verboseLine(summary string, width int) string {
	return styleNotice.Render(clip("🔧 "+summary, width))
}

func errorLine(msg string, width int) string {
	return styleError.Render(wrap("✗ "+msg, width))
}

func infoLine(msg string, width int) string {
	return styleInfo.Render(wrap(msg, width))
}

func dimLine(msg string, width int) string {
	return styleDim.Render(wrap(msg, width))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
