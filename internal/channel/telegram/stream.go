package telegram

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/beige-dev/beige/internal/llm"
)

// editEvery is the least time between two updates of one streamed message.
const editEvery = time.Second

// toolWait bounds how long a tool waits for its verbose line to be sent.
const toolWait = 30 * time.Second

// reply sends the answer to one prompt. The prompt's callbacks (OnEvent,
// OnToolStart) only queue items, so they stay quick; one goroutine sends
// everything, in order: streamed text (a message edited at most once per
// editEvery, continued in a new message past MaxMessageLen), the verbose
// tool lines, and the final answer.
type reply struct {
	r         *run
	t         target
	streaming bool

	mu      sync.Mutex
	pending []item
	wake    chan struct{} // capacity 1
	exited  chan struct{}

	// Owned by the loop; read by finish once the loop has exited.
	seg    segment
	closed bool  // a tool line was sent after seg: new text starts a new segment
	lost   error // a part of the answer that could not be delivered
}

// segment is the text of one assistant message as it streams: pieces of
// text[:base] are final, text[base:] is shown in message msgID.
type segment struct {
	text     string
	base     int
	msgID    int
	shown    string
	lastSent time.Time // of msgID's last send or edit
	done     bool      // the model finished this message
	failed   bool      // the attempt failed (a fallback model takes over)
}

type itemKind int

const (
	itemText   itemKind = iota // text: more of the answer
	itemStart                  // a model call starts a message
	itemDone                   // the message is complete
	itemFailed                 // the attempt failed or the model changed
	itemTool                   // text: a verbose tool line; ack when sent
	itemFinish                 // text: the final answer (replace: use it)
)

type item struct {
	kind    itemKind
	text    string
	replace bool
	ack     chan struct{}
}

func newReply(r *run, t target, streaming bool) *reply {
	p := &reply{r: r, t: t, streaming: streaming, wake: make(chan struct{}, 1), exited: make(chan struct{})}
	r.wg.Add(1)
	go p.loop()
	return p
}

