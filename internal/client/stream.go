package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/proto/llmproto"
)

// maxEventLine bounds one NDJSON line of the stream (a done event carries
// the whole reply).
const maxEventLine = 64 << 20

// BlockedError says a prePrompt or postResponse hook of the gateway
// blocked the message (the stream's blocked event).
type BlockedError struct{ Reason string }

func (e *BlockedError) Error() string {
	if e.Reason == "" {
		return "blocked by the gateway's hooks"
	}
	return "blocked by the gateway's hooks: " + e.Reason
}

// ModelError is a model call that failed at the gateway (the stream's
// error event): every model the gateway tried failed, or the call was
// aborted there.
type ModelError struct {
	Reason  string // "error" or "aborted"
	Message string // the failed message's errorMessage
}

func (e *ModelError) Error() string {
	if e.Message == "" {
		return "model call failed (" + e.Reason + ")"
	}
	return e.Message
}

// ErrStreamCut says the connection ended before the reply did.
var ErrStreamCut = errors.New("client: the gateway's stream ended before the reply was complete")

// ChatStream proxies a model call through POST /api/chat/stream. It calls
// onEvent (if not nil) with each event as it arrives — the model's events
// and the gateway's blocked and model_fallback — and returns the final
// message of the done event.
//
// On failure the message returned is the failed one when there is one
// (that of an error event, or the partial reply with stopReason aborted or
// error when the stream broke off), and the error is a *ModelError (error
// event), a *BlockedError (blocked event), an *Error (the gateway refused
// the request), an *UnreachableError, or one wrapping ctx.Err() when ctx
// ended, or ErrStreamCut when the connection dropped.
func (c *Client) ChatStream(ctx context.Context, req llmproto.ChatStreamRequest, onEvent func(llm.Event)) (*llm.AssistantMessage, error) {
	const path = "/api/chat/stream"
	resp, err := c.do(ctx, http.MethodPost, path, req, "application/x-ndjson")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()

	var acc llm.Accumulator
	started := false
	partial := func(reason llm.StopReason, msg string) *llm.AssistantMessage {
		if !started {
			return nil
		}
		m := acc.Message()
		if m.Provider == "" {
			m.Provider, m.Model = req.Provider, req.ModelID
		}
		m.StopReason, m.ErrorMessage = reason, msg
		if m.Timestamp == 0 {
			m.Timestamp = llm.Now()
		}
		return m
	}

	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := readLine(rd)
		if err != nil {
			if ctx.Err() != nil {
				return partial(llm.StopReasonAborted, "Request was aborted"), fmt.Errorf("POST %s: %w", path, ctx.Err())
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = ErrStreamCut
			} else {
				err = fmt.Errorf("%w: %w", ErrStreamCut, err)
			}
			return partial(llm.StopReasonError, err.Error()), err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ev llm.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			err = fmt.Errorf("POST %s: bad event line: %w", path, err)
			return partial(llm.StopReasonError, err.Error()), err
		}
		started = true
		acc.Apply(ev)
		if onEvent != nil {
			onEvent(ev)
		}
		switch ev.Type {
		case llm.EventDone:
			if ev.Message == nil {
				err := fmt.Errorf("POST %s: done event without a message", path)
				return partial(llm.StopReasonError, err.Error()), err
			}
			return ev.Message, nil
		case llm.EventError:
			me := &ModelError{Reason: ev.Reason}
			msg := ev.Error
			if msg != nil {
				me.Message = msg.ErrorMessage
			} else {
				msg = partial(llm.StopReasonError, "")
			}
			if me.Reason == "" {
				me.Reason = string(msg.StopReason)
			}
			if msg.StopReason != llm.StopReasonAborted {
				msg.StopReason = llm.StopReasonError
			}
			if msg.ErrorMessage == "" {
				msg.ErrorMessage = me.Error()
			}
			if ctx.Err() != nil {
				return msg, fmt.Errorf("%w: %w", me, ctx.Err())
			}
			return msg, me
		case llm.EventBlocked:
			return nil, &BlockedError{Reason: ev.Reason}
		}
	}
}

// readLine reads one line (without its newline); a last line without a
// newline is returned with io.ErrUnexpectedEOF, since a stream ends with
// a done or error event and its newline.
func readLine(rd *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := rd.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxEventLine {
			return nil, fmt.Errorf("event line longer than %d MB", maxEventLine>>20)
		}
		switch {
		case err == nil:
			return buf[:len(buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(buf) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}
