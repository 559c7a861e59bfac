package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"time"
)

// PromptInput is what the system prompt is made of.
type PromptInput struct {
	AgentName string
	// Channel is where the user talks from ("telegram", "tui", "api"), from
	// the session key.
	Channel string
	// ToolContext and SkillContext describe the agent's extra tools and its
	// skills (as GET /api/agents returns them); either may be empty.
	ToolContext  string
	SkillContext string
	// AgentsMD is the content of the workspace's AGENTS.md (see
	// ReadAgentsMD); empty when there is none.
	AgentsMD string
	// Date is today (zero means now). Only the day is shown, so that the
	// prompt stays the same, and cacheable, all day.
	Date time.Time
}

// MaxAgentsMDBytes bounds how much of AGENTS.md goes into the system prompt.
const MaxAgentsMDBytes = 32 << 10

var systemTemplate = template.Must(template.New("system").Option("missingkey=error").Parse(
	`You are {{.AgentName}}, an AI agent running on Beige, a gateway that gives each agent a computer of its own to work in.

## Your environment
- You work inside a sandbox: a Linux container of your own. Commands you run there cannot touch the host.
- /workspace is your workspace. It is kept across conversations and restarts: keep your files, notes and projects there. Relative paths are relative to /workspace.
{{- if .Channel}}
- The user talks to you through {{.Channel}}.
{{- end}}
- Today is {{.Date}}.

## Tools
You have four core tools:
- read: read a file (text, or an image).
- write: create or overwrite a file.
- patch: replace one exact piece of text in a file.
- exec: run a shell command (sh -c) in /workspace.

Other tools are commands in /tools/bin, which is on PATH: run them with exec (for example "git status"). The documentation of each tool is under /tools/packages/<tool>/: read its README.md (and SKILL.md, if there is one) before you use a tool for the first time. The gateway checks every call: a tool you may not use answers "permission denied".
{{- if .ToolContext}}

{{.ToolContext}}
{{- end}}
{{- if .SkillContext}}

{{.SkillContext}}
{{- end}}

## How to work
- Act: use the tools to find things out and to get things done, rather than guessing or asking the user to do it.
- For files, prefer read, write and patch over cat, echo or sed.
- Command output is cut after a limit: filter long output (grep, head, tail).
- When a tool call fails, read the error and correct the call.
- Answer concisely: say what you did and what you found.
{{- if .AgentsMD}}

## Workspace instructions (/workspace/AGENTS.md)
This is the content of /workspace/AGENTS.md: your standing instructions and memory. Follow it. Keep it up to date (with patch) when you learn something you should remember in later conversations.

{{.AgentsMD}}
{{- end}}
`))

// SystemPrompt renders the system prompt.
func SystemPrompt(in PromptInput) (string, error) {
	date := in.Date
	if date.IsZero() {
		date = time.Now()
	}
	name := in.AgentName
	if name == "" {
		name = "an agent"
	}
	data := map[string]string{
		"AgentName":    name,
		"Channel":      channelName(in.Channel),
		"ToolContext":  strings.TrimSpace(in.ToolContext),
		"SkillContext": strings.TrimSpace(in.SkillContext),
		"AgentsMD":     strings.TrimSpace(in.AgentsMD),
		"Date":         date.Format("Monday, 2 January 2006"),
	}
	var b strings.Builder
	if err := systemTemplate.Execute(&b, data); err != nil {
		return "", fmt.Errorf("agent: system prompt: %w", err)
	}
	return b.String(), nil
}

func channelName(ch string) string {
	switch ch {
	case "":
		return ""
	case "tui":
		return "the terminal (beige tui)"
	case "api":
		return "the HTTP API"
	case "telegram":
		return "Telegram"
	}
	return ch
}

// agentsMDName is the file's name in the workspace.
const agentsMDName = "AGENTS.md"

// ReadAgentsMD reads <workspaceDir>/AGENTS.md on the host, at most
// MaxAgentsMDBytes of it (a note marks the cut). A missing file gives "".
// The agent can change its workspace, so the file must be a regular file:
// a symbolic link (which could point at a host file, such as the config
// with its keys), a FIFO or a folder is refused with an error.
func ReadAgentsMD(workspaceDir string) (string, error) {
	p := filepath.Join(workspaceDir, agentsMDName)
	f, err := openRegular(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxAgentsMDBytes+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	s := strings.ToValidUTF8(string(data), "\uFFFD")
	if len(data) > MaxAgentsMDBytes {
		s = cutUTF8(s, MaxAgentsMDBytes) + fmt.Sprintf("\n\n[AGENTS.md is longer than %d KB; the rest was left out. Keep it shorter.]", MaxAgentsMDBytes>>10)
	}
	return s, nil
}

// DefaultAgentsMD is the AGENTS.md SeedAgentsMD writes.
const DefaultAgentsMD = `# AGENTS.md

This file is your standing instructions and your memory. The gateway shows
its content to you at the start of every conversation, so keep here what you
should know every time, and keep it short and current (edit it with patch).

## About the user

(Nothing yet: note names, preferences and how they like things done.)

## Workspace

(Nothing yet: note where things are in /workspace.)

## Notes

(Nothing yet: lessons learned, conventions, recurring tasks.)
`

// SeedAgentsMD writes DefaultAgentsMD to <workspaceDir>/AGENTS.md unless
// something already exists there (a file, or even a dangling symbolic link,
// which is never followed). It creates the folder if needed and reports
// whether it wrote the file.
func SeedAgentsMD(workspaceDir string) (bool, error) {
	if err := os.MkdirAll(workspaceDir, 0o755); err != nil {
		return false, fmt.Errorf("seed AGENTS.md: %w", err)
	}
	p := filepath.Join(workspaceDir, agentsMDName)
	// O_EXCL fails on any existing name, symbolic links included.
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("seed AGENTS.md: %w", err)
	}
	_, err = f.WriteString(DefaultAgentsMD)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("seed AGENTS.md: %w", err)
	}
	return true, nil
}
