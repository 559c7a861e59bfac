package telegram

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{
			"token":        "123:abc",
			"allowedUsers": []any{float64(42), "43", "@Alice_X", "bob_the_user"},
			"agentMapping": map[string]any{"default": "main", "-100123": "travel", "-100123:7": "coder"},
			"defaults":     map[string]any{"verbose": true},
		}
	}
	c, err := ParseConfig("telegram", base())
	if err != nil {
		t.Fatal(err)
	}
	if c.APIURL != DefaultAPIURL || *c.Defaults.Verbose != true || c.Defaults.Streaming != nil {
		t.Errorf("config = %+v", c)
	}
	if got := fmt.Sprint(c.Defaults.settings()); got != "map[verbose:true]" {
		t.Errorf("settings = %s", got)
	}
	for _, tt := range []struct {
		id   int64
		name string
		ok   bool
	}{{42, "", true}, {43, "x", true}, {7, "alice_x", true}, {8, "BOB_THE_USER", true}, {9, "eve", false}, {0, "", false}} {
		if got := c.allowed(tt.id, tt.name); got != tt.ok {
			t.Errorf("allowed(%d, %q) = %v", tt.id, tt.name, got)
		}
	}
	for _, tt := range []struct {
		chat   int64
		thread int
		agent  string
	}{{5, 0, "main"}, {-100123, 0, "travel"}, {-100123, 3, "travel"}, {-100123, 7, "coder"}} {
		if got := c.agentFor(tt.chat, tt.thread); got != tt.agent {
			t.Errorf("agentFor(%d, %d) = %q, want %q", tt.chat, tt.thread, got, tt.agent)
		}
	}

	tests := []struct {
		name   string
		change func(m map[string]any)
		want   string
	}{
		{"no token", func(m map[string]any) { delete(m, "token") }, "plugins.telegram.config.token is missing"},
		{"unexpanded token", func(m map[string]any) { m["token"] = "${TELEGRAM_BOT_TOKEN}" }, "unexpanded"},
		{"no allowedUsers", func(m map[string]any) { delete(m, "allowedUsers") }, "plugins.telegram.config.allowedUsers is missing"},
		{"empty allowedUsers", func(m map[string]any) { m["allowedUsers"] = []any{} }, "allowedUsers is missing or empty"},
		{"bad user", func(m map[string]any) { m["allowedUsers"] = []any{"not a user!"} }, "neither a user id nor an @username"},
		{"negative id", func(m map[string]any) { m["allowedUsers"] = []any{float64(-5)} }, "not a Telegram user id"},
		{"fractional id", func(m map[string]any) { m["allowedUsers"] = []any{1.5} }, "not a Telegram user id"},
		{"no default agent", func(m map[string]any) { m["agentMapping"] = map[string]any{"5": "main"} }, "plugins.telegram.config.agentMapping.default is missing"},
		{"no agentMapping", func(m map[string]any) { delete(m, "agentMapping") }, "agentMapping.default is missing"},
		{"bad chat key", func(m map[string]any) { m["agentMapping"] = map[string]any{"default": "a", "general": "b"} }, `key "general" is not a chat id`},
		{"unknown field", func(m map[string]any) { m["tokne"] = "x" }, `unknown field "tokne"`},
		{"unknown default", func(m map[string]any) { m["defaults"] = map[string]any{"verbos": true} }, `unknown field "verbos"`},
		{"bad type", func(m map[string]any) { m["defaults"] = map[string]any{"verbose": "yes"} }, "defaults.verbose"},
		{"bad apiUrl", func(m map[string]any) { m["apiUrl"] = "ftp://x" }, "apiUrl"},
	}
	for _, tt := range tests {
		m := base()
		tt.change(m)
		_, err := ParseConfig("telegram", m)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "123:abc") {
			t.Errorf("%s: the token is in the error: %v", tt.name, err)
		}
	}
}

func TestConfigLogValueHidesToken(t *testing.T) {
	c, err := ParseConfig("telegram", map[string]any{
		"token": "123:supersecret", "allowedUsers": []any{"1"}, "agentMapping": map[string]any{"default": "a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("config", "cfg", c)
	if strings.Contains(b.String(), "supersecret") {
		t.Errorf("token logged: %s", b.String())
	}
}

func TestCheckAgents(t *testing.T) {
	c, err := ParseConfig("tg", map[string]any{
		"token": "1:x", "allowedUsers": []any{"1"}, "agentMapping": map[string]any{"default": "a", "5": "ghost"},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = c.checkAgents("tg", []string{"a", "b"})
	if err == nil || !strings.Contains(err.Error(), `plugins.tg.config.agentMapping.5: no agent "ghost"`) {
		t.Errorf("checkAgents: %v", err)
	}
	if err := c.checkAgents("tg", []string{"a", "ghost"}); err != nil {
		t.Error(err)
	}
}

// The defaultConfig of plugin.json is what the brief asks for.
func TestManifestDefaults(t *testing.T) {
	got, _ := json.Marshal(manifestDefaults(t))
	if string(got) != `{"defaults":{"streaming":true,"verbose":false}}` {
		t.Errorf("defaultConfig = %s", got)
	}
}
