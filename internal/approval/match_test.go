package approval

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	cases := []struct {
		pattern, s string
		want       bool
	}{
		{"git push*", "git push", true},
		{"git push*", "git push origin main", true},
		{"git push*", "git pull", false},
		{"git push*", " git push", false},
		{"rm -rf*", "rm -rf /", true},
		{"rm -rf*", "rm -r -f /", false},
		{"*", "", true},
		{"*", "anything at all", true},
		{"", "", true},
		{"", "x", false},
		{"curl*", "curl", true},
		{"*curl*", "cd x && curl http://e", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbYcZ", false},
		{"a*b", "abab", true},
		{"[x]", "[x]", true},
		{"[x]", "x", false},
		{"a?c", "abc", false},
		{"a?c", "a?c", true},
		{"**x", "x", true},
	}
	for _, tc := range cases {
		if got := Match(tc.pattern, tc.s); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

func TestCheckPattern(t *testing.T) {
	for _, bad := range []string{"", "  ", "a\nb", "a\x00", strings.Repeat("a", MaxPattern+1)} {
		if CheckPattern(bad) == nil {
			t.Errorf("CheckPattern(%q) = nil", bad)
		}
	}
	if err := CheckPattern("git push*"); err != nil {
		t.Error(err)
	}
}

func FuzzMatch(f *testing.F) {
	f.Add("a*b*c", "aXbYc")
	f.Add("*", "")
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 64 || len(s) > 256 {
			return
		}
		got := Match(pattern, s)
		if !strings.Contains(pattern, "*") && got != (pattern == s) {
			t.Fatalf("Match(%q, %q) = %v without a star", pattern, s, got)
		}
		if got && !Match(pattern+"*", s+"tail") {
			t.Fatalf("Match(%q, %q) but not with a trailing star and more text", pattern, s)
		}
	})
}
