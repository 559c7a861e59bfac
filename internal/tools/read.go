package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/beige-dev/beige/internal/proto"
)

func (r *Runner) read(ctx context.Context, inv Invocation, c *ReadCall) (outcome, error) {
	data, size, err := inv.Sandbox.ReadFile(ctx, c.Path, readFetchBytes)
	if err != nil {
		return fileError(ctx, "read", c.Path, err)
	}
	if len(data) > readFetchBytes { // a sandbox that ignored max
		data = data[:readFetchBytes]
	}
	size = max(size, int64(len(data)))

	if mime := imageType(c.Path, data); mime != "" {
		o := readImage(inv, c.Path, data, size, mime)
		o.outputBytes = size
		return o, nil
	}
	if isBinary(data, size) {
		o := textOutcome(fmt.Sprintf("%s is a binary file (%d bytes); use exec with xxd, base64 or file to inspect it", c.Path, size), false)
		o.outputBytes = size
		return o, nil
	}
	text, ok := readLines(c.Path, data, size, c.Offset, c.Limit)
	o := textOutcome(text, !ok)
	o.outputBytes = size
	return o, nil
}

func readImage(inv Invocation, p string, data []byte, size int64, mime string) outcome {
	switch {
	case inv.NoImages:
		return textOutcome(fmt.Sprintf("%s is an image (%s, %d bytes); this model cannot take images", p, mime, size), false)
	case size > imageMaxBytes || int64(len(data)) < size:
		return textOutcome(fmt.Sprintf("%s is an image (%s, %d bytes), too large to return (limit %d MB); use exec to shrink or inspect it",
			p, mime, size, imageMaxBytes>>20), false)
	}
	return outcome{res: proto.ToolResult{Content: []proto.Content{
		{Type: "text", Text: fmt.Sprintf("Read image %s (%s, %d bytes)", p, mime, size)},
		{Type: "image", Data: base64.StdEncoding.EncodeToString(data), MimeType: mime},
	}}}
}

// imageType returns the MIME type of a file that read returns as an image:
// its name must end in .png, .jpg, .jpeg, .gif or .webp, and its content
// must be one of those formats, which then gives the type (a model's API
// refuses the whole request when an image is not what it claims to be).
func imageType(p string, data []byte) string {
	switch strings.ToLower(path.Ext(p)) {
	case ".png", ".jpg", ".jpeg", ".gif", ".webp":
	default:
		return ""
	}
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(data, []byte("\xff\xd8\xff")):
		return "image/jpeg"
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return "image/gif"
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// isBinary says whether a file looks binary: a NUL byte, or invalid UTF-8,
// in its first sniffBytes.
func isBinary(data []byte, size int64) bool {
	sample := data[:min(len(data), sniffBytes)]
	if bytes.IndexByte(sample, 0) >= 0 {
		return true
	}
	if int64(len(sample)) < size {
		sample = trimPartialRune(sample)
	}
	return !utf8.Valid(sample)
}

// readLines picks lines offset… of a text file for read; data is the file,
// or its first bytes when len(data) < size. It returns the text and whether
// the read succeeded.
func readLines(p string, data []byte, size int64, offset, limit int) (string, bool) {
	if offset == 0 {
		offset = 1
	}
	if limit == 0 {
		limit = readDefaultLimit
	}
	partial := int64(len(data)) < size
	if partial {
		// Only whole lines, unless the first line is longer than what we have.
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			data = data[:i+1]
		}
	}
	total := bytes.Count(data, []byte{'\n'})
	if len(data) > 0 && data[len(data)-1] != '\n' {
		total++
	}
	if total == 0 {
		if offset == 1 {
			return "", true // an empty file
		}
		return fmt.Sprintf("read %s: offset %d is past the end of the file (it is empty)", p, offset), false
	}
	if offset > total {
		if partial {
			return fmt.Sprintf("read %s: offset %d is past the lines read can see (the first %d bytes of %d hold %d lines); use exec (e.g. sed -n '%d,%dp') to read further",
				p, offset, len(data), size, total, offset, offset+limit-1), false
		}
		return fmt.Sprintf("read %s: offset %d is past the end of the file (%d lines)", p, offset, total), false
	}

	// Find the first byte of line offset.
	pos := 0
	for range offset - 1 {
		pos += bytes.IndexByte(data[pos:], '\n') + 1
	}
	last := min(offset+limit-1, total) // the last line wanted
	shown, cur := offset-1, pos        // the last line taken, and where it ends
	for shown < last {
		end := len(data)
		if i := bytes.IndexByte(data[cur:], '\n'); i >= 0 {
			end = cur + i + 1
		}
		if end-pos > readMaxBytes {
			break
		}
		shown, cur = shown+1, end
	}

	var b strings.Builder
	var note string
	if shown < offset {
		// The first line alone is over the limit: show its start.
		b.Write(trimPartialRune(data[pos : pos+readMaxBytes]))
		note = fmt.Sprintf("[line %d is longer than %d bytes; showed its start. Use exec (e.g. cut -c or head -c) to see all of it", offset, readMaxBytes)
		if offset < total {
			note += fmt.Sprintf(", or offset=%d to go on", offset+1)
		}
		note += "]"
	} else {
		b.Write(data[pos:cur])
		switch {
		case shown < total && !partial:
			note = fmt.Sprintf("[showing lines %d-%d of %d; use offset=%d to read more]", offset, shown, total, shown+1)
		case shown < total:
			note = fmt.Sprintf("[showing lines %d-%d of the first %d; the file is %d bytes and read sees its first %d; use offset=%d to read more]",
				offset, shown, total, size, len(data), shown+1)
		case partial:
			note = fmt.Sprintf("[file truncated: read sees the first %d of %d bytes (lines 1-%d); use exec (e.g. tail -n +%d) to see the rest]",
				len(data), size, total, total+1)
		}
	}
	if note != "" {
		if s := b.String(); len(s) > 0 && s[len(s)-1] != '\n' {
			b.WriteByte('\n')
		}
		b.WriteString("\n" + note)
	}
	return b.String(), true
}
