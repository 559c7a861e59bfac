package helper

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/beige-dev/beige/internal/proto"
)

// FuzzHelperFrame feeds arbitrary bytes to the frame decoders: they must
// never panic, must not read past a frame they reject, and a frame they
// accept must encode back to a frame that decodes to the same request.
func FuzzHelperFrame(f *testing.F) {
	for _, req := range []*proto.HelperRequest{
		{ID: 1, Op: proto.HelperOpPing},
		{ID: 2, Op: proto.HelperOpExec, Command: "echo hi", Env: map[string]string{"A": "b"}, TimeoutMs: 1000, Body: []byte("stdin")},
		{ID: 3, Op: proto.HelperOpWrite, Path: "/workspace/x", Body: []byte{0, 1, 2}},
	} {
		var buf bytes.Buffer
		proto.WriteHelperRequest(&buf, req)
		f.Add(buf.Bytes())
	}
	f.Add([]byte{0, 0, 0, 2, 0, 0, 0, 0, '{', '}'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 4, 0x04, 0, 0, 0, 'n', 'u', 'l', 'l'})
	f.Add([]byte{0, 0, 0, 3, 0, 0, 0, 0, '{', '}', '{'})

	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for range 16 {
			req, err := proto.ReadHelperRequest(r)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, proto.ErrHelperFrame) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				break
			}
			var buf bytes.Buffer
			if err := proto.WriteHelperRequest(&buf, req); err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			again, err := proto.ReadHelperRequest(&buf)
			if err != nil {
				t.Fatalf("decode re-encoded: %v", err)
			}
			if len(req.Body) == 0 {
				req.Body = nil
			}
			if len(again.Body) == 0 {
				again.Body = nil
			}
			if !reflect.DeepEqual(req, again) {
				t.Fatalf("round trip changed the request:\n%+v\n%+v", req, again)
			}
		}
		// The response decoder shares the framing but not the header type.
		_, _ = proto.ReadHelperResponse(bytes.NewReader(data))
	})
}
