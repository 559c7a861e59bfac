package gateway

import (
	"testing"
)

type diskProblem string

func (d diskProblem) Problem() string { return string(d) }

// A full or low disk under $BEIGE_HOME makes /api/health degraded, saying so.
func TestHealthReportsDisk(t *testing.T) {
	for _, c := range []struct {
		disk, status string
	}{
		{"", "ok"},
		{"disk full/low: 3 MB free on /srv", "degraded"},
	} {
		g := &Gateway{opts: Options{Disk: diskProblem(c.disk)}}
		g.ready.Store(true)
		h := g.Health(t.Context())
		if h.Status != c.status || h.Disk != c.disk {
			t.Errorf("disk %q: health %+v, want status %q", c.disk, h, c.status)
		}
	}
}
