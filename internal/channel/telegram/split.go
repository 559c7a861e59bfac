package telegram

import (
	"strings"
	"unicode/utf8"
)

// MaxMessageLen is Telegram's limit on the text of one message, in UTF-16
// code units (what Telegram counts), after entities are parsed.
const MaxMessageLen = 4096

// utf16Len is the length of s in UTF-16 code units; an invalid byte counts
// as one (Telegram would see U+FFFD).
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// fitPrefix returns the length in bytes of the longest prefix of s, ending
// on a rune boundary, that is at most limit UTF-16 units long.
func fitPrefix(s string, limit int) int {
	n := 0
	for i, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if n+w > limit {
			return i
		}
		n += w
	}
	return len(s)
}

// splitText cuts s into pieces of at most limit UTF-16 units whose
// concatenation is s. A cut goes after a blank line if there is one in the
// last quarter of the piece, else after a line break there, else after a
// space there, else at the limit (on a rune boundary): so every piece but
// the last is at least three quarters full, and a text of n units arrives
// in at most ceil(n / (limit*3/4)) pieces — a 10,000-character answer in 3
// messages of 4,096.
func splitText(s string, limit int) []string {
	if limit < 2 {
		limit = 2 // room for any rune
	}
	var out []string
	for s != "" {
		n := fitPrefix(s, limit)
		if n == len(s) {
			out = append(out, s)
			break
		}
		if n == 0 { // cannot happen with limit >= 2; never loop forever
			_, n = utf8.DecodeRuneInString(s)
		}
		cut := breakPoint(s[:n], fitPrefix(s, limit*3/4))
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}

// breakPoint chooses where to cut window (the longest prefix that fits):
// after the last blank line, line break or space at or after min, or at
// the end of the window.
func breakPoint(window string, min int) int {
	if min < 0 || min > len(window) {
		min = 0
	}
	tail := window[min:]
	for _, sep := range []string{"\n\n", "\n", " "} {
		if i := strings.LastIndex(tail, sep); i >= 0 && min+i+len(sep) > 0 {
			return min + i + len(sep)
		}
	}
	return len(window)
}