func (p *reply) push(it item) {
	p.mu.Lock()
	if it.kind == itemText && len(p.pending) > 0 && p.pending[len(p.pending)-1].kind == itemText {
		p.pending[len(p.pending)-1].text += it.text
	} else {
		p.pending = append(p.pending, it)
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *reply) take() []item {
	p.mu.Lock()
	defer p.mu.Unlock()
	items := p.pending
	p.pending = nil
	return items
}

// onEvent is the prompt's OnEvent.
func (p *reply) onEvent(ev llm.Event) {
	if !p.streaming {
		return
	}
	switch ev.Type {
	case llm.EventTextDelta:
		if ev.Delta != "" {
			p.push(item{kind: itemText, text: ev.Delta})
		}
	case llm.EventStart:
		p.push(item{kind: itemStart})
	case llm.EventDone:
		p.push(item{kind: itemDone})
	case llm.EventError, llm.EventModelFallback:
		p.push(item{kind: itemFailed})
	}
}

// onToolStart is the prompt's OnToolStart in verbose mode: the line
// "🔧 <summary>" is sent before the tool runs.
func (p *reply) onToolStart(summary string) {
	ack := make(chan struct{})
	p.push(item{kind: itemTool, text: "🔧 " + summary, ack: ack})
	t := time.NewTimer(toolWait)
	defer t.Stop()
	select {
	case <-ack:
	case <-p.exited:
	case <-t.C:
	}
}

// finish sends the rest of the answer and waits until everything is sent.
// With replace, text is the final answer: it replaces what streamed of the
// last message (or is sent whole when not streaming); without, what
// streamed stays as it is (the prompt failed or was stopped). It returns
// the error of a part of the answer that could not be delivered, even
// after retrying, and errUnfinished if the run ended first.
func (p *reply) finish(text string, replace bool) error {
	p.push(item{kind: itemFinish, text: text, replace: replace})
	<-p.exited
	if p.lost == nil && p.r.ctx.Err() != nil {
		return errUnfinished
	}
	return p.lost
}

// errUnfinished is finish's error when the channel stopped before the
// answer was sent.
var errUnfinished = errors.New("telegram: the channel stopped before the answer was sent")

// lose records a part of the answer that could not be delivered.
func (p *reply) lose(err error) {
	if err != nil && p.lost == nil {
		p.lost = err
	}
}

func (p *reply) loop() {
	defer p.r.wg.Done()
	defer close(p.exited)
	ctx := p.r.ctx
	for {
		items := p.take()
		if len(items) == 0 {
			if p.streaming && p.dirty() {
				if wait := p.untilUpdate(); wait > 0 {
					if !sleep(ctx, wait) {
						return
					}
					continue
				}
				p.flush()
				continue
			}
			select {
			case <-p.wake:
			case <-ctx.Done():
				return
			}
			continue
		}
		for _, it := range items {
			if ctx.Err() != nil {
				return
			}
			if p.apply(it) {
				return
			}
		}
	}
}

// apply handles one item; it reports whether the reply is finished.
func (p *reply) apply(it item) bool {
	seg := &p.seg
	switch it.kind {
	case itemText:
		if p.closed {
			p.newSegment()
		}
		seg.text += it.text
	case itemStart:
		if seg.failed || !seg.done {
			// The previous attempt did not finish: its text is replaced
			// by the next one, in the same message.
			seg.text = seg.text[:seg.base]
		} else if p.visible() {
			p.flush()
			p.closed = true
		}
		seg.done, seg.failed = false, false
	case itemDone:
		seg.done = true
	case itemFailed:
		seg.failed = true
	case itemTool:
		if p.streaming && p.visible() && !p.closed {
			p.flush()
			p.closed = true
		}
		if _, err := p.r.sendPlain(p.r.ctx, p.t, it.text); err != nil {
			p.r.logSendError(p.t, err)
		}
		close(it.ack)
	case itemFinish:
		p.finishWith(it.text, it.replace)
		return true
	}
	return false
}

func (p *reply) finishWith(text string, replace bool) {
	if !p.streaming {
		if replace && strings.TrimSpace(text) != "" {
			if _, err := p.r.sendText(p.r.ctx, p.t, text); err != nil {
				p.r.logSendError(p.t, err)
				p.lose(err)
			}
		}
		return
	}
	seg := &p.seg
	if replace && strings.TrimSpace(text) != "" {
		switch {
		case p.closed || !p.visible():
			p.newSegment()
			seg.text = text
		case strings.HasPrefix(text, seg.text[:seg.base]):
			seg.text = text
		default:
			// The final answer differs from what was already cut into
			// messages (a hook changed it): send it whole.
			p.flush()
			p.newSegment()
			seg.text = text
		}
	}
	p.lose(p.flush())
}

// newSegment starts a new message for the text that follows.
func (p *reply) newSegment() {
	p.seg = segment{}
	p.closed = false
}

// visible reports whether the segment has text to show.
func (p *reply) visible() bool { return strings.TrimSpace(p.seg.text) != "" }

// dirty reports whether the segment's message lags behind its text.
func (p *reply) dirty() bool {
	view := p.seg.text[p.seg.base:]
	return view != p.seg.shown && strings.TrimSpace(view) != ""
}

// untilUpdate is how long the segment's message must wait before it may
// be updated again.
func (p *reply) untilUpdate() time.Duration {
	if p.seg.lastSent.IsZero() {
		return 0
	}
	return time.Until(p.seg.lastSent.Add(editEvery))
}

// flush brings the messages up to date with the segment's text: pieces
// past MaxMessageLen are made final and the rest goes to a new message.
// Each edit waits for editEvery after the message's last update. A final
// piece that could not be delivered is recorded as lost; the error of the
// last message's update is returned (it is tried again by the next flush).
func (p *reply) flush() error {
	seg := &p.seg
	for p.r.ctx.Err() == nil {
		view := seg.text[seg.base:]
		if utf16Len(view) > MaxMessageLen {
			piece := splitText(view, MaxMessageLen)[0]
			if seg.shown != piece {
				p.lose(p.show(piece))
			}
			seg.base += len(piece)
			seg.msgID, seg.shown, seg.lastSent = 0, "", time.Time{}
			continue
		}
		if view != seg.shown && pieceText(view) != "" {
			return p.show(view)
		}
		return nil
	}
	return nil
}

// show puts text (a piece of the segment starting at seg.base) in the
// segment's message: sent if there is none yet, else edited. When that
// fails (after retrying), the message is left as it was, so that the next
// flush tries again.
func (p *reply) show(text string) error {
	seg := &p.seg
	r := p.r
	var in *fence
	if f, open := fenceAfter(seg.text[:seg.base]); open {
		in = &f
	}
	if seg.msgID != 0 {
		if wait := p.untilUpdate(); wait > 0 && !sleep(r.ctx, wait) {
			return errUnfinished
		}
		err := r.editPiece(r.ctx, p.t, seg.msgID, text, in)
		switch {
		case err == nil:
			seg.shown, seg.lastSent = text, time.Now()
			return nil
		case !isGone(err):
			r.logSendError(p.t, err)
			seg.lastSent = time.Now()
			return err
		}
		seg.msgID = 0 // deleted by the user: sent anew
	}
	id, err := r.sendPiece(r.ctx, p.t, text, in)
	seg.lastSent = time.Now()
	if err != nil {
		r.logSendError(p.t, err)
		return err
	}
	seg.msgID, seg.shown = id, text
	return nil
}

// sleep waits d unless ctx ends first; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
