package approval

import (
	"fmt"
	"strings"
	"unicode"
)

// Match reports whether s matches the glob pattern as a whole: "*" is any
// run of characters (none included), every other character stands for
// itself. There is no escape and no "?" or "[...]": a command such as
// "rm -rf /tmp/[x]" is matched literally.
func Match(pattern, s string) bool {
	// Greedy with one backtrack point (the last star): O(len(pattern) *
	// len(s)) at worst, no recursion.
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			mark++
			p, i = star+1, mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// MaxPattern bounds a pattern's length.
const MaxPattern = 1024

// CheckPattern says why pattern cannot be an approval rule: empty, too
// long, or with control characters (which no command line shown to an
// approver should need).
func CheckPattern(pattern string) error {
	switch {
	case strings.TrimSpace(pattern) == "":
		return fmt.Errorf("want a non-empty pattern")
	case len(pattern) > MaxPattern:
		return fmt.Errorf("pattern is longer than %d bytes", MaxPattern)
	case strings.IndexFunc(pattern, unicode.IsControl) >= 0:
		return fmt.Errorf("pattern %q has control characters", pattern)
	}
	return nil
}
