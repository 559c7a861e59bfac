// Package routingtest helps tests of code behind routing's provider
// limits: it tells when a request has really joined a limiter's queue.
package routingtest

import (
	"bytes"
	"runtime"
)

// Queued counts the goroutines queued in any routing.Limiter of this
// process: those blocked in x/sync's semaphore.Weighted.Acquire, which
// the limiters are made of (and nothing else in beige uses). Limiter.Stats
// counts a caller as waiting from just before it queues; once Queued
// counts it too, its place in line is fixed, so a test can make the
// arrival order the launch order without relying on timing.
func Queued() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		header, _, _ := bytes.Cut(g, []byte("\n"))
		if bytes.Contains(header, []byte("[select")) && bytes.Contains(g, []byte("golang.org/x/sync/semaphore.(*Weighted).Acquire(")) {
			count++
		}
	}
	return count
}
