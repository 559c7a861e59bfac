package nodehost

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxFrame bounds one frame from the plugin host. A tool's output travels
// in one frame; a longer line is a protocol violation and ends the host.
const MaxFrame = 8 << 20

// maxLogLine bounds a log line of a plugin (log frames, stdout, stderr).
const maxLogLine = 4096

// frame is one line of the protocol, either way. T is "req", "res" or
// "log" (host -> gateway only).
type frame struct {
	T      string          `json:"t"`
	ID     uint64          `json:"id,omitempty"`
	Op     string          `json:"op,omitempty"`
	Sync   bool            `json:"sync,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *string         `json:"error,omitempty"`
	Code   string          `json:"code,omitempty"`
	Level  string          `json:"level,omitempty"`
	Msg    string          `json:"msg,omitempty"`
}

var errFrameTooLong = fmt.Errorf("frame longer than %d bytes", MaxFrame)

// readLine reads one newline-terminated line of at most max bytes (the
// newline not counted), without buffering more than max.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		if len(line)+len(part) > max+1 {
			return nil, errFrameTooLong
		}
		line = append(line, part...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

// parseFrame decodes one frame from the plugin host strictly: one JSON
// object with known fields of the right types, nothing after it, and the
// fields its kind needs.
func parseFrame(line []byte) (*frame, error) {
	if len(line) > MaxFrame {
		return nil, errFrameTooLong
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var f frame
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("bad frame: %w", err)
	}
	if dec.More() {
		return nil, errors.New("bad frame: data after the object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("bad frame: data after the object")
	}
	switch f.T {
	case "req":
		if f.ID == 0 || f.Op == "" {
			return nil, errors.New("bad frame: a request needs an id and an op")
		}
	case "res":
		if f.ID == 0 {
			return nil, errors.New("bad frame: an answer needs an id")
		}
	case "log":
	default:
		return nil, fmt.Errorf("bad frame: unknown kind %q", f.T)
	}
	return &f, nil
}
