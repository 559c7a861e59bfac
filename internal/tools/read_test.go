package tools

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestReadLines(t *testing.T) {
	lines := func(n int) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "line %d\n", i)
		}
		return b.String()
	}
	kLines := strings.Repeat(strings.Repeat("x", 1000)+"\n", 100) // 100 lines of 1001 bytes
	tests := []struct {
		name          string
		data          string
		size          int64 // 0: len(data)
		offset, limit int
		want          string
		ok            bool
	}{
		{"whole file", "a\nb\nc\n", 0, 0, 0, "a\nb\nc\n", true},
		{"no final newline", "a\nb\nc", 0, 0, 0, "a\nb\nc", true},
		{"crlf kept", "a\r\nb\r\n", 0, 0, 0, "a\r\nb\r\n", true},
		{"empty file", "", 0, 0, 0, "", true},
		{"empty lines", "\n\n", 0, 2, 0, "\n", true},
		{"offset", "a\nb\nc\n", 0, 2, 0, "b\nc\n", true},
		{"last line", "a\nb\nc", 0, 3, 0, "c", true},
		{"offset+limit", "a\nb\nc\n", 0, 2, 1, "b\n\n[showing lines 2-2 of 3; use offset=3 to read more]", true},
		{"limit past end", "a\nb\nc\n", 0, 2, 10, "b\nc\n", true},
		{"limit exact end", "a\nb\nc\n", 0, 1, 3, "a\nb\nc\n", true},
		{"limit no final newline", "a\nb\nc", 0, 1, 2, "a\nb\n\n[showing lines 1-2 of 3; use offset=3 to read more]", true},
		{"offset past end", "a\nb\nc\n", 0, 4, 0, "read /w/f: offset 4 is past the end of the file (3 lines)", false},
		{"offset in empty file", "", 0, 2, 0, "read /w/f: offset 2 is past the end of the file (it is empty)", false},
		{"default limit", lines(2500), 0, 0, 0, lines(2000) + "\n[showing lines 1-2000 of 2500; use offset=2001 to read more]", true},
		{"default limit from offset", lines(2500), 0, 2001, 0, strings.TrimPrefix(lines(2500), lines(2000)), true},
		{"byte cap", kLines, 0, 0, 0, strings.Repeat(strings.Repeat("x", 1000)+"\n", 51) + "\n[showing lines 1-51 of 100; use offset=52 to read more]", true},
		{"byte cap from offset", kLines, 0, 90, 0, strings.Repeat(strings.Repeat("x", 1000)+"\n", 11), true},
		{"long line", "short\n" + strings.Repeat("y", 60000) + "\nend\n", 0, 2, 0,
			strings.Repeat("y", readMaxBytes) + "\n\n[line 2 is longer than 51200 bytes; showed its start. Use exec (e.g. cut -c or head -c) to see all of it, or offset=3 to go on]", true},
		{"long last line", strings.Repeat("y", 60000), 0, 0, 0,
			strings.Repeat("y", readMaxBytes) + "\n\n[line 1 is longer than 51200 bytes; showed its start. Use exec (e.g. cut -c or head -c) to see all of it]", true},
		{"prefix: all lines shown", "a\nb\nc\npart", 100, 0, 0,
			"a\nb\nc\n\n[file truncated: read sees the first 6 of 100 bytes (lines 1-3); use exec (e.g. tail -n +4) to see the rest]", true},
		{"prefix: more lines", "a\nb\nc\npart", 100, 1, 2,
			"a\nb\n\n[showing lines 1-2 of the first 3; the file is 100 bytes and read sees its first 6; use offset=3 to read more]", true},
		{"prefix: offset past", "a\nb\nc\npart", 100, 5, 10,
			"read /w/f: offset 5 is past the lines read can see (the first 6 bytes of 100 hold 3 lines); use exec (e.g. sed -n '5,14p') to read further", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			size := tt.size
			if size == 0 {
				size = int64(len(tt.data))
			}
			got, ok := readLines("/w/f", []byte(tt.data), size, tt.offset, tt.limit)
			if got != tt.want || ok != tt.ok {
				t.Errorf("got (%v)\n%.300q\nwant (%v)\n%.300q", ok, got, tt.ok, tt.want)
			}
		})
	}
}

func TestReadLongLineCutsOnRune(t *testing.T) {
	data := "a" + strings.Repeat("é", readMaxBytes) // the cut falls inside an é
	got, ok := readLines("/w/f", []byte(data), int64(len(data)), 0, 0)
	text, _, _ := strings.Cut(got, "\n\n[line 1")
	if !ok || !utf8.ValidString(text) || len(text) != readMaxBytes-1 {
		t.Errorf("ok %v, valid %v, %d bytes", ok, utf8.ValidString(text), len(text))
	}
}

func TestIsBinary(t *testing.T) {
	tests := []struct {
		name string
		data string
		size int64
		want bool
	}{
		{"text", "hello\n", 0, false},
		{"utf8", "héllo wörld ✓\n", 0, false},
		{"empty", "", 0, false},
		{"nul", "abc\x00def", 0, true},
		{"latin1", "caf\xe9\n", 0, true},
		{"nul after sniff", strings.Repeat("a", sniffBytes) + "\x00", 0, false},
		{"rune cut at sniff", strings.Repeat("a", sniffBytes-1) + "é", 0, false},
		{"rune cut at prefix", "ab\xc3", 10, false},
		{"invalid at end", "ab\xc3", 0, true},
	}
	for _, tt := range tests {
		size := tt.size
		if size == 0 {
			size = int64(len(tt.data))
		}
		if got := isBinary([]byte(tt.data), size); got != tt.want {
			t.Errorf("%s: isBinary = %v, want %v", tt.name, got, tt.want)
		}
	}
}

