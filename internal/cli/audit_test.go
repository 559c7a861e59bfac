package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/testutil"
)

func openAudit(t *testing.T, dir string, opts *audit.Options) *audit.Logger {
	t.Helper()
	h := home.Home{Dir: dir}
	var o audit.Options
	if opts != nil {
		o = *opts
	}
	o.HeadPath = h.AuditHead()
	l, err := audit.Open(h.AuditLog(), &o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestAuditVerifyCommand: 1,000 concurrent records, then verify says OK
// with the exact count; one edited byte is reported at its file and line
// with exit 1; an unreadable log exits 2.
func TestAuditVerifyCommand(t *testing.T) {
	dir := withHome(t)
	l := openAudit(t, dir, &audit.Options{MaxSizeBytes: 64 << 10})
	var wg sync.WaitGroup
	for i := range 1000 {
		wg.Go(func() {
			err := l.Log(audit.Record{Agent: "a", Phase: audit.PhaseFinished, Type: audit.TypeCoreTool, Tool: "exec",
				Args: audit.StringArgs([]string{"call " + strconv.Itoa(i)}), Decision: audit.DecisionAllowed})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	l.Close()
	code, out, errOut := run(t, "audit", "verify")
	if code != 0 || !strings.HasPrefix(out, "OK: 1000 records, first seq 1 at ") || !strings.Contains(out, "last seq 1000 at ") {
		t.Fatalf("verify: %d %q %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "logs", "audit.jsonl.1")); err != nil {
		t.Errorf("no rotation: %v", err)
	}

	path := filepath.Join(dir, "logs", "audit.jsonl.1")
	data, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(data), "\n")
	lines[4] = strings.Replace(lines[4], `"agent":"a"`, `"agent":"b"`, 1)
	os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600)
	code, out, _ = run(t, "audit", "verify")
	if code != ExitFailure || !strings.HasPrefix(out, "BROKEN: edited: audit.jsonl.1 line 5: ") {
		t.Errorf("edited: %d %q", code, out)
	}

	os.Remove(path)
	os.Mkdir(path, 0o700)
	if code, _, errOut := run(t, "audit", "verify"); code != ExitUsage || !strings.Contains(errOut, "not a regular file") {
		t.Errorf("unreadable: %d %q", code, errOut)
	}
}

// TestAuditQueryKnownMix: --agent a --decision denied --since 10m prints
// exactly the denied calls of agent a of the last 10 minutes.
func TestAuditQueryKnownMix(t *testing.T) {
	dir := withHome(t)
	l := openAudit(t, dir, &audit.Options{MaxSizeBytes: 4096})
	now := time.Now()
	var want []string
	id := 0
	for _, agent := range []string{"a", "b"} {
		for _, age := range []time.Duration{2 * time.Hour, 11 * time.Minute, 5 * time.Minute, time.Second} {
			for _, dec := range []string{audit.DecisionAllowed, audit.DecisionDenied} {
				for _, typ := range []string{audit.TypeCoreTool, audit.TypeTool, audit.TypeNet} {
					id++
					name := "call-" + strconv.Itoa(id)
					if err := l.Log(audit.Record{Time: now.Add(-age), Agent: agent, Phase: audit.PhaseFinished, Type: typ, Tool: "exec",
						Args: audit.StringArgs([]string{name}), Decision: dec, Session: "s-" + agent}); err != nil {
						t.Fatal(err)
					}
					if agent == "a" && dec == audit.DecisionDenied && age < 10*time.Minute {
						want = append(want, name)
					}
				}
			}
		}
	}
	l.Close()
	if _, err := os.Stat(filepath.Join(dir, "logs", "audit.jsonl.2")); err != nil {
		t.Fatalf("want the records over several files: %v", err)
	}
	code, out, errOut := run(t, "audit", "query", "--agent", "a", "--decision", "denied", "--since", "10m", "--json")
	if code != 0 {
		t.Fatalf("query: %d %s", code, errOut)
	}
	var got []string
	for line := range strings.Lines(out) {
		var r audit.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		var args []string
		json.Unmarshal(r.Args, &args)
		got = append(got, args[0])
		if _, err := audit.ParseLink([]byte(line)); err != nil {
			t.Errorf("--json line without its chain: %q", line)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") || len(want) != 6 {
		t.Errorf("got %v\nwant %v", got, want)
	}
	// The table: a header and the same rows.
	code, out, _ = run(t, "audit", "query", "--agent", "a", "--decision", "denied", "--since", "10m")
	rows := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(rows) != 7 || !strings.HasPrefix(rows[0], "TIME ") || !strings.Contains(rows[1], `["`+want[0]+`"]`) {
		t.Errorf("table: %d\n%s", code, out)
	}
	// The other filters.
	for _, tc := range []struct {
		args []string
		n    int
	}{
		{[]string{"--type", "net"}, 16},
		{[]string{"--type", "net", "--agent", "b", "--since", "1h"}, 6},
		{[]string{"--session", "s-b", "--decision", "allowed"}, 12},
		{[]string{"--tool", "git"}, 0},
		{[]string{"--since", "2d"}, 48},
	} {
		_, out, _ := run(t, append([]string{"audit", "query", "--json"}, tc.args...)...)
		if n := strings.Count(out, "\n"); n != tc.n {
			t.Errorf("%v: %d records, want %d", tc.args, n, tc.n)
		}
	}
	for _, bad := range [][]string{{"--decision", "maybe"}, {"--type", "shell"}, {"--since", "yesterday"}, {"--since", "-5m"}} {
		if code, _, _ := run(t, append([]string{"audit", "query"}, bad...)...); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", bad, code, ExitUsage)
		}
	}
	// tail: the newest n.
	_, out, _ = run(t, "audit", "tail", "-n", "2", "--agent", "b", "--json")
	if n := strings.Count(out, "\n"); n != 2 || !strings.Contains(out, `"call-48"`) || !strings.Contains(out, `"call-47"`) {
		t.Errorf("tail: %q", out)
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 3, 5, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"10m", now.Add(-10 * time.Minute), true},
		{"1h", now.Add(-time.Hour), true},
		{"1h30m", now.Add(-90 * time.Minute), true},
		{"2d", now.Add(-48 * time.Hour), true},
		{"0.5d", now.Add(-12 * time.Hour), true},
		{"2026-03-01T00:00:00Z", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), true},
		{"", time.Time{}, false},
		{"d", time.Time{}, false},
		{"-1h", time.Time{}, false},
		{"-1d", time.Time{}, false},
		{"1w", time.Time{}, false},
	} {
		got, err := parseSince(tc.in, now)
		if (err == nil) != tc.ok || (tc.ok && !got.Equal(tc.want)) {
			t.Errorf("parseSince(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// TestAuditTableEscapes: what a sandbox put in a record cannot drive the
// terminal.
func TestAuditTableEscapes(t *testing.T) {
	var b bytes.Buffer
	p := &auditPrinter{w: &b}
	p.print(auditLine{rec: audit.Record{Agent: "x\x1b[2J", Type: audit.TypeTool, Tool: "t\r", Args: json.RawMessage(`["\u001b]0;pwned\u0007"]`), Error: "e\x1b"}})
	if strings.ContainsAny(b.String(), "\x1b\r\a") {
		t.Errorf("raw control characters: %q", b.String())
	}
}

// TestAuditTailFollow: tail -f prints each new record once, in order,
// across several rotations.
func TestAuditTailFollow(t *testing.T) {
	dir := t.TempDir()
	h := home.Home{Dir: dir}
	l := openAudit(t, dir, &audit.Options{MaxSizeBytes: 2048})
	defer l.Close()
	rec := func(i int) audit.Record {
		return audit.Record{Agent: "a", Phase: audit.PhaseStarted, Type: audit.TypeTool, Tool: "git", Args: audit.StringArgs([]string{"n" + strconv.Itoa(i)})}
	}
	for i := range 3 {
		l.Log(rec(i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out testutil.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- auditTail(ctx, h.AuditLog(), &auditFilter{}, 1, true, &auditPrinter{w: &out, json: true})
	}()
	for start := time.Now(); !strings.Contains(out.String(), `"n2"`); { // the last one, printed first
		if time.Since(start) > 10*time.Second {
			t.Fatalf("tail printed %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	const n = 60
	for i := 3; i < n; i++ {
		if err := l.Log(rec(i)); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			time.Sleep(250 * time.Millisecond) // let a poll run mid-way
		}
	}
	if _, err := os.Stat(h.AuditLog() + ".3"); err != nil {
		t.Fatalf("want several rotations: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(out.String(), "\n") < n-2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // nothing more may come
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var got []string
	for line := range strings.Lines(out.String()) {
		var r audit.Record
		json.Unmarshal([]byte(line), &r)
		var args []string
		json.Unmarshal(r.Args, &args)
		got = append(got, args[0])
	}
	var want []string
	for i := 2; i < n; i++ {
		want = append(want, "n"+strconv.Itoa(i))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}
