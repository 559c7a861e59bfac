package agent

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Bounds of firstMessage: the characters it keeps (as the original Beige
// does), and the bytes of a session file it reads to find the message.
const (
	firstMessageRunes    = 100
	firstMessageMaxBytes = 1 << 20
)

// noFirstMessage is the firstMessage of a session with no user message
// (the original's placeholder).
const noFirstMessage = "(session)"

// firstMessage returns the text of the first user message in the session
// file at path, cut to firstMessageRunes characters. It reads at most
// firstMessageMaxBytes of the file; a file that cannot be read, or whose
// first user message lies beyond that, gives noFirstMessage.
func firstMessage(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return noFirstMessage
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, firstMessageMaxBytes))
	sc.Buffer(make([]byte, 0, 64<<10), firstMessageMaxBytes)
	for sc.Scan() {
		e, err := parseEntry(sc.Bytes())
		if err != nil || e.Type != entryMessage || e.Message == nil || e.Message.User == nil {
			continue
		}
		if t := e.Message.User.Text(); t != "" {
			return cutRunes(t, firstMessageRunes)
		}
		return noFirstMessage
	}
	return noFirstMessage
}

// cutRunes returns s cut to n characters, and made valid UTF-8.
func cutRunes(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// sessionID is the original's sessionId: the file's name without .jsonl.
func sessionID(file string) string {
	return strings.TrimSuffix(filepath.Base(file), ".jsonl")
}