var (
	pngData  = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR fake"
	jpegData = "\xff\xd8\xff\xe0\x00\x10JFIF"
	gifData  = "GIF89a\x01\x00"
	webpData = "RIFF\x10\x00\x00\x00WEBPVP8 "
)

func TestReadTool(t *testing.T) {
	e := newEnv(t, nil)
	e.sb.put("/workspace/notes.txt", "one\ntwo\nthree\n")
	e.sb.put("/workspace/pic.png", pngData)
	e.sb.put("/workspace/Photo.JPG", jpegData)
	e.sb.put("/workspace/anim.gif", gifData)
	e.sb.put("/workspace/x.webp", webpData)
	e.sb.put("/workspace/fake.png", "not an image\n")
	e.sb.put("/workspace/big.png", pngData+strings.Repeat("\x00", imageMaxBytes))
	e.sb.put("/workspace/prog", "\x7fELF\x02\x01\x01\x00\x00")
	e.sb.dirs["/workspace/sub"] = true

	tests := []struct {
		call    *ReadCall
		text    string // the text of the first block
		isError bool
		mime    string // of an image block
	}{
		{&ReadCall{Path: "notes.txt"}, "one\ntwo\nthree\n", false, ""},
		{&ReadCall{Path: "/workspace/notes.txt", Offset: 2, Limit: 1}, "two\n\n[showing lines 2-2 of 3; use offset=3 to read more]", false, ""},
		{&ReadCall{Path: "missing.txt"}, "read /workspace/missing.txt: no such file or directory", true, ""},
		{&ReadCall{Path: "sub"}, "read /workspace/sub: is a directory", true, ""},
		{&ReadCall{Path: "notes.txt", Offset: 9}, "read /workspace/notes.txt: offset 9 is past the end of the file (3 lines)", true, ""},
		{&ReadCall{Path: "prog"}, "/workspace/prog is a binary file (9 bytes); use exec with xxd, base64 or file to inspect it", false, ""},
		{&ReadCall{Path: "pic.png"}, fmt.Sprintf("Read image /workspace/pic.png (image/png, %d bytes)", len(pngData)), false, "image/png"},
		{&ReadCall{Path: "Photo.JPG"}, fmt.Sprintf("Read image /workspace/Photo.JPG (image/jpeg, %d bytes)", len(jpegData)), false, "image/jpeg"},
		{&ReadCall{Path: "anim.gif"}, fmt.Sprintf("Read image /workspace/anim.gif (image/gif, %d bytes)", len(gifData)), false, "image/gif"},
		{&ReadCall{Path: "x.webp"}, fmt.Sprintf("Read image /workspace/x.webp (image/webp, %d bytes)", len(webpData)), false, "image/webp"},
		{&ReadCall{Path: "fake.png"}, "not an image\n", false, ""},
		{&ReadCall{Path: "big.png"}, fmt.Sprintf("/workspace/big.png is an image (image/png, %d bytes), too large to return (limit 5 MB); use exec to shrink or inspect it", len(pngData)+imageMaxBytes), false, ""},
	}
	for _, tt := range tests {
		res := e.run(t, tt.call)
		if len(res.Content) == 0 || res.Content[0].Type != "text" || res.Content[0].Text != tt.text || res.IsError != tt.isError {
			t.Errorf("read %s: got %+v, want text %q isError %v", tt.call.Path, res, tt.text, tt.isError)
			continue
		}
		if tt.mime == "" {
			if len(res.Content) != 1 {
				t.Errorf("read %s: %d blocks", tt.call.Path, len(res.Content))
			}
			continue
		}
		if len(res.Content) != 2 || res.Content[1].Type != "image" || res.Content[1].MimeType != tt.mime {
			t.Errorf("read %s: blocks %+v, want an %s image", tt.call.Path, res.Content, tt.mime)
			continue
		}
		data, err := base64.StdEncoding.DecodeString(res.Content[1].Data)
		if err != nil || string(data) != e.sb.file("/workspace/"+tt.call.Path) {
			t.Errorf("read %s: image data differs (%v)", tt.call.Path, err)
		}
	}

	// Without images, an image is described.
	inv := e.inv(&ReadCall{Path: "pic.png"})
	inv.NoImages = true
	res, err := e.runner.Run(t.Context(), inv)
	if err != nil || len(res.Content) != 1 || !strings.Contains(res.Text(), "this model cannot take images") {
		t.Errorf("NoImages: %+v, %v", res, err)
	}

	// The audit log has the true file size as the output size.
	recs := e.records(t)
	last := recs[len(recs)-1]
	if last.OutputBytes == nil || *last.OutputBytes != int64(len(pngData)) {
		t.Errorf("audit outputBytes %v, want %d", last.OutputBytes, len(pngData))
	}
}

func TestReadLargeFileSeesPrefix(t *testing.T) {
	e := newEnv(t, nil)
	line := strings.Repeat("z", 1023) + "\n"
	e.sb.put("/workspace/huge.log", strings.Repeat(line, (readFetchBytes>>10)+100)) // 100 KB past what read sees
	res := e.run(t, &ReadCall{Path: "huge.log", Offset: readFetchBytes >> 10})
	want := line + "\n[file truncated: read sees the first 8388608 of 8491008 bytes (lines 1-8192); use exec (e.g. tail -n +8193) to see the rest]"
	if res.Text() != want || res.IsError {
		t.Errorf("got %.200q…", res.Text())
	}
	recs := e.records(t)
	if got := *recs[len(recs)-1].OutputBytes; got != 8491008 {
		t.Errorf("outputBytes %d", got)
	}
}
