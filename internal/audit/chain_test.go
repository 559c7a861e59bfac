package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// chainLog is a log written by a Logger with a head, in a temporary home.
type chainLog struct {
	dir, path, head string
}

func newChainLog(t testing.TB) chainLog {
	dir := t.TempDir()
	return chainLog{dir: dir, path: filepath.Join(dir, "logs", "audit.jsonl"), head: filepath.Join(dir, "data", "audit-head")}
}

func (c chainLog) open(t testing.TB, opts *Options) *Logger {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	o.HeadPath = c.head
	l, err := Open(c.path, &o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (c chainLog) verify(t testing.TB, retention bool) *Report {
	t.Helper()
	rep, err := Verify(c.path, &VerifyOptions{HeadPath: c.head, Retention: retention, LiveWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func (c chainLog) file(n int) string {
	if n == 0 {
		return c.path
	}
	return c.path + "." + strconv.Itoa(n)
}

func chainRec(i int) Record {
	return Record{Time: time.Date(2026, 3, 5, 0, 0, i, 0, time.UTC), Agent: "a" + strconv.Itoa(i%3), Phase: PhaseFinished,
		Type: TypeCoreTool, Tool: "exec", Args: StringArgs([]string{"echo " + strconv.Itoa(i)}), Decision: DecisionAllowed}
}

// write30 writes 30 records into 4 files: audit.jsonl.3 … audit.jsonl.
func (c chainLog) write30(t testing.TB) {
	t.Helper()
	l := c.open(t, &Options{MaxSizeBytes: 2200})
	for i := range 30 {
		if err := l.Log(chainRec(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func fileLines(t testing.TB, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(string(data), "\n")[:strings.Count(string(data), "\n")+btoi(len(data) > 0 && data[len(data)-1] != '\n')]
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func writeLines(t testing.TB, path string, lines []string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestChainWhole: an untouched log verifies, with every record counted,
// across rotated files, and each file's first record carries prev.
func TestChainWhole(t *testing.T) {
	c := newChainLog(t)
	c.write30(t)
	for n := 0; n <= 3; n++ {
		lines := fileLines(t, c.file(n))
		if len(lines) < 2 {
			t.Fatalf("%s has %d lines; the test wants 4 files of several", c.file(n), len(lines))
		}
		if l, err := ParseLink([]byte(lines[0])); err != nil || l.Prev == "" {
			t.Errorf("first line of %s: %+v %v; want a prev", filepath.Base(c.file(n)), l, err)
		}
	}
	if _, err := os.Stat(c.file(4)); err == nil {
		t.Fatal("5 files; the test wants 4")
	}
	rep := c.verify(t, false)
	if rep.Break != nil || rep.Records != 30 || rep.First.Seq != 1 || rep.Last.Seq != 30 || rep.Head == nil || rep.Head.Seq != 30 {
		t.Fatalf("report %+v, break %v", rep, rep.Break)
	}
	if rep.First.File != "audit.jsonl.3" || rep.First.Line != 1 || rep.Last.File != "audit.jsonl" || rep.First.Time != "2026-03-05T00:00:00.000Z" {
		t.Errorf("first %+v last %+v", rep.First, rep.Last)
	}
	// Reading the records back ignores the chain's fields.
	recs, err := ReadFile(c.file(0))
	if err != nil || len(recs) == 0 || recs[len(recs)-1].Agent != chainRec(29).Agent {
		t.Errorf("ReadFile: %v %v", recs, err)
	}
}

// TestChainTampering: every kind of tampering is reported at the right
// file and line, with its kind.
func TestChainTampering(t *testing.T) {
	type tamper func(t *testing.T, c chainLog) (file string, line int)
	edit := func(n, line int, f func(string) string) tamper {
		return func(t *testing.T, c chainLog) (string, int) {
			lines := fileLines(t, c.file(n))
			lines[line-1] = f(lines[line-1])
			writeLines(t, c.file(n), lines)
			return filepath.Base(c.file(n)), line
		}
	}
	flipByte := func(s string) string { // a byte of the args
		i := strings.Index(s, "echo ") + 1
		return s[:i] + "X" + s[i+1:]
	}
	cases := []struct {
		name string
		kind string
		do   tamper
	}{
		{"edit a byte mid-file", BreakEdited, edit(1, 2, flipByte)},
		{"edit a byte of the oldest file's first record", BreakEdited, edit(3, 1, flipByte)},
		{"edit a byte of the newest record", BreakEdited, edit(0, 3, flipByte)},
		{"edit a byte of a hash", BreakEdited, edit(2, 2, func(s string) string {
			i := strings.Index(s, `"hash":"`) + 8
			c := byte('0')
			if s[i] == '0' {
				c = '1'
			}
			return s[:i] + string(c) + s[i+1:]
		})},
		{"edit the seq", BreakEdited, edit(1, 2, func(s string) string {
			l, _ := ParseLink([]byte(s))
			return strings.Replace(s, fmt.Sprintf(`"seq":%d,`, l.Seq), fmt.Sprintf(`"seq":%d,`, l.Seq+7), 1)
		})},
		{"rewrite a record with a fresh hash", BreakEdited, func(t *testing.T, c chainLog) (string, int) {
			// The attacker recomputes the edited record's hash: the next
			// record no longer chains to it.
			lines := fileLines(t, c.file(1))
			prev, _ := ParseLink([]byte(lines[0]))
			l, _ := ParseLink([]byte(lines[1]))
			body := strings.TrimSuffix(flipByte(lines[1]), "\n")
			body = body[:len(body)-hashTail] + "}"
			h := chainHash(prev.Hash, []byte(body))
			lines[1] = body[:len(body)-1] + hashKey + h + "\"}\n"
			if lines[1] == fileLines(t, c.file(1))[1] || l.Hash == h {
				t.Fatal("no change")
			}
			writeLines(t, c.file(1), lines)
			return "audit.jsonl.1", 3
		}},
		{"insert a line", BreakEdited, func(t *testing.T, c chainLog) (string, int) {
			lines := fileLines(t, c.file(2))
			lines = append(lines[:2], append([]string{`{"ts":"2026-03-05T00:00:00.000Z","agent":"a","phase":"finished","type":"core_tool","tool":"exec"}` + "\n"}, lines[2:]...)...)
			writeLines(t, c.file(2), lines)
			return "audit.jsonl.2", 3
		}},
		{"delete a line", BreakDeleted, func(t *testing.T, c chainLog) (string, int) {
			lines := fileLines(t, c.file(1))
			writeLines(t, c.file(1), append(lines[:2], lines[3:]...))
			return "audit.jsonl.1", 3
		}},
		{"delete two lines", BreakDeleted, func(t *testing.T, c chainLog) (string, int) {
			lines := fileLines(t, c.file(1))
			writeLines(t, c.file(1), append(lines[:1], lines[3:]...))
			return "audit.jsonl.1", 2
		}},
		{"swap two lines", BreakReordered, func(t *testing.T, c chainLog) (string, int) {
			lines := fileLines(t, c.file(2))
			lines[2], lines[3] = lines[3], lines[2]
			writeLines(t, c.file(2), lines)
			return "audit.jsonl.2", 3
		}},
		{"swap the last two lines", BreakReordered, func(t *testing.T, c chainLog) (string, int) {
			lines := fileLines(t, c.file(0))
			n := len(lines)
			lines[n-2], lines[n-1] = lines[n-1], lines[n-2]
			writeLines(t, c.file(0), lines)
			return "audit.jsonl", n - 1
		}},
		{"move a line to the end", BreakReordered, func(t *testing.T, c chainLog) (string, int) {
			lines := fileLines(t, c.file(0))
			moved := lines[1]
			lines = append(append(lines[:1], lines[2:]...), moved)
			writeLines(t, c.file(0), lines)
			return "audit.jsonl", 2
		}},
		{"truncate the last line", BreakTruncated, func(t *testing.T, c chainLog) (string, int) {
			lines := fileLines(t, c.file(0))
			n := len(lines)
			lines[n-1] = lines[n-1][:len(lines[n-1])/2]
			writeLines(t, c.file(0), lines)
			return "audit.jsonl", n
		}},
		{"delete the last line", BreakTruncated, func(t *testing.T, c chainLog) (string, int) {
			lines := fileLines(t, c.file(0))
			n := len(lines)
			writeLines(t, c.file(0), lines[:n-1])
			return "audit.jsonl", n
		}},
		{"cut the newline of the last line", BreakTruncated, func(t *testing.T, c chainLog) (string, int) {
			lines := fileLines(t, c.file(0))
			n := len(lines)
			lines[n-1] = strings.TrimSuffix(lines[n-1], "\n")
			writeLines(t, c.file(0), lines)
			return "audit.jsonl", n
		}},
		{"empty the current file", BreakTruncated, func(t *testing.T, c chainLog) (string, int) {
			writeLines(t, c.file(0), nil)
			return "audit.jsonl.1", len(fileLines(t, c.file(1))) + 1
		}},
		{"delete a rotated file", BreakMissing, func(t *testing.T, c chainLog) (string, int) {
			os.Remove(c.file(2))
			return "audit.jsonl.1", 1
		}},
		{"delete the newest rotated file", BreakMissing, func(t *testing.T, c chainLog) (string, int) {
			os.Remove(c.file(1))
			return "audit.jsonl", 1
		}},
		{"delete the oldest rotated file", BreakMissing, func(t *testing.T, c chainLog) (string, int) {
			os.Remove(c.file(3))
			return "audit.jsonl.2", 1
		}},
		{"delete a rotated file and renumber", BreakMissing, func(t *testing.T, c chainLog) (string, int) {
			os.Remove(c.file(2))
			os.Rename(c.file(3), c.file(2))
			return "audit.jsonl.1", 1
		}},
		{"delete the first line of a rotated file", BreakDeleted, func(t *testing.T, c chainLog) (string, int) {
			lines := fileLines(t, c.file(1))
			writeLines(t, c.file(1), lines[1:])
			return "audit.jsonl.1", 1
		}},
		{"cut the end of a rotated file", BreakMissing, func(t *testing.T, c chainLog) (string, int) {
			lines := fileLines(t, c.file(2))
			writeLines(t, c.file(2), lines[:len(lines)-2])
			return "audit.jsonl.1", 1
		}},
		{"delete the current file", BreakTruncated, func(t *testing.T, c chainLog) (string, int) {
			os.Remove(c.file(0))
			return "audit.jsonl.1", len(fileLines(t, c.file(1))) + 1
		}},
		{"corrupt the head", BreakHead, func(t *testing.T, c chainLog) (string, int) {
			os.WriteFile(c.head, []byte("{"), 0o600)
			return "", 0
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newChainLog(t)
			c.write30(t)
			file, line := tc.do(t, c)
			rep := c.verify(t, false)
			b := rep.Break
			if b == nil {
				t.Fatalf("not detected: %+v", rep)
			}
			if b.Kind != tc.kind || b.File != file || b.Line != line {
				t.Errorf("got %s\nwant %s: %s line %d", b, tc.kind, file, line)
			}
		})
	}
}

// TestChainRestart: a new Logger goes on from the newest record of the
// log it opens, in the current file or (when that is empty) a rotated one.
func TestChainRestart(t *testing.T) {
	c := newChainLog(t)
	for round := range 3 {
		l := c.open(t, &Options{MaxSizeBytes: 1500})
		for i := range 7 {
			if err := l.Log(chainRec(round*7 + i)); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
	}
	// A crash right after a rotation renamed the files: the current file
	// is empty, the newest record is in audit.jsonl.1.
	top := 1
	for ; ; top++ {
		if _, err := os.Stat(c.file(top)); err != nil {
			break
		}
	}
	for n := top; n > 0; n-- {
		os.Rename(c.file(n-1), c.file(n))
	}
	writeLines(t, c.file(0), nil)
	l := c.open(t, nil)
	l.Close()
	if lines := fileLines(t, c.file(0)); len(lines) != 0 {
		t.Fatalf("an idle open wrote %q", lines)
	}
	l = c.open(t, nil)
	l.Log(chainRec(22))
	l.Close()
	rep := c.verify(t, false)
	if rep.Break != nil || rep.Records != 22 || rep.Last.Seq != 22 || len(rep.Repairs) != 0 {
		t.Fatalf("report %+v, break %v", rep, rep.Break)
	}
	last := fileLines(t, c.file(0))
	if l, _ := ParseLink([]byte(last[0])); l.Seq != 22 || l.Prev == "" {
		t.Errorf("first line of the new file: %+v", l)
	}
}

// TestChainRepairedCrash: a torn last record (a crash) is set aside at the
// next open with a repair record; verify says OK and names the repair,
// and only the repair, not the crash, adds a record.
func TestChainRepairedCrash(t *testing.T) {
	c := newChainLog(t)
	l := c.open(t, nil)
	for i := range 5 {
		l.Log(chainRec(i))
	}
	l.Close()
	f, _ := os.OpenFile(c.path, os.O_APPEND|os.O_WRONLY, 0)
	frag := `{"ts":"2026-03-05T00:00:09.000Z","agent":"a","pha`
	f.WriteString(frag)
	f.Close()
	// Before the gateway starts again: the cut last line is reported.
	if rep := c.verify(t, false); rep.Break == nil || rep.Break.Kind != BreakTruncated || rep.Break.Line != 6 {
		t.Fatalf("torn tail before repair: %+v %v", rep, rep.Break)
	}
	l = c.open(t, nil)
	l.Log(chainRec(9))
	l.Close()
	rep := c.verify(t, false)
	if rep.Break != nil || rep.Records != 7 || len(rep.Repairs) != 1 {
		t.Fatalf("report %+v, break %v", rep, rep.Break)
	}
	if r := rep.Repairs[0]; r.File != "audit.jsonl" || r.Line != 6 || r.RepairLine != 7 || r.Bytes != int64(len(frag)) {
		t.Errorf("repair %+v", r)
	}
	// The repair cannot be used to hide an edit: changing the fragment
	// breaks its match with the repair record.
	lines := fileLines(t, c.path)
	lines[5] = strings.Replace(lines[5], `"agent":"a"`, `"agent":"b"`, 1)
	writeLines(t, c.path, lines)
	if rep := c.verify(t, false); rep.Break == nil || rep.Break.Kind != BreakEdited || rep.Break.Line != 6 {
		t.Errorf("edited fragment: %+v %v", rep, rep.Break)
	}
}

// TestChainHeadAtOpen: a log cut short while the gateway was stopped does
// not become whole again by the gateway starting and writing on: the gap
// is recorded in the chain, and verify reports it.
func TestChainHeadAtOpen(t *testing.T) {
	for _, tc := range []struct {
		name, kind string
		do         func(t *testing.T, c chainLog)
	}{
		{"cut", BreakTruncated, func(t *testing.T, c chainLog) {
			lines := fileLines(t, c.path)
			writeLines(t, c.path, lines[:len(lines)-2])
		}},
		{"head deleted", BreakHead, func(t *testing.T, c chainLog) { os.Remove(c.head) }},
		{"last record rewritten", BreakEdited, func(t *testing.T, c chainLog) {
			// A cut, then a forged record with the cut one's seq.
			lines := fileLines(t, c.path)
			prev, _ := ParseLink([]byte(lines[len(lines)-2]))
			rec, _ := chainRec(99).appendJSON(nil)
			forged, _ := appendChain(rec, prev.Seq+1, prev.Hash, false)
			writeLines(t, c.path, append(lines[:len(lines)-1], string(forged)+"\n"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newChainLog(t)
			l := c.open(t, nil)
			for i := range 6 {
				l.Log(chainRec(i))
			}
			l.Close()
			tc.do(t, c)
			l = c.open(t, nil)
			for i := range 3 {
				l.Log(chainRec(10 + i))
			}
			l.Close()
			rep := c.verify(t, false)
			if rep.Break == nil || rep.Break.Kind != tc.kind {
				t.Fatalf("report %+v, break %v; want %s", rep, rep.Break, tc.kind)
			}
			lines := fileLines(t, c.path)
			var r Record
			json.Unmarshal([]byte(lines[rep.Break.Line-1]), &r)
			if r.Type != TypeAudit || r.Tool != ToolHead {
				t.Errorf("break at %s, not at the head record", lines[rep.Break.Line-1])
			}
		})
	}
}

// TestChainRetention: with gateway.audit.maxFiles the oldest files go, and
// the chain then starts later: not a break when verify is told so, a
// break when every file is meant to be kept.
func TestChainRetention(t *testing.T) {
	c := newChainLog(t)
	l := c.open(t, &Options{MaxSizeBytes: 1000, MaxFiles: 2})
	for i := range 30 {
		l.Log(chainRec(i))
	}
	l.Close()
	rep := c.verify(t, true)
	if rep.Break != nil || rep.Pruned == 0 || rep.Records+rep.Pruned != 30 {
		t.Fatalf("retention: %+v %v", rep, rep.Break)
	}
	if rep := c.verify(t, false); rep.Break == nil || rep.Break.Kind != BreakMissing || rep.Break.File != "audit.jsonl.2" || rep.Break.Line != 1 {
		t.Fatalf("keep-all: %+v %v", rep, rep.Break)
	}
	// Editing the oldest kept record is still found: it carries its prev.
	lines := fileLines(t, c.file(2))
	lines[0] = strings.Replace(lines[0], `"agent":"a`, `"agent":"b`, 1)
	writeLines(t, c.file(2), lines)
	if rep := c.verify(t, true); rep.Break == nil || rep.Break.Kind != BreakEdited || rep.Break.Line != 1 {
		t.Fatalf("edited oldest: %+v %v", rep, rep.Break)
	}
}

// TestChainBeforeChain: lines written before the chain existed are
// counted apart; the chain starts at seq 1 after them.
func TestChainBeforeChain(t *testing.T) {
	c := newChainLog(t)
	os.MkdirAll(filepath.Dir(c.path), 0o700)
	writeLines(t, c.path, []string{`{"ts":"2026-03-05T00:00:00.000Z","agent":"a","phase":"started","type":"tool","tool":"git"}` + "\n"})
	l := c.open(t, nil)
	l.Log(chainRec(1))
	l.Close()
	rep := c.verify(t, false)
	if rep.Break != nil || rep.Records != 1 || rep.Unchained != 1 {
		t.Fatalf("%+v %v", rep, rep.Break)
	}
}

// TestChainConcurrent: 1,000 concurrent Log calls, rotating, verify OK with
// exactly 1,000 records, seq in file order; verify run meanwhile never
// sees a break.
func TestChainConcurrent(t *testing.T) {
	c := newChainLog(t)
	l := c.open(t, &Options{MaxSizeBytes: 32 << 10, HeadInterval: time.Millisecond})
	stop := make(chan struct{})
	var verifyErr error
	var verifies int
	var vwg sync.WaitGroup
	vwg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			rep, err := Verify(c.path, &VerifyOptions{HeadPath: c.head})
			verifies++
			if err != nil || rep.Break != nil {
				verifyErr = fmt.Errorf("live verify: %v %v", err, rep.Break)
				return
			}
		}
	})
	var wg sync.WaitGroup
	for i := range 1000 {
		wg.Go(func() {
			if err := l.Log(chainRec(i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	close(stop)
	vwg.Wait()
	l.Close()
	if verifyErr != nil {
		t.Fatal(verifyErr)
	}
	rep := c.verify(t, false)
	if rep.Break != nil || rep.Records != 1000 || rep.Last.Seq != 1000 || rep.Head.Seq != 1000 {
		t.Fatalf("report %+v, break %v", rep, rep.Break)
	}
	if _, err := os.Stat(c.file(2)); err != nil {
		t.Errorf("no rotation: %v", err)
	}
	t.Logf("%d verifies while writing", verifies)
}

// TestHeadWrittenAfterSync: the head is rewritten while records come, not
// only at Close, and never names a record not in the log.
func TestHeadWritten(t *testing.T) {
	c := newChainLog(t)
	l := c.open(t, &Options{HeadInterval: 5 * time.Millisecond})
	defer l.Close()
	l.Log(chainRec(1))
	l.Log(chainRec(2))
	deadline := time.Now().Add(5 * time.Second)
	for {
		h, err := ReadHead(c.head)
		if err == nil && h.Seq == 2 {
			lines := fileLines(t, c.path)
			if lk, _ := ParseLink([]byte(lines[1])); lk.Hash != h.Hash || h.File != "audit.jsonl" {
				t.Errorf("head %+v, last line %s", h, lines[1])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("head %+v %v after 5s", h, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func FuzzParseLink(f *testing.F) {
	rec, _ := chainRec(1).appendJSON(nil)
	line, _ := appendChain(rec, 42, GenesisHash, true)
	f.Add(line)
	line2, _ := appendChain(append([]byte(nil), rec...), 7, GenesisHash, false)
	f.Add(line2)
	f.Add([]byte(`{"seq":1,"hash":"` + GenesisHash + `"}`))
	f.Add([]byte(`{"a":1,"seq":01,"prev":"` + GenesisHash + `","hash":"` + GenesisHash + `"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLink(b)
		if err != nil {
			return
		}
		if l.Seq <= 0 || len(l.Hash) != 64 || (l.Prev != "" && len(l.Prev) != 64) {
			t.Fatalf("%q: %+v", b, l)
		}
		// What parses is exactly the tail appendChain writes for it.
		tail := seqKey + strconv.FormatInt(l.Seq, 10)
		if l.Prev != "" {
			tail += prevKey + l.Prev + `"`
		}
		tail += hashKey + l.Hash + `"}`
		if body := bytes.TrimSuffix(b, []byte{'\n'}); !bytes.HasSuffix(body, []byte(tail)) || body[0] != '{' {
			t.Fatalf("%q parses as %+v", b, l)
		}
	})
}

// BenchmarkLogChain compares Log with and without the chain, in one run:
// go test -run '^$' -bench LogChain ./internal/audit/
func BenchmarkLogChain(b *testing.B) {
	rec := Record{
		Agent: "travel", Session: "tui:travel:default", Channel: "tui", Phase: PhaseFinished,
		Type: TypeCoreTool, Tool: "exec", Args: json.RawMessage(`{"command":"ls -la /workspace"}`),
		Decision: DecisionAllowed, Target: TargetSandbox, DurationMs: ptr(int64(12)), ExitCode: ptr(0), OutputBytes: ptr(int64(345)),
	}
	for _, mode := range []string{"plain", "chained"} {
		b.Run(mode, func(b *testing.B) {
			c := newChainLog(b)
			l := c.open(b, nil)
			defer l.Close()
			l.plain = mode == "plain"
			b.ReportAllocs()
			for b.Loop() {
				if err := l.Log(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestLastLinkFarBack: the newest chained record is found however far
// back from the end it is (reading backwards in growing chunks).
func TestLastLinkFarBack(t *testing.T) {
	c := newChainLog(t)
	l := c.open(t, nil)
	for i := range 2000 {
		l.Log(chainRec(i))
	}
	l.Close()
	f, _ := os.OpenFile(c.path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(strings.Repeat(`{"ts":"2026-03-05T00:00:00.000Z","agent":"x","phase":"started","type":"tool","tool":"git"}`+"\n", 8000))
	f.Close()
	got, file, err := lastLink(c.path, 0, 0)
	if err != nil || got.Seq != 2000 || file != "audit.jsonl" {
		t.Fatalf("lastLink = %+v %q %v", got, file, err)
	}
}

// FuzzVerify: whatever the log holds, Verify does not panic, and a log it
// finds whole has as many records as chained lines.
func FuzzVerify(f *testing.F) {
	c := newChainLog(f)
	l := c.open(f, nil)
	for i := range 4 {
		l.Log(chainRec(i))
	}
	l.Close()
	seed, _ := os.ReadFile(c.path)
	f.Add(seed)
	f.Add(append(append([]byte(nil), seed...), `{"ts":"x","pha`...))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "audit.jsonl")
		os.WriteFile(path, data, 0o600)
		rep, err := Verify(path, &VerifyOptions{LiveWait: time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Break == nil {
			var chained int64
			for line := range bytes.Lines(data) {
				if _, err := ParseLink(line); err == nil {
					chained++
				}
			}
			if rep.Records > chained {
				t.Fatalf("%d records from %d chained lines", rep.Records, chained)
			}
		}
	})
}

// TestChainRepairAcrossRotation: when the repair record does not fit in
// the file that holds the torn record, it starts the next file, and the
// repair is still matched.
func TestChainRepairAcrossRotation(t *testing.T) {
	c := newChainLog(t)
	l := c.open(t, &Options{MaxSizeBytes: 1500})
	for i := range 4 {
		l.Log(chainRec(i))
	}
	l.Close()
	if _, err := os.Stat(c.file(1)); err == nil {
		t.Fatal("rotated already")
	}
	f, _ := os.OpenFile(c.path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"ts":"2026-03-05T00:00:09.000Z","agent":"a","pha` + strings.Repeat("x", 300))
	f.Close()
	l = c.open(t, &Options{MaxSizeBytes: 1500})
	l.Log(chainRec(9))
	l.Close()
	rep := c.verify(t, false)
	if rep.Break != nil || rep.Records != 6 || len(rep.Repairs) != 1 {
		t.Fatalf("report %+v, break %v", rep, rep.Break)
	}
	if r := rep.Repairs[0]; r.File != "audit.jsonl.1" || r.Line != 5 || r.RepairFile != "audit.jsonl" || r.RepairLine != 1 {
		t.Errorf("repair %+v", r)
	}
}

// TestLogRefusesTypeAudit: only the Logger writes the records that verify
// reads as repairs and head mismatches.
func TestLogRefusesTypeAudit(t *testing.T) {
	c := newChainLog(t)
	l := c.open(t, nil)
	defer l.Close()
	if err := l.Log(Record{Agent: "a", Phase: PhaseFinished, Type: TypeAudit, Tool: ToolRepair}); err == nil {
		t.Error("a TypeAudit record was written")
	}
}

// BenchmarkRoundTripAB times a stand-in for a tool call's round trip (a
// started record, a request and its answer over a Unix socket, a finished
// record) with the plain log and with the chained one (and its head),
// alternating call by call in one run, and reports each p50 and their
// ratio: go test -run '^$' -bench RoundTripAB ./internal/audit/
func BenchmarkRoundTripAB(b *testing.B) {
	sock := filepath.Join(b.TempDir(), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	plain := newChainLog(b).open(b, nil)
	plain.plain = true
	chained := newChainLog(b).open(b, nil)
	defer plain.Close()
	defer chained.Close()
	rec := Record{Agent: "travel", Session: "tui:travel:default", Channel: "tui", Phase: PhaseStarted,
		Type: TypeCoreTool, Tool: "exec", Args: json.RawMessage(`["ls -la /workspace"]`), Decision: DecisionAllowed, Target: TargetSandbox}
	done := rec
	done.Phase, done.DurationMs, done.ExitCode, done.OutputBytes = PhaseFinished, ptr(int64(1)), ptr(0), ptr(int64(345))
	req, resp := make([]byte, 64), make([]byte, 64)
	var times [2][]time.Duration
	for i := 0; b.Loop(); i++ {
		l := []*Logger{plain, chained}[i%2]
		t0 := time.Now()
		if err := l.Log(rec); err != nil {
			b.Fatal(err)
		}
		conn.Write(req)
		io.ReadFull(conn, resp)
		if err := l.Log(done); err != nil {
			b.Fatal(err)
		}
		times[i%2] = append(times[i%2], time.Since(t0))
	}
	if len(times[1]) == 0 {
		return
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds())
	}
	p, c := p50(times[0]), p50(times[1])
	b.ReportMetric(p, "plain-p50-ns")
	b.ReportMetric(c, "chained-p50-ns")
	b.ReportMetric(c/p, "chained/plain")
}
