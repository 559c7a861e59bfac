// Package testutil holds small helpers shared by tests. Only _test.go
// files import it (internal/deptest checks that no other code does).
package testutil

import (
	"bytes"
	"sync"
)

// SyncBuffer is a log sink safe for concurrent writes: a test reads what
// goroutines it started have written so far.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Reset drops everything written so far.
func (s *SyncBuffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}
