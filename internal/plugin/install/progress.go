package install

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Progress tells the user what an install is doing: on a terminal, a
// download line that counts bytes as they come; otherwise one line per
// step.
type Progress struct {
	W   io.Writer
	TTY bool

	mu sync.Mutex
}

// Stepf prints one line.
func (p *Progress) Stepf(format string, args ...any) {
	if p == nil || p.W == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.W, format+"\n", args...)
}

// meter counts downloaded bytes.
type meter struct {
	p     *Progress
	label string
	total int64 // -1 when unknown
	n     int64
	last  time.Time
}

func (p *Progress) meter(label string, total int64) *meter {
	return &meter{p: p, label: label, total: total}
}

func (m *meter) Write(b []byte) (int, error) {
	m.n += int64(len(b))
	if m.p != nil && m.p.TTY && m.p.W != nil && time.Since(m.last) > 100*time.Millisecond {
		m.last = time.Now()
		m.draw()
	}
	return len(b), nil
}

func (m *meter) draw() {
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	if m.total > 0 {
		fmt.Fprintf(m.p.W, "\r\x1b[Kdownloading %s: %s / %s", m.label, size(m.n), size(m.total))
	} else {
		fmt.Fprintf(m.p.W, "\r\x1b[Kdownloading %s: %s", m.label, size(m.n))
	}
}

// done ends the download line.
func (m *meter) done() {
	if m.p == nil || m.p.W == nil {
		return
	}
	if m.p.TTY {
		m.draw()
		m.p.mu.Lock()
		fmt.Fprintln(m.p.W)
		m.p.mu.Unlock()
		return
	}
	m.p.Stepf("downloaded %s (%s)", m.label, size(m.n))
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
