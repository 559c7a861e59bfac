package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"
)

// maxLine is what one record may take at most: every bound at once, with
// room for the fixed fields and JSON escaping of the cut strings.
const maxLine = 24 << 10

// TestAgentCannotWipeAuditTrail is the attack of issue #10.5: 62 denied
// socket calls with 1 MB of args each, through the real writer with its
// default options. Every earlier record must still be in the log, and the
// big calls are there too, cut, with their true size and hash.
func TestAgentCannotWipeAuditTrail(t *testing.T) {
	l, path := openTest(t, nil)
	const earlier = 100
	for i := range earlier {
		if err := l.Log(Record{Agent: "good", Phase: PhaseFinished, Type: TypeTool, Tool: "git", Args: StringArgs([]string{"log", fmt.Sprint(i)}), Decision: DecisionAllowed}); err != nil {
			t.Fatal(err)
		}
	}
	huge := strings.Repeat("A", 1<<20)
	args := StringArgs([]string{"push", huge})
	sum := sha256.Sum256(args)
	for range 62 {
		if err := l.Log(Record{Agent: "evil", Phase: PhaseFinished, Type: TypeTool, Tool: "git", Args: args, Decision: DecisionDenied, Error: "permission denied: " + huge}); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob(path + "*")
	seen, evil := map[string]bool{}, 0
	var total int64
	for _, p := range files {
		fi, _ := os.Stat(p)
		total += fi.Size()
		recs, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			switch r.Agent {
			case "good":
				var a []string
				json.Unmarshal(r.Args, &a)
				seen[a[1]] = true
			case "evil":
				evil++
				if !r.Truncated || r.ArgsBytes != int64(len(args)) || r.ArgsSha256 != hex.EncodeToString(sum[:]) {
					t.Errorf("cut record: truncated %v, argsBytes %d, argsSha256 %s; want true, %d, the args' hash", r.Truncated, r.ArgsBytes, r.ArgsSha256, len(args))
				}
				var a []string
				if err := json.Unmarshal(r.Args, &a); err != nil || len(a) != 2 || a[0] != "push" || !strings.HasPrefix(a[1], "AAAA") {
					t.Errorf("cut args lost their shape: %.100s (%v)", r.Args, err)
				}
			}
		}
	}
	if len(seen) != earlier {
		t.Errorf("%d of the %d earlier records are left in %d file(s)", len(seen), earlier, len(files))
	}
	if evil != 62 {
		t.Errorf("%d of the 62 denied calls are in the log", evil)
	}
	if total > 62*maxLine+earlier*200 {
		t.Errorf("the log grew by %d bytes for 62 calls", total)
	}
}

