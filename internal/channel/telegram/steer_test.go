package telegram

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/channel/telegram/bottest"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/testutil"
)

// steerPC is a fakePC whose running prompts can be steered.
type steerPC struct {
	*fakePC
	smu    sync.Mutex
	steers []string // agent key: text
}

func (s *steerPC) Steer(_ context.Context, agent, key, text string, runningOnly bool) (bool, error) {
	s.mu.Lock()
	running := s.running[key] != nil
	s.mu.Unlock()
	if runningOnly && !running {
		return false, nil
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	s.steers = append(s.steers, agent+" "+key+": "+text)
	return true, nil
}

func (s *steerPC) steered() []string {
	s.smu.Lock()
	defer s.smu.Unlock()
	return slices.Clone(s.steers)
}

// startSteerable is start with a PluginContext that steers.
func startSteerable(t *testing.T, pc *steerPC) *harness {
	t.Helper()
	h := &harness{t: t, api: bottest.New(t), pc: pc.fakePC, logs: &testutil.SyncBuffer{}, dir: t.TempDir()}
	p, err := newPluginIn(t, h.api, h.dir, nil, h.logs)
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	if err := p.Start(ctx, pc); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.stop()
		checkNoLeaks(t)
	})
	return h
}

// TestMessageSteersRunningPrompt: a message sent while the chat's prompt
// runs steers that prompt (as the original's telegram plugin does) instead
// of waiting for its own: no prompt of its own, a receipt reaction, and
// the running prompt's answer. Once nothing runs, a message is a prompt
// again.
func TestMessageSteersRunningPrompt(t *testing.T) {
	pc := &steerPC{fakePC: newFakePC()}
	started, release := make(chan string, 4), make(chan struct{})
	pc.answer = func(ctx context.Context, req plugin.PromptRequest) (*plugin.PromptResult, error) {
		started <- req.Message
		if req.Message == "first" {
			<-release
		}
		return &plugin.PromptResult{Text: "echo: " + req.Message}, nil
	}
	h := startSteerable(t, pc)
	h.api.Message(userID, userID, 0, "first")
	if got := <-started; got != "first" {
		t.Fatalf("started %q", got)
	}
	second := h.api.Message(userID, userID, 0, "actually, do this")
	h.api.WaitFor("the receipt of the steering message", func(c []bottest.Call) bool {
		for _, c := range c {
			if c.Method == "setMessageReaction" && c.Params["message_id"] == strconv.Itoa(second) && strings.Contains(c.Params["reaction"], "👀") {
				return true
			}
		}
		return false
	})
	if got := pc.steered(); !slices.Equal(got, []string{"main telegram:42: actually, do this"}) {
		t.Errorf("steered %q", got)
	}
	close(release)
	h.api.WaitFor("the answer", func(c []bottest.Call) bool { return hasText(textsTo(c, userID), "echo: first") })
	h.api.Message(userID, userID, 0, "later")
	select {
	case got := <-started:
		if got != "later" {
			t.Errorf("started %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a message after the prompt ended did not start its own")
	}
	h.api.WaitFor("the later answer", func(c []bottest.Call) bool { return hasText(textsTo(c, userID), "echo: later") })
	if got := h.pc.promptKeys(); len(got) != 2 {
		t.Errorf("%d prompts, want 2 (the steering message has none)", len(got))
	}
	if got := pc.steered(); len(got) != 1 {
		t.Errorf("steered %q", got)
	}
}
