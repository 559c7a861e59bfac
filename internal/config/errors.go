package config

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem in a config file, with where it is.
type Error struct {
	File string // the config file as the user named it
	Pos  Pos    // zero when the problem has no one place (e.g. the file is missing)
	Path string // JSON path, e.g. agents.travel.model.provider
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Pos.Line > 0 {
			fmt.Fprintf(&b, ":%d:%d", e.Pos.Line, e.Pos.Col)
		}
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found in one load, in file order.
type ErrorList []*Error

func (l ErrorList) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

func (l ErrorList) sort() {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i].Pos, l[j].Pos
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

// suggest returns the known word closest to s, or "" when none is close.
func suggest(s string, known []string) string {
	best, bestD := "", 1<<30
	for _, k := range known {
		d := editDistance(strings.ToLower(s), strings.ToLower(k))
		if d < bestD {
			best, bestD = k, d
		}
	}
	limit := 2
	if len(s) <= 3 {
		limit = 1
	}
	if bestD <= limit || (bestD <= len(s)/3 && bestD <= 3) {
		return best
	}
	return ""
}

// editDistance is the Damerau-Levenshtein (optimal string alignment)
// distance, so a swap of two letters ("modle") counts as one edit.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
