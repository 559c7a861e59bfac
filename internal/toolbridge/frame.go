package toolbridge

import (
	"bufio"
	"errors"
	"io"
)

var errFrameTooLarge = errors.New("toolbridge: frame too large")

// readFrame reads one newline-terminated frame of at most max bytes (the
// newline not counted) and returns it without the newline. A longer frame
// gives errFrameTooLarge after reading at most max+1 bytes of it plus what
// the reader had buffered. A frame cut short by EOF is an error
// (io.ErrUnexpectedEOF); EOF before any byte is io.EOF.
func readFrame(br *bufio.Reader, max int) ([]byte, error) {
	var frame []byte
	for {
		chunk, err := br.ReadSlice('\n')
		n := len(chunk)
		if err == nil {
			n-- // the newline
		}
		if len(frame)+n > max {
			return nil, errFrameTooLarge
		}
		frame = append(frame, chunk[:n]...)
		switch {
		case err == nil:
			return frame, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(frame) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}
