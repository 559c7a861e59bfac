package nodehost

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
)

func TestParseFrame(t *testing.T) {
	tests := []struct {
		in, err string // err "" means accepted
	}{
		{`{"t":"res","id":1,"result":{"output":"x","exitCode":0}}`, ""},
		{`{"t":"res","id":2,"error":"boom","code":"ERR_ACCESS_DENIED"}`, ""},
		{`{"t":"req","id":3,"op":"prompt","args":{}}`, ""},
		{`{"t":"req","id":3,"op":"listSessions","sync":true,"args":{}}`, ""},
		{`{"t":"log","level":"info","msg":"hi"}`, ""},
		{`{"t":"req","id":3}`, "a request needs an id and an op"},
		{`{"t":"req","op":"x"}`, "a request needs an id and an op"},
		{`{"t":"res"}`, "an answer needs an id"},
		{`{"t":"res","id":-1}`, "bad frame"},
		{`{"t":"evil","id":1}`, `unknown kind "evil"`},
		{`{"t":"res","id":1,"extra":1}`, `unknown field "extra"`},
		{`{"t":"res","id":1} {"t":"res","id":2}`, "data after the object"},
		{`{"t":"res","id":1}x`, "data after the object"},
		{`[1]`, "bad frame"},
		{`null`, "unknown kind"},
		{``, "bad frame"},
	}
	for _, tt := range tests {
		_, err := parseFrame([]byte(tt.in))
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.in, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: err %v, want %q", tt.in, err, tt.err)
		}
	}
}

func TestReadLineBounded(t *testing.T) {
	long := strings.Repeat("a", 100) + "\n"
	r := bufio.NewReaderSize(strings.NewReader("short\n"+long+"tail"), 16)
	if l, err := readLine(r, 50); err != nil || string(l) != "short" {
		t.Fatalf("short: %q %v", l, err)
	}
	if _, err := readLine(r, 50); !errors.Is(err, errFrameTooLong) {
		t.Fatalf("long: %v", err)
	}
	r = bufio.NewReader(strings.NewReader("tail"))
	if _, err := readLine(r, 50); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("no newline at the end: %v", err)
	}
	r = bufio.NewReader(strings.NewReader(strings.Repeat("b", 50) + "\n"))
	if l, err := readLine(r, 50); err != nil || len(l) != 50 {
		t.Fatalf("exactly max: %d %v", len(l), err)
	}
}

// FuzzParseFrame: frames from the plugin host are hostile; the parser never
// panics, never accepts a frame without its kind's fields, and reading a
// stream of them never returns a line longer than the bound.
func FuzzParseFrame(f *testing.F) {
	f.Add([]byte(`{"t":"res","id":1,"result":{"output":"x","exitCode":0}}` + "\n"))
	f.Add([]byte(`{"t":"req","id":3,"op":"listSessions","sync":true,"args":{"agentName":"a"}}` + "\n"))
	f.Add([]byte(`{"t":"log","level":"warn","msg":"\u0000"}` + "\n{\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReaderSize(bytes.NewReader(data), 16)
		for range 100 {
			line, err := readLine(r, 64)
			if err != nil {
				return
			}
			if len(line) > 64 || bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("line of %d bytes: %q", len(line), line)
			}
			fr, err := parseFrame(line)
			if err != nil {
				continue
			}
			switch fr.T {
			case "req":
				if fr.ID == 0 || fr.Op == "" {
					t.Fatalf("accepted %q", line)
				}
			case "res":
				if fr.ID == 0 {
					t.Fatalf("accepted %q", line)
				}
			case "log":
			default:
				t.Fatalf("accepted kind %q", fr.T)
			}
		}
	})
}

func TestLogWriterBounded(t *testing.T) {
	var buf logBuf
	w := &logWriter{log: slog.New(slog.NewTextHandler(&buf, nil)), stream: "stdout"}
	w.Write([]byte(strings.Repeat("x", 3*maxLogLine) + "\nshort\npart"))
	w.Write([]byte("ial\n"))
	out := buf.String()
	if strings.Count(out, "\n") != 3 || !strings.Contains(out, "msg=short") || !strings.Contains(out, "msg=partial") {
		t.Errorf("lines:\n%s", out)
	}
	for range 2 * maxLogLines {
		w.Write([]byte("flood\n"))
	}
	if n := strings.Count(buf.String(), "flood"); n != maxLogLines-3 {
		t.Errorf("%d flood lines logged, want %d", n, maxLogLines-3)
	}
}
