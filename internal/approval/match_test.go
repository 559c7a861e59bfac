package approval

import (
	"context"
	"strings"
	"testing"
	"time"
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

func TestMatchEgress(t *testing.T) {
	tests := []struct {
		egress []string
		host   string
		port   int
		want   string // "" for no match
	}{
		{[]string{"*"}, "example.com", 443, "egress:*"},
		{[]string{"*"}, "fd00::1", 443, "egress:*"},
		{[]string{"*.github.com"}, "api.github.com", 443, "egress:*.github.com"},
		{[]string{"*.github.com"}, "github.com", 443, ""},
		{[]string{"*.GitHub.com"}, "api.github.com", 443, "egress:*.GitHub.com"},
		{[]string{"example.com:443"}, "example.com", 443, "egress:example.com:443"},
		{[]string{"example.com:443"}, "example.com", 80, ""},
		{[]string{"example.com:*"}, "example.com", 8080, "egress:example.com:*"},
		{[]string{"example.com"}, "example.com.evil.org", 443, ""},
		{[]string{"10.0.0.*"}, "10.0.0.7", 22, "egress:10.0.0.*"},
		{[]string{"[fd00::*]:*"}, "fd00::1", 22, "egress:[fd00::*]:*"},
		{[]string{"*:22"}, "fd00::1", 22, "egress:*:22"},
		{[]string{"*:22"}, "host", 2222, ""},
		{[]string{"a.org", "*"}, "b.org", 1, "egress:*"},
		{nil, "b.org", 1, ""},
	}
	for _, tc := range tests {
		got, ok := Rules{Egress: tc.egress}.MatchEgress(tc.host, tc.port)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%q.MatchEgress(%q, %d) = %q, %v; want %q", tc.egress, tc.host, tc.port, got, ok, tc.want)
		}
	}
}

// "always" on a connection approves the agent's later connections to the
// same host:port, and nothing else; a tool call's "always" needs a session.
func TestAlwaysEgress(t *testing.T) {
	b := New(Options{})
	ctx := context.Background()
	ch := make(chan string, 4)
	defer b.Subscribe(func(e Event) {
		if e.Type == EventPending {
			ch <- e.Request.ID
		}
	})()
	go func() {
		if err := b.Answer(<-ch, Answer{Decision: Always, By: "a", Via: "api"}); err != nil {
			t.Error(err)
		}
	}()
	req := Request{Agent: "a", Tool: EgressTool, Args: []string{"x.org:443", "CONNECT"}, Rule: "egress:*"}
	if out, err := b.Wait(ctx, req, time.Second); err != nil || !out.Approved || out.Remembered {
		t.Fatalf("first = %+v, %v", out, err)
	}
	if !b.EgressRemembered("a", "x.org:443") {
		t.Error("x.org:443 not remembered")
	}
	for _, c := range [][2]string{{"b", "x.org:443"}, {"a", "x.org:80"}, {"a", "y.org:443"}} {
		if b.EgressRemembered(c[0], c[1]) {
			t.Errorf("remembered for %v", c)
		}
	}
	req.Args = []string{"x.org:443", "GET"}
	if out, err := b.Wait(ctx, req, time.Second); err != nil || !out.Remembered {
		t.Errorf("second = %+v, %v", out, err)
	}
}
