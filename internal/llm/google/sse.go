package google

import (
	"bufio"
	"bytes"
	"io"
	"sync"

	"github.com/beige-dev/beige/internal/llm"
)

// The SDK reads a stream in a dialect narrower than server-sent events:
// each event must be exactly one "data:" line. A comment (": keep-alive",
// which proxies send), an "event:" or "id:" line, or data split over
// several lines makes it fail with "invalid stream chunk". sseReader
// rewrites a text/event-stream body into that dialect, event by event:
// comments and other fields dropped, data lines joined, CRLF or CR line
// ends accepted. A bare JSON line (an error body sent as a stream) is kept
// as data. It also looks at every event's data for a provider error
// object in any documented shape (llm.ErrorObject), since the SDK only
// knows Google's.
type sseReader struct {
	src    *bufio.Reader
	closer io.Closer
	state  *reqState

	out     bytes.Buffer
	data    bytes.Buffer
	hasData bool
	err     error
}

func newSSEReader(body io.ReadCloser, state *reqState) *sseReader {
	return &sseReader{src: bufio.NewReader(body), closer: body, state: state}
}

func (r *sseReader) Close() error { return r.closer.Close() }

func (r *sseReader) Read(p []byte) (int, error) {
	for r.out.Len() == 0 && r.err == nil {
		r.fill()
	}
	if r.out.Len() > 0 {
		return r.out.Read(p)
	}
	return 0, r.err
}

// fill reads one line and, at the end of an event, writes it out. A CR
// left inside the line after its CRLF or LF is cut is a line end too.
func (r *sseReader) fill() {
	line, err := r.src.ReadBytes('\n')
	if len(line) > 0 {
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		for _, l := range bytes.Split(line, []byte("\r")) {
			r.line(l)
		}
	}
	if err != nil {
		r.dispatch()
		r.err = err
	}
}

func (r *sseReader) line(line []byte) {
	switch {
	case len(line) == 0:
		r.dispatch()
	case line[0] == ':': // a comment
	default:
		field, value, found := bytes.Cut(line, []byte(":"))
		if !found || string(field) != "data" {
			if line[0] == '{' || line[0] == '[' { // a JSON line without a field
				value = line
			} else {
				return // event:, id:, retry: or unknown
			}
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if len(value) == 0 {
			return // an empty data line would put a blank line inside the event
		}
		if r.hasData {
			r.data.WriteByte('\n')
		}
		r.data.Write(value)
		r.hasData = true
	}
}

func (r *sseReader) dispatch() {
	if !r.hasData {
		return
	}
	data := r.data.Bytes()
	if ae := llm.ErrorObject("", "", data); ae != nil {
		r.state.setStreamError(ae)
	}
	r.out.WriteString("data: ")
	r.out.Write(data)
	r.out.WriteString("\n\n")
	r.data.Reset()
	r.hasData = false
}

// reqState is what the transport learns about one request.
type reqState struct {
	capture llm.ResponseCapture
	mu      sync.Mutex
	stream  *llm.APIError // the first error object in the stream
}

func (s *reqState) setStreamError(ae *llm.APIError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream == nil {
		s.stream = ae
	}
}

func (s *reqState) streamError(provider, model string) *llm.APIError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream == nil {
		return nil
	}
	ae := *s.stream
	ae.Provider, ae.Model = provider, model
	return &ae
}
