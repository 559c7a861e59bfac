package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/beige-dev/beige/internal/llm"
)

// History returns the messages of the session's file in the order they
// were written (turns since summarised included), for a client that shows
// the conversation (the web console's resume). A session without a file
// yet has none. It reads the file without taking the session's turn: a
// line being written is left out.
func (m *Manager) History(ctx context.Context, agent, sessionKey string) ([]llm.Message, error) {
	if _, err := m.setup(ctx, agent); err != nil {
		return nil, err
	}
	if sessionKey == "" {
		sessionKey = DefaultSessionKey(agent)
	}
	m.mu.Lock()
	e, ok := m.index[sessionKey]
	m.mu.Unlock()
	if !ok || e.AgentName != agent || e.SessionFile == "" {
		return nil, nil
	}
	sf, err := readSessionFile(e.SessionFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read session %q: %w", sessionKey, err)
	}
	var out []llm.Message
	for _, en := range sf.entries {
		if en.Type == entryMessage && en.Message != nil {
			out = append(out, *en.Message)
		}
	}
	return out, nil
}
