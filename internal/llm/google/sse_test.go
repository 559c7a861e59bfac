package google

import (
	"bytes"
	"io"
	"testing"
)

// FuzzSSEReader: whatever a server sends, what the SDK reads is its narrow
// dialect: events of one "data: " line, separated by blank lines.
func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{
		"data: {}\n\n", ": c\n\nevent: e\ndata: {\"a\":1}\n\n", "data: a\r\ndata: b\r\n\r\n", "data: x\r\r",
		"{\"error\":{\"message\":\"m\"}}\n", "data:\ndata: b\n\n", "id: 1\nretry: 5\n\n", "data: {\"object\":\"error\",\"message\":\"m\",\"code\":400}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		st := new(reqState)
		out, err := io.ReadAll(newSSEReader(io.NopCloser(bytes.NewReader(in)), st))
		if err != nil {
			t.Fatal(err)
		}
		if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n\n")) {
			t.Fatalf("%q → %q: not ended by a blank line", in, out)
		}
		for _, ev := range bytes.Split(bytes.TrimSuffix(out, []byte("\n\n")), []byte("\n\n")) {
			if len(out) == 0 {
				break
			}
			if !bytes.HasPrefix(ev, []byte("data: ")) || bytes.ContainsRune(ev, '\r') {
				t.Fatalf("%q → event %q", in, ev)
			}
		}
		if ae := st.streamError("p", "m"); ae != nil && ae.Message == "" && ae.Type == "" {
			t.Fatalf("%q: empty error", in)
		}
	})
}
