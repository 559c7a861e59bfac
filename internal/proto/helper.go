package proto

// The helper protocol is spoken between the gateway and the long-lived
// in-sandbox helper (`beige-sandbox serve`) over the helper's stdin (requests)
// and stdout (responses). Many calls share the stream: each request carries an
// ID that its response repeats, and responses come back in any order.
//
// A frame is
//
//	uint32 big-endian  length H of the JSON header (1 ≤ H ≤ MaxHelperHeader)
//	uint32 big-endian  length B of the body        (0 ≤ B ≤ MaxHelperBody)
//	H bytes            JSON header (HelperRequest or HelperResponse)
//	B bytes            raw body (stdin, file content or command output)
//
// Bulk bytes travel raw in the body so they are not base64-inflated.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Helper protocol limits.
const (
	MaxHelperHeader = 1 << 20  // bytes of JSON header in one frame
	MaxHelperBody   = 64 << 20 // bytes of body in one frame
)

// HelperVersion is reported by ping; bump it on incompatible changes.
// Version 2: the helper runs agent code as another user (serve --user) and
// has the kill-helper op.
const HelperVersion = "2"

// Helper operations (HelperRequest.Op).
const (
	HelperOpPing   = "ping"   // answered with Version
	HelperOpExec   = "exec"   // sh -c Command; Body is stdin; response Body is output
	HelperOpRead   = "read"   // read at most Max bytes of Path; response Body is data, Size the true size
	HelperOpWrite  = "write"  // write Body to Path, creating parents
	HelperOpCancel = "cancel" // stop the call with the same ID (kills its processes); no response of its own
	// HelperOpKillHelper kills the helper Pid (one that stopped answering)
	// and every process it started.
	HelperOpKillHelper = "killHelper"
)

// Error codes of a HelperResponse, for errors the gateway maps to sentinels.
const (
	HelperErrNotExist   = "not_exist"
	HelperErrIsDir      = "is_dir"
	HelperErrPermission = "permission"
	HelperErrInvalid    = "invalid"
	HelperErrCancelled  = "cancelled"
	HelperErrInternal   = "internal"
)

// HelperRequest is a gateway → helper frame header.
type HelperRequest struct {
	ID uint64 `json:"id"`
	Op string `json:"op"`

	// exec
	Command     string            `json:"command,omitempty"`     // run as sh -c Command
	Env         map[string]string `json:"env,omitempty"`         // merged over the helper's own env
	Dir         string            `json:"dir,omitempty"`         // working folder; default /workspace
	TimeoutMs   int64             `json:"timeoutMs,omitempty"`   // 0 = none
	OutputLimit int               `json:"outputLimit,omitempty"` // bytes of output kept; 0 = helper default

	// read, write
	Path string `json:"path,omitempty"`
	Max  int64  `json:"max,omitempty"` // read: at most this many bytes
	// killHelper
	Pid int `json:"pid,omitempty"`

	Body []byte `json:"-"` // exec: stdin; write: file content
}

// HelperResponse is a helper → gateway frame header.
type HelperResponse struct {
	ID uint64 `json:"id"`

	Error string `json:"error,omitempty"` // empty on success
	Code  string `json:"code,omitempty"`  // HelperErr* when Error is set

	// exec
	ExitCode    int   `json:"exitCode,omitempty"`
	TimedOut    bool  `json:"timedOut,omitempty"`
	OutputBytes int64 `json:"outputBytes,omitempty"` // true output size; Body holds at most the limit
	DurationUs  int64 `json:"durationUs,omitempty"`

	// read
	Size int64 `json:"size,omitempty"`

	// ping
	Version string `json:"version,omitempty"`
	Pid     int    `json:"pid,omitempty"` // the helper's pid in the sandbox

	Body []byte `json:"-"` // exec: output; read: data
}

// ErrHelperFrame reports a frame that breaks the framing rules; the stream
// cannot be trusted after it.
var ErrHelperFrame = errors.New("proto: bad helper frame")

// AppendHelperFrame appends the encoding of one frame to dst.
func AppendHelperFrame(dst []byte, header any, body []byte) ([]byte, error) {
	if len(body) > MaxHelperBody {
		return dst, fmt.Errorf("%w: body of %d bytes exceeds %d", ErrHelperFrame, len(body), MaxHelperBody)
	}
	h, err := json.Marshal(header)
	if err != nil {
		return dst, fmt.Errorf("encode helper frame: %w", err)
	}
	if len(h) > MaxHelperHeader {
		return dst, fmt.Errorf("%w: header of %d bytes exceeds %d", ErrHelperFrame, len(h), MaxHelperHeader)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(h)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	dst = append(dst, h...)
	return append(dst, body...), nil
}

// WriteHelperRequest writes req as one frame with a single Write call.
func WriteHelperRequest(w io.Writer, req *HelperRequest) error {
	return writeFrame(w, req, req.Body)
}

// WriteHelperResponse writes resp as one frame with a single Write call.
func WriteHelperResponse(w io.Writer, resp *HelperResponse) error {
	return writeFrame(w, resp, resp.Body)
}

func writeFrame(w io.Writer, header any, body []byte) error {
	buf, err := AppendHelperFrame(make([]byte, 0, 256+len(body)), header, body)
	if err != nil {
		return err
	}
	_, err = w.Write(buf)
	return err
}

// ReadHelperRequest reads one request frame. It returns io.EOF when r ends
// cleanly between frames, and an error wrapping ErrHelperFrame on garbage.
func ReadHelperRequest(r io.Reader) (*HelperRequest, error) {
	var req HelperRequest
	body, err := readFrame(r, &req)
	if err != nil {
		return nil, err
	}
	req.Body = body
	return &req, nil
}

// ReadHelperResponse reads one response frame; errors as ReadHelperRequest.
func ReadHelperResponse(r io.Reader) (*HelperResponse, error) {
	var resp HelperResponse
	body, err := readFrame(r, &resp)
	if err != nil {
		return nil, err
	}
	resp.Body = body
	return &resp, nil
}

func readFrame(r io.Reader, header any) ([]byte, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%w: truncated prefix", ErrHelperFrame)
		}
		return nil, err // io.EOF between frames, or a read error
	}
	hlen := binary.BigEndian.Uint32(pre[0:4])
	blen := binary.BigEndian.Uint32(pre[4:8])
	if hlen == 0 || hlen > MaxHelperHeader {
		return nil, fmt.Errorf("%w: header length %d", ErrHelperFrame, hlen)
	}
	if blen > MaxHelperBody {
		return nil, fmt.Errorf("%w: body length %d", ErrHelperFrame, blen)
	}
	h, err := readN(r, int64(hlen))
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(h))
	if err := dec.Decode(header); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrHelperFrame, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after header", ErrHelperFrame)
	}
	if blen == 0 {
		return nil, nil
	}
	return readN(r, int64(blen))
}

// readN reads exactly n bytes, growing the buffer as data arrives so that a
// lying length prefix cannot make us allocate more than the sender sent.
func readN(r io.Reader, n int64) ([]byte, error) {
	var buf bytes.Buffer
	if n <= 64<<10 {
		buf.Grow(int(n))
	}
	got, err := buf.ReadFrom(io.LimitReader(r, n))
	if err != nil {
		return nil, err
	}
	if got < n {
		return nil, fmt.Errorf("%w: truncated (%d of %d bytes)", ErrHelperFrame, got, n)
	}
	return buf.Bytes(), nil
}
