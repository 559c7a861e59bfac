package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

func ptr[T any](v T) *T { return &v }

func openTest(t *testing.T, opts *Options) (*Logger, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "logs", "audit.jsonl")
	l, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path
}

func TestLineFormat(t *testing.T) {
	rec := Record{
		Time:        time.Date(2026, 3, 5, 1, 0, 0, 0, time.FixedZone("CET", 3600)),
		Agent:       "travel",
		Phase:       PhaseFinished,
		Type:        TypeCoreTool,
		Tool:        "exec",
		Args:        json.RawMessage("[\"curl\",\n \"https://example.com\"]"),
		Decision:    DecisionAllowed,
		DurationMs:  ptr(int64(1234)),
		ExitCode:    ptr(0),
		OutputBytes: ptr(int64(4567)),
	}
	got, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"ts":"2026-03-05T00:00:00.000Z","agent":"travel","phase":"finished","type":"core_tool","tool":"exec","args":["curl","https://example.com"],"decision":"allowed","durationMs":1234,"exitCode":0,"outputBytes":4567}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	l, path := openTest(t, nil)
	recs := []Record{
		{
			Time: time.Date(2026, 3, 5, 0, 0, 1, 123456789, time.UTC), Agent: "travel",
			Session: "telegram:123:9", Model: "claude-sonnet-4-6", Channel: "telegram",
			Phase: PhaseStarted, Type: TypeTool, Tool: "git", Args: StringArgs([]string{"commit", "-m", "a \"quoted\"\nline\t<&>\u2028\x01"}),
			Decision: DecisionAllowed, Target: TargetGateway,
		},
		{
			Time: time.Date(2026, 3, 5, 0, 0, 2, 0, time.UTC), Agent: "travel",
			Phase: PhaseFinished, Type: TypeTool, Tool: "git", Args: StringArgs(nil),
			Decision: DecisionDenied, Target: TargetGateway, DurationMs: ptr(int64(0)),
			ExitCode: ptr(-1), OutputBytes: ptr(int64(1 << 40)), Error: "permission denied: tool 'git' not allowed for agent 'travel'",
		},
	}
	for _, r := range recs {
		if err := l.Log(r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs[0].Time = recs[0].Time.Truncate(time.Millisecond) // the log keeps milliseconds
	if len(got) != len(recs) {
		t.Fatalf("got %d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		if !got[i].Time.Equal(recs[i].Time) {
			t.Errorf("record %d: time %v, want %v", i, got[i].Time, recs[i].Time)
		}
		got[i].Time, recs[i].Time = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got[i], recs[i]) {
			t.Errorf("record %d:\ngot  %+v\nwant %+v", i, got[i], recs[i])
		}
	}
	var args []string
	if err := json.Unmarshal(got[0].Args, &args); err != nil || args[2] != "a \"quoted\"\nline\t<&>\u2028\x01" {
		t.Errorf("args = %q, %v", args, err)
	}
}

func TestTimeDefaultsToNow(t *testing.T) {
	l, path := openTest(t, nil)
	l.now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC) }
	if err := l.Log(Record{Agent: "a", Phase: PhaseStarted, Type: TypeCoreTool, Tool: "read"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), `{"ts":"2026-01-02T03:04:05.006Z",`) {
		t.Errorf("line = %s", data)
	}
}

