package install

import (
	"bytes"
	"strings"
	"testing"
)

func TestProgress(t *testing.T) {
	var tty bytes.Buffer
	m := (&Progress{W: &tty, TTY: true}).meter("kit-1.0.0.tgz", 3<<20)
	m.Write(make([]byte, 3<<20))
	m.done()
	if got := tty.String(); !strings.Contains(got, "\r\x1b[Kdownloading kit-1.0.0.tgz: 3.0 MiB / 3.0 MiB\n") {
		t.Errorf("terminal: %q", got)
	}
	var plain bytes.Buffer
	p := &Progress{W: &plain}
	p.Stepf("fetching %s", "kit")
	m = p.meter("kit-1.0.0.tgz", -1)
	m.Write(make([]byte, 2048))
	m.done()
	if got := plain.String(); got != "fetching kit\ndownloaded kit-1.0.0.tgz (2.0 KiB)\n" {
		t.Errorf("not a terminal: one line per step, got %q", got)
	}
}
