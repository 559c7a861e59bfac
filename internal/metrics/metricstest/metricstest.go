// Package metricstest checks a Prometheus text exposition in tests: with
// `promtool check metrics` when promtool is installed (Debian's prometheus
// package, which CI installs), and by series.
package metricstest

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// CheckPromtool runs `promtool check metrics` on text and fails t on any
// problem it reports. Without promtool it logs that the check was skipped.
func CheckPromtool(t testing.TB, text string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool is not installed (apt-get install prometheus): the exposition was not checked by it")
		return
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
}

// Value returns the value of the series (name with its labels, as the
// exposition writes them: `beige_x_total{a="b"}`) in text, and whether it
// is there.
func Value(text, series string) (string, bool) {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			return v, true
		}
	}
	return "", false
}

// Expect fails t unless every series of want has its value in text.
func Expect(t testing.TB, text string, want map[string]string) {
	t.Helper()
	for series, v := range want {
		got, ok := Value(text, series)
		switch {
		case !ok:
			t.Errorf("no series %s in the exposition", series)
		case got != v:
			t.Errorf("%s = %s, want %s", series, got, v)
		}
	}
}