func TestConcurrentWriters(t *testing.T) {
	l, path := openTest(t, nil)
	const writers, each = 50, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				// Vary the length so that lines straddle buffer boundaries.
				err := l.Log(Record{
					Agent: fmt.Sprintf("agent-%d", w), Phase: PhaseFinished, Type: TypeCoreTool, Tool: "exec",
					Args:  StringArgs([]string{strings.Repeat("x", (w*each+i)%300), fmt.Sprint(i)}),
					Error: strings.Repeat("é", i),
				})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	if len(lines) != writers*each {
		t.Fatalf("%d lines, want %d", len(lines), writers*each)
	}
	seen := map[string]bool{}
	for _, line := range lines {
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("invalid line %q: %v", line, err)
		}
		var args []string
		if err := json.Unmarshal(r.Args, &args); err != nil {
			t.Fatal(err)
		}
		seen[r.Agent+"/"+args[1]] = true
	}
	if len(seen) != writers*each {
		t.Errorf("%d distinct records, want %d", len(seen), writers*each)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

func TestRotation(t *testing.T) {
	// Each line is 150 bytes; 3 fit in 500. (Without the chain, whose
	// fields make lines of different lengths: see TestChainRotation.)
	l, path := openTest(t, &Options{MaxSizeBytes: 500, MaxFiles: 2})
	l.plain = true
	rec := func(i int) Record {
		r := Record{Time: time.Unix(0, 0), Agent: "a", Phase: PhaseStarted, Type: TypeCoreTool, Tool: "read"}
		line, _ := r.appendJSON(nil)
		r.Error = fmt.Sprintf("%0*d", 150-len(line)-len(`,"error":""`)-1, i)
		return r
	}
	if line, _ := rec(0).appendJSON(nil); len(line)+1 != 150 {
		t.Fatalf("test line is %d bytes, want 150", len(line)+1)
	}
	for i := range 10 {
		if err := l.Log(rec(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Files: .2 = 3-5, .1 = 6-8, current = 9; 0-2 dropped.
	want := map[string][]int{path + ".2": {3, 4, 5}, path + ".1": {6, 7, 8}, path: {9}}
	for p, nums := range want {
		recs, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, r := range recs {
			n, _ := strconv.Atoi(r.Error)
			got = append(got, n)
		}
		if !reflect.DeepEqual(got, nums) {
			t.Errorf("%s holds %v, want %v", filepath.Base(p), got, nums)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 500 {
			t.Errorf("%s is %d bytes, over the limit", filepath.Base(p), fi.Size())
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", filepath.Base(p), fi.Mode().Perm())
		}
	}
	if _, err := os.Stat(path + ".3"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("audit.jsonl.3 exists (err %v); MaxFiles is 2", err)
	}
}

func TestRotationOversizedRecord(t *testing.T) {
	l, path := openTest(t, &Options{MaxSizeBytes: 100})
	small := Record{Agent: "a", Phase: PhaseStarted, Type: TypeCoreTool, Tool: "read"}
	big := small
	big.Error = strings.Repeat("x", 500)
	for _, r := range []Record{small, big, small} {
		if err := l.Log(r); err != nil {
			t.Fatal(err)
		}
	}
	for p, n := range map[string]int{path + ".2": 1, path + ".1": 1, path: 1} {
		recs, err := ReadFile(p)
		if err != nil || len(recs) != n {
			t.Errorf("%s: %d records (%v), want %d", filepath.Base(p), len(recs), err, n)
		}
	}
}

func TestConcurrentRotation(t *testing.T) {
	l, path := openTest(t, &Options{MaxSizeBytes: 4096, MaxFiles: 1000})
	const writers, each = 20, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := l.Log(Record{Agent: fmt.Sprint(w), Phase: PhaseStarted, Type: TypeTool, Tool: "git", Error: fmt.Sprint(i)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	files, _ := filepath.Glob(path + "*")
	if len(files) < 3 {
		t.Fatalf("only %d files; expected rotation", len(files))
	}
	total := 0
	for _, p := range files {
		recs, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		total += len(recs)
	}
	if total != writers*each {
		t.Errorf("%d records in %d files, want %d", total, len(files), writers*each)
	}
}

func TestPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home", "logs")
	path := filepath.Join(dir, "audit.jsonl")
	l, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Log(Record{Agent: "a", Phase: PhaseStarted, Type: TypeCoreTool, Tool: "exec"}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, filepath.Dir(dir): 0o700, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
}

func TestExistingFileTightened(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, []byte(`{"ts":"2026-03-05T00:00:00.000Z","agent":"a","phase":"started","type":"tool","tool":"git"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Log(Record{Agent: "b", Phase: PhaseStarted, Type: TypeTool, Tool: "git"}); err != nil {
		t.Fatal(err)
	}
	recs, err := ReadFile(path)
	if err != nil || len(recs) != 2 || recs[1].Agent != "b" {
		t.Fatalf("records %+v, %v", recs, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestWriteErrorsReturned(t *testing.T) {
	l, path := openTest(t, nil)
	rec := Record{Agent: "a", Phase: PhaseStarted, Type: TypeCoreTool, Tool: "exec"}

	// Invalid args: nothing written.
	bad := rec
	bad.Args = json.RawMessage(`{"command":`)
	if err := l.Log(bad); err == nil {
		t.Error("invalid args: no error")
	}

	if err := l.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if err := l.Log(rec); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	if data, _ := os.ReadFile(path); len(data) != 0 {
		t.Errorf("file holds %q", data)
	}
}

func TestStringArgs(t *testing.T) {
	for _, args := range [][]string{nil, {}, {""}, {"a", "b c", "\"\\\n\x00", "\xff\xfe", "\u2029"}} {
		raw := StringArgs(args)
		var got []string
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatalf("%q: %v (%s)", args, err, raw)
		}
		want := make([]string, len(args))
		for i, a := range args {
			std, _ := json.Marshal(a) // encoding/json's handling of invalid UTF-8
			json.Unmarshal(std, &want[i])
		}
		if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
			t.Errorf("StringArgs(%q) decodes to %q", args, got)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\/\b\f\n\r\t", "\x00\x1f\x7f", "é\u2028\u2029😀", "\xff", "a\xc3", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendString(nil, s)
		if strings.ContainsAny(string(b), "\n\r") {
			t.Fatalf("raw newline in %q", b)
		}
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q -> %q: %v", s, b, err)
		}
		if want := strings.ToValidUTF8(s, "\uFFFD"); got != want && utf8.ValidString(s) {
			t.Fatalf("%q -> %q -> %q", s, b, got)
		}
		// For invalid UTF-8 compare with encoding/json's own replacement.
		std, _ := json.Marshal(s)
		var stdGot string
		json.Unmarshal(std, &stdGot)
		if got != stdGot {
			t.Fatalf("%q: we decode to %q, encoding/json to %q", s, got, stdGot)
		}
	})
}

func BenchmarkLog(b *testing.B) {
	l, err := Open(filepath.Join(b.TempDir(), "audit.jsonl"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	rec := Record{
		Agent: "travel", Session: "tui:travel:default", Channel: "tui", Phase: PhaseFinished,
		Type: TypeCoreTool, Tool: "exec", Args: json.RawMessage(`{"command":"ls -la /workspace"}`),
		Decision: DecisionAllowed, Target: TargetSandbox, DurationMs: ptr(int64(12)), ExitCode: ptr(0), OutputBytes: ptr(int64(345)),
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Log(rec); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNetRecord: an egress connection is one line with its destination,
// decision and byte counts, and reads back the same.
func TestNetRecord(t *testing.T) {
	rec := Record{
		Time: time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC), Agent: "a", Phase: PhaseFinished,
		Type: TypeNet, Tool: "egress", Decision: DecisionAllowed, DurationMs: ptr(int64(12)),
		Host: "example.com", Port: 443, Method: "CONNECT", Rule: "*", BytesUp: ptr(int64(517)), BytesDown: ptr(int64(0)),
	}
	got, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"ts":"2026-03-05T00:00:00.000Z","agent":"a","phase":"finished","type":"net","tool":"egress","decision":"allowed","durationMs":12,"host":"example.com","port":443,"method":"CONNECT","rule":"*","bytesUp":517,"bytesDown":0}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var back Record
	if err := json.Unmarshal(got, &back); err != nil || back.Host != rec.Host || back.Port != 443 || *back.BytesUp != 517 || *back.BytesDown != 0 || back.Method != "CONNECT" {
		t.Errorf("read back %+v, %v", back, err)
	}
}