// TestRotationKeepsEverythingByDefault: without an operator's retention,
// rotation never deletes a file, however many rotations there are.
func TestRotationKeepsEverythingByDefault(t *testing.T) {
	l, path := openTest(t, &Options{MaxSizeBytes: 1000})
	const n = 300 // about 30 rotations
	for i := range n {
		if err := l.Log(Record{Agent: "a", Phase: PhaseStarted, Type: TypeTool, Tool: "git", Error: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob(path + "*")
	seen := map[string]bool{}
	for _, p := range files {
		recs, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			seen[r.Error] = true
		}
	}
	if len(files) < 20 || len(seen) != n {
		t.Errorf("%d records in %d files, want %d in about 30", len(seen), len(files), n)
	}
	// The oldest records are in the highest-numbered file.
	recs, err := ReadFile(fmt.Sprintf("%s.%d", path, len(files)-1))
	if err != nil || len(recs) == 0 || recs[0].Error != "0" {
		t.Errorf("oldest file holds %+v (%v), want record 0 first", recs, err)
	}
}

func TestFieldsBounded(t *testing.T) {
	long := strings.Repeat("é", 100<<10) // 200 KB, two bytes a rune
	cases := []struct {
		name string
		rec  Record
	}{
		{"tool", Record{Tool: long}},
		{"agent, session, model, channel", Record{Agent: long, Session: long, Model: long, Channel: long}},
		{"enums", Record{Phase: long, Type: long, Decision: long, Target: long}},
		{"error", Record{Error: long}},
		{"string args", Record{Args: StringArgs([]string{long, long, "x"})}},
		{"many short args", Record{Args: StringArgs(strings.Split(strings.Repeat("a,", 100000), ","))}},
		{"object args", Record{Args: json.RawMessage(`{"path":"x","content":"` + long + `","n":12,"ok":true,"z":null}`)}},
		{"nested args", Record{Args: json.RawMessage(strings.Repeat(`[`, 500) + `"` + long + `"` + strings.Repeat(`]`, 500))}},
		{"long keys", Record{Args: json.RawMessage(`{"` + long + `":1,"` + long + `x":2}`)}},
		{"long number", Record{Args: json.RawMessage(`[` + strings.Repeat("1", 100000) + `]`)}},
		{"control characters", Record{Args: StringArgs([]string{strings.Repeat("\x01", 100000)}), Error: strings.Repeat("\x01", 100000)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, path := openTest(t, nil)
			if err := l.Log(tc.rec); err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(path)
			if len(data) > maxLine {
				t.Errorf("line is %d bytes, over %d", len(data), maxLine)
			}
			recs, err := ReadFile(path)
			if err != nil || len(recs) != 1 {
				t.Fatalf("%d records, %v", len(recs), err)
			}
			r := recs[0]
			if !r.Truncated {
				t.Error("truncated not set")
			}
			for _, s := range []string{r.Agent, r.Session, r.Model, r.Channel, r.Phase, r.Type, r.Tool, r.Decision, r.Target, r.Error} {
				if !utf8.ValidString(s) {
					t.Errorf("cut inside a rune: %q", s[len(s)-8:])
				}
			}
			if len(tc.rec.Args) > 0 {
				sum := sha256.Sum256(tc.rec.Args)
				if r.ArgsBytes != int64(len(tc.rec.Args)) || r.ArgsSha256 != hex.EncodeToString(sum[:]) {
					t.Errorf("argsBytes %d argsSha256 %s, want %d and the hash", r.ArgsBytes, r.ArgsSha256, len(tc.rec.Args))
				}
				var orig, got any
				json.Unmarshal(tc.rec.Args, &orig)
				json.Unmarshal(r.Args, &got)
				if fmt.Sprintf("%T", orig) != fmt.Sprintf("%T", got) {
					t.Errorf("args changed shape: %T to %T", orig, got)
				}
			}
		})
	}
}

// TestSmallRecordsUntouched: records within bounds are written as given.
func TestSmallRecordsUntouched(t *testing.T) {
	rec := Record{Agent: "a", Phase: PhaseStarted, Type: TypeTool, Tool: "git", Args: StringArgs([]string{strings.Repeat("x", 3000)}), Error: strings.Repeat("e", MaxErrorBytes)}
	want, _ := rec.appendJSON(nil)
	if err := rec.bound(); err != nil {
		t.Fatal(err)
	}
	if got, _ := rec.appendJSON(nil); !bytes.Equal(got, want) || rec.Truncated {
		t.Errorf("a record within bounds was changed")
	}
}

func FuzzBoundArgs(f *testing.F) {
	for _, s := range []string{`[]`, `{}`, `["a"]`, `{"a":[1,2,{"b":"c"}]}`, `"x"`, `1e400`, `[null,true,false]`} {
		f.Add(s, 100)
	}
	f.Fuzz(func(t *testing.T, js string, repeat int) {
		if !json.Valid([]byte(js)) {
			return
		}
		repeat = 1 + (repeat&0xff)%64
		big := "[" + strings.Repeat(js+",", repeat) + js + "," + `"` + strings.Repeat("z", MaxArgsBytes) + `"]`
		out, err := boundArgs(json.RawMessage(big))
		if err != nil {
			t.Fatalf("boundArgs(%.200s): %v", big, err)
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON %.200s", out)
		}
		if len(out) > maxLine {
			t.Fatalf("%d bytes out", len(out))
		}
	})
}

// TestTornTailOnOpen: when audit.jsonl ends mid-record (a crash during a
// write), the next record starts on a fresh line instead of being glued
// onto the fragment, and opening reports the fragment (#13.2).
func TestTornTailOnOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	whole := `{"ts":"2026-03-05T00:00:00.000Z","agent":"a","phase":"started","type":"tool","tool":"git"}` + "\n"
	torn := `{"ts":"2026-03-05T00:00:01.000Z","agent":"a","pha`
	if err := os.WriteFile(path, []byte(whole+torn), 0o600); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	l, err := Open(path, &Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Log(Record{Agent: "b", Phase: PhaseStarted, Type: TypeTool, Tool: "git"}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 4 || lines[1] != torn {
		t.Fatalf("file holds %q; want the whole record, the fragment alone, the repair record, the new record", data)
	}
	var rep, r Record
	if err := json.Unmarshal([]byte(lines[2]), &rep); err != nil || rep.Type != TypeAudit || rep.Tool != ToolRepair {
		t.Errorf("repair record %q: %v", lines[2], err)
	}
	if err := json.Unmarshal([]byte(lines[3]), &r); err != nil || r.Agent != "b" {
		t.Errorf("new record %q: %v", lines[3], err)
	}
	if s := logged.String(); !strings.Contains(s, "torn record") || !strings.Contains(s, fmt.Sprintf("offset=%d bytes=%d", len(whole), len(torn))) {
		t.Errorf("fragment not reported: %q", s)
	}
}

// TestFullDisk writes to a real, small tmpfs until it is full: no record
// may be torn, each Log that said nil is in the file, and once there is room
// again the log goes on (#13.2).
func TestFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	// A filler to delete later, so that there is room again.
	if err := os.WriteFile(filepath.Join(dir, "filler"), make([]byte, 16<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "audit.jsonl")
	l, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	logged, failed := 0, 0
	for i := 0; i < 10000 && failed < 5; i++ {
		// Odd sizes, so that a write straddles the last free page.
		err := l.Log(Record{Agent: "a", Phase: PhaseStarted, Type: TypeTool, Tool: "git", Args: StringArgs([]string{strings.Repeat("x", 100+i*37%900)}), Error: fmt.Sprint(i)})
		if err == nil {
			logged++
		} else {
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("the disk never filled")
	}
	check := func(want int) {
		t.Helper()
		recs, err := ReadFile(path)
		if err != nil {
			t.Fatalf("torn record in the log: %v", err)
		}
		if len(recs) != want {
			t.Errorf("%d records in the log, %d Log calls succeeded", len(recs), want)
		}
	}
	check(logged)
	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	if err := l.Log(Record{Agent: "a", Phase: PhaseStarted, Type: TypeTool, Tool: "git", Error: "after"}); err != nil {
		t.Fatalf("with room again: %v", err)
	}
	check(logged + 1)
}

// FuzzBoundStringArray: the fast path for arrays of strings gives valid
// JSON within bounds, an array of the original strings' prefixes.
func FuzzBoundStringArray(f *testing.F) {
	f.Add("a", "b\"\\\n\u00e9\U0001F600", 3000, 0)
	f.Add("\\u0041", "x", 100, 5)
	f.Fuzz(func(t *testing.T, a, b string, repeat, count int) {
		repeat, count = 1+(repeat&0xffff)%3000, 1+(count&0xff)%20
		var args []string
		for i := range count {
			if i%2 == 0 {
				args = append(args, strings.Repeat(a, repeat))
			} else {
				args = append(args, b)
			}
		}
		raw := StringArgs(args)
		out, ok := boundStringArray(raw)
		if !ok {
			t.Fatalf("not taken for %.100s", raw)
		}
		if len(out) > maxLine {
			t.Fatalf("%d bytes", len(out))
		}
		var got []string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%v: %.200s", err, out)
		}
		if len(got) == 0 || len(got) > len(args) {
			t.Fatalf("%d of %d strings", len(got), len(args))
		}
		var all []string
		json.Unmarshal(raw, &all) // the strings as StringArgs wrote them
		for i, g := range got {
			want := all[i]
			if g == want {
				continue
			}
			p, ok := strings.CutSuffix(g, ellipsis)
			if !ok || !strings.HasPrefix(want, p) {
				t.Fatalf("string %d: %.80q is not a marked prefix of %.80q", i, g, want)
			}
		}
	})
}

// TestFullDiskFreesReserve: on a full disk, OnWriteError (the gateway's
// disk reserve) frees room and the same record is written, whole, at once.
func TestFullDiskFreesReserve(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	reserve := filepath.Join(dir, "reserve")
	if err := os.WriteFile(reserve, make([]byte, 16<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	// An agent fills the rest of the disk.
	fill, err := os.Create(filepath.Join(dir, "workspace-file"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := fill.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	fill.Close()
	var released []error
	path := filepath.Join(dir, "audit.jsonl")
	l, err := Open(path, &Options{OnWriteError: func(err error) bool {
		released = append(released, err)
		return os.Remove(reserve) == nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Log(Record{Agent: "a", Phase: PhaseFinished, Type: TypeCoreTool, Tool: "exec", Decision: DecisionAllowed}); err != nil {
		t.Fatalf("Log on a full disk with a reserve to free: %v", err)
	}
	if len(released) != 1 || !errors.Is(released[0], syscall.ENOSPC) {
		t.Errorf("OnWriteError called with %v, want one ENOSPC", released)
	}
	recs, err := ReadFile(path)
	if err != nil || len(recs) != 1 || recs[0].Tool != "exec" {
		t.Errorf("log holds %+v, %v; want the one record", recs, err)
	}
}
