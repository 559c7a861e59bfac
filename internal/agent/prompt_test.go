package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm/llmtest"
)

func TestSystemPrompt(t *testing.T) {
	p, err := SystemPrompt(PromptInput{
		AgentName: "travel", Channel: "telegram",
		ToolContext:  "## Available Tools\n\n### git\nVersion control.",
		SkillContext: "## Available Skills\n\n### code-review\nat /skills/code-review/",
		AgentsMD:     "# AGENTS.md\nThe user is Del. {{not a template}}",
		Date:         time.Date(2026, 3, 5, 10, 0, 0, 0, time.UTC),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"You are travel", "sandbox", "/workspace is your workspace", "read, write", "exec",
		"/tools/bin", "/tools/packages/<tool>/", "Telegram", "Thursday, 5 March 2026",
		"### git\nVersion control.", "### code-review", "The user is Del. {{not a template}}", "/workspace/AGENTS.md",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, p)
		}
	}
	bare, _ := SystemPrompt(PromptInput{AgentName: "x"})
	if strings.Contains(bare, "AGENTS.md") || strings.Contains(bare, "talks to you through") || strings.Contains(bare, "\n\n\n") {
		t.Errorf("bare prompt:\n%s", bare)
	}
}

func TestAgentsMDInPrompt(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	ws := t.TempDir()
	if created, err := SeedAgentsMD(ws); err != nil || !created {
		t.Fatalf("seed: %v %v", created, err)
	}
	os.WriteFile(filepath.Join(ws, "AGENTS.md"), []byte("Always answer in French."), 0o644)
	e.configure(func(s *AgentSetup) {
		s.AgentsMD = func() (string, error) { return ReadAgentsMD(ws) }
		s.ToolContext = "TOOLCTX-1"
	})
	e.srv.Enqueue(llmtest.Text("oui"))
	e.prompt("hello")
	sys := e.srv.Last().System()
	if !strings.Contains(sys, "Always answer in French.") || !strings.Contains(sys, "TOOLCTX-1") || !strings.Contains(sys, "the HTTP API") {
		t.Errorf("system %q", sys)
	}
	// A symbolic link is refused: the prompt goes on without it.
	os.Remove(filepath.Join(ws, "AGENTS.md"))
	secret := filepath.Join(t.TempDir(), "config.json5")
	os.WriteFile(secret, []byte("apiKey: SECRET-KEY"), 0o600)
	os.Symlink(secret, filepath.Join(ws, "AGENTS.md"))
	e.prompt("again")
	if sys := e.srv.Last().System(); strings.Contains(sys, "SECRET-KEY") {
		t.Error("AGENTS.md symlink followed")
	}
	if !strings.Contains(e.logs.String(), "AGENTS.md not read") {
		t.Error("refusal not logged")
	}
}

func TestReadAgentsMD(t *testing.T) {
	ws := t.TempDir()
	if s, err := ReadAgentsMD(ws); s != "" || err != nil {
		t.Errorf("missing: %q %v", s, err)
	}
	p := filepath.Join(ws, "AGENTS.md")
	os.WriteFile(p, []byte(strings.Repeat("ü", MaxAgentsMDBytes)), 0o644)
	s, err := ReadAgentsMD(ws)
	if err != nil || !strings.Contains(s, "the rest was left out") || len(s) > MaxAgentsMDBytes+200 || strings.ContainsRune(s, '\uFFFD') {
		t.Errorf("long: %d bytes, %v", len(s), err)
	}
	os.Remove(p)
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skip("no fifo:", err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadAgentsMD(ws); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("fifo accepted")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadAgentsMD blocked on a fifo")
	}
	os.Remove(p)
	os.Mkdir(p, 0o755)
	if _, err := ReadAgentsMD(ws); err == nil {
		t.Error("folder accepted")
	}
}

func TestSeedAgentsMD(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "new", "workspace")
	created, err := SeedAgentsMD(ws)
	if err != nil || !created {
		t.Fatalf("%v %v", created, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "AGENTS.md")); string(b) != DefaultAgentsMD {
		t.Errorf("content %q", b)
	}
	os.WriteFile(filepath.Join(ws, "AGENTS.md"), []byte("mine"), 0o644)
	if created, err := SeedAgentsMD(ws); created || err != nil {
		t.Errorf("second seed: %v %v", created, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "AGENTS.md")); string(b) != "mine" {
		t.Errorf("overwritten: %q", b)
	}
	// A dangling link is not followed.
	ws2 := t.TempDir()
	target := filepath.Join(t.TempDir(), "outside")
	os.Symlink(target, filepath.Join(ws2, "AGENTS.md"))
	if created, err := SeedAgentsMD(ws2); created || err != nil {
		t.Errorf("seed over link: %v %v", created, err)
	}
	if _, err := os.Stat(target); err == nil {
		t.Error("seed wrote through a symbolic link")
	}
}

// TestPromptChannelOption: a prompt's Channel (a plugin channel's name)
// is the session's channel, not the session key's first part.
func TestPromptChannelOption(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.srv.Enqueue(llmtest.Text("ok"))
	if _, err := e.m.Prompt(context.Background(), testAgent, "api:1", "hello", &PromptOptions{Channel: "github"}); err != nil {
		t.Fatal(err)
	}
	if sys := e.srv.Last().System(); !strings.Contains(sys, "through github") || strings.Contains(sys, "HTTP API") {
		t.Errorf("system %q", sys)
	}
}
