package toolbridge

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/beige-dev/beige/internal/proto"
)

// FuzzFrames feeds arbitrary bytes through the server's frame reader and
// request decoder: no panic, frames within the limit, and every accepted
// request valid.
func FuzzFrames(f *testing.F) {
	f.Add([]byte(`{"type":"tool_request","tool":"git","args":["status"]}` + "\n"))
	f.Add([]byte("{}\n{\"type\":\"tool_request\"}\n"))
	f.Add([]byte(`{"type":"tool_request","tool":"git","args":[null]}`))
	f.Add(bytes.Repeat([]byte("a"), 300))
	f.Add([]byte(`{"type":"tool_request","tool":"git","callToken":"0123456789abcdef0123456789abcdef","sessionContext":{"sessionKey":"telegram:1:2"}}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		const max = 128
		br := bufio.NewReaderSize(bytes.NewReader(data), 16)
		for {
			frame, err := readFrame(br, max)
			if errors.Is(err, errFrameTooLarge) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return
			}
			if err != nil {
				t.Fatalf("readFrame: %v", err)
			}
			if len(frame) > max || bytes.IndexByte(frame, '\n') >= 0 {
				t.Fatalf("bad frame %q", frame)
			}
			req, err := proto.DecodeToolRequest(frame)
			if err == nil && (!proto.ValidToolName(req.Tool) || req.Type != proto.ToolRequestType) {
				t.Fatalf("accepted %+v", req)
			}
		}
	})
}
