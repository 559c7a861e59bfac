package policy

import "testing"

func TestCheck(t *testing.T) {
	e := New(map[string][]string{
		"travel": {"git"},
		"dev":    {"git", "browser.open"},
		"bare":   {},
	})
	cases := []struct {
		agent, tool string
		want        string // "" = allowed
	}{
		{"travel", "git", ""},
		{"travel", "exec", ""},
		{"travel", "read", ""},
		{"bare", "write", ""},
		{"bare", "patch", ""},
		{"dev", "browser.open", ""},
		{"travel", "browser.open", "Permission denied: tool 'browser.open' not allowed for agent 'travel'"},
		{"bare", "git", "Permission denied: tool 'git' not allowed for agent 'bare'"},
		{"dev", "browser", "Permission denied: tool 'browser' not allowed for agent 'dev'"},
		{"dev", "Git", "Permission denied: tool 'Git' not allowed for agent 'dev'"},
		{"ghost", "exec", "Permission denied: tool 'exec' not allowed for agent 'ghost'"},
		{"ghost", "git", "Permission denied: tool 'git' not allowed for agent 'ghost'"},
		{"travel", "", "Permission denied: tool '' not allowed for agent 'travel'"},
	}
	for _, tc := range cases {
		err := e.Check(tc.agent, tc.tool)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Check(%q, %q) = %q, want %q", tc.agent, tc.tool, got, tc.want)
		}
	}
}
