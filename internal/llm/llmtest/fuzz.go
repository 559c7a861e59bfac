package llmtest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm"
)

// The shared parts of the providers' fuzz tests.

// BodyTransport answers every request with one response, without a
// network: status, content type and body as the fuzzer chose them.
type BodyTransport struct {
	Status int
	CType  string
	Body   []byte
}

func (t BodyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{
		StatusCode: t.Status, Status: http.StatusText(t.Status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {t.CType}},
		Body:   io.NopCloser(bytes.NewReader(t.Body)), ContentLength: int64(len(t.Body)), Request: req,
	}, nil
}

// wireStreams is the conformance suite's copy of the recorded provider
// streams (see SOURCES.md there), as seen from a provider's package folder
// (internal/llm/<provider>), where its fuzz tests run.
var wireStreams = filepath.Join("..", "providers", "testdata", "wire-streams")

// AddStreams seeds f, as (mode 0, body) pairs, with the real provider
// streams whose names start with prefix. It is for the fuzz tests of the
// provider packages beside internal/llm/providers.
func AddStreams(f *testing.F, prefix string) {
	f.Helper()
	files, _ := filepath.Glob(filepath.Join(wireStreams, prefix+"*.sse"))
	if len(files) == 0 {
		f.Fatalf("no seed streams %s/%s*.sse", wireStreams, prefix)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(0), data)
	}
}

// CheckStream checks the property every provider stream must have, whatever
// the server sent: Stream returns a message (and no panic); the events
// start with start and end with done (no error) or error (an error); they
// rebuild the returned message; their number is bounded by the input; and
// an error's text is bounded too.
func CheckStream(t *testing.T, p llm.Provider, req llm.Request, body []byte) {
	t.Helper()
	var events []llm.Event
	var acc llm.Accumulator
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg, err := p.Stream(ctx, req, func(e llm.Event) {
		events = append(events, e)
		acc.Apply(e)
	})
	if ctx.Err() != nil {
		buf := make([]byte, 1<<20)
		t.Fatalf("Stream hung on a finished body:\n%s", buf[:runtime.Stack(buf, true)])
	}
	if msg == nil {
		t.Fatalf("Stream returned no message (err %v)", err)
	}
	if len(events) < 2 || events[0].Type != llm.EventStart {
		t.Fatalf("events %d, first %v: want start ... done|error", len(events), events)
	}
	last := events[len(events)-1].Type
	if (err == nil) != (last == llm.EventDone) || (err != nil && last != llm.EventError) {
		t.Fatalf("err %v but the last event is %q", err, last)
	}
	if got := acc.Message(); !reflect.DeepEqual(got.Content, msg.Content) {
		t.Fatalf("the events rebuild %+v\nthe message is %+v", got.Content, msg.Content)
	}
	if len(events) > len(body)+8 {
		t.Fatalf("%d events from %d bytes", len(events), len(body))
	}
	if err != nil && len(err.Error()) > 2*len(body)+8<<10 {
		t.Fatalf("an error of %d bytes from %d bytes", len(err.Error()), len(body))
	}
	if err == nil && msg.StopReason == llm.StopReasonError {
		t.Fatalf("no error, stop reason error")
	}
}
