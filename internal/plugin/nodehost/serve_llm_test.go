package nodehost

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/proto"
)

// askerPlugin calls ctx.llmPrompt with the arguments its tool is given as
// JSON ([provider, modelId, messages, opts]), or with an image built in
// JavaScript ("image6": one of 5 MiB and a byte, "big": 7 MiB, over a
// frame when encoded).
const askerPlugin = `
export function createPlugin(config, ctx) {
  return { register(r) {
    r.tool({ name: "asker", description: "", handler: async (args) => {
      let call;
      const img = (n) => ["pa", "m1", [{ role: "user", content: [{ type: "image", data: Buffer.alloc(n, 1).toString("base64"), mimeType: "image/png" }] }]];
      if (args[0] === "image6") call = img(5 * 1024 * 1024 + 1);
      else if (args[0] === "big") call = img(7 * 1024 * 1024);
      else if (args[0] === "exit") process.exit(3);
      else call = JSON.parse(args[0]);
      try {
        return { output: "ok: " + await ctx.llmPrompt(...call), exitCode: 0 };
      } catch (e) {
        return { output: "error: " + e.message, exitCode: 1 };
      }
    }});
  } };
}
`

// llmContext answers LLMPrompt with a summary of what it was asked; the
// provider "hang" waits until the call's context ends.
type llmContext struct {
	fakeContext
	mu        sync.Mutex
	reqs      []plugin.LLMPromptRequest
	started   chan struct{}
	cancelled chan struct{}
}

func (c *llmContext) LLMPrompt(ctx context.Context, req plugin.LLMPromptRequest) (*plugin.LLMPromptResult, error) {
	c.mu.Lock()
	c.reqs = append(c.reqs, req)
	c.mu.Unlock()
	switch req.Provider {
	case "hang":
		close(c.started)
		<-ctx.Done()
		close(c.cancelled)
		return nil, ctx.Err()
	case "nosuch":
		return nil, errors.New(`provider "nosuch" is not configured (not a key of llm.providers)`)
	}
	var parts []string
	for _, m := range req.Messages {
		for _, b := range m.User.Content {
			switch b.Type {
			case llm.ContentText:
				parts = append(parts, "text:"+b.Text)
			case llm.ContentImage:
				parts = append(parts, fmt.Sprintf("image:%s:%d", b.MimeType, len(b.Data)))
			}
		}
	}
	return &plugin.LLMPromptResult{Text: fmt.Sprintf("%s/%s [%s] sys=%q max=%d think=%q",
		req.Provider, req.Model, strings.Join(parts, " "), req.SystemPrompt, req.MaxTokens, req.ThinkingLevel)}, nil
}

// TestLLMPromptArguments: ctx.llmPrompt passes the original's LlmMessage
// shapes and LlmPromptOpts to the gateway (fields the original does not
// have are not passed on) and answers the model's text; what is not an
// LlmMessage, or is over the bounds, is refused with a clear error before
// it reaches the gateway, and the host keeps running; the gateway's errors
// reach the plugin.
func TestLLMPromptArguments(t *testing.T) {
	f := mustFixture(t, map[string][]string{"travel": {"asker"}}, tsPlugin{name: "asker", source: askerPlugin})
	pc := &llmContext{}
	if err := f.host.Start(context.Background(), pc); err != nil {
		t.Fatal(err)
	}
	many := "[" + strings.Repeat(`{"role":"user","content":"x"},`, 100) + `{"role":"user","content":"x"}]`
	for _, tc := range []struct{ name, args, want string }{
		{"text and opts", `["pa","m1",[{"role":"user","content":"hi"}],{"systemPrompt":"be brief","maxTokens":50,"thinkingLevel":"low","temperature":1}]`,
			`ok: pa/m1 [text:hi] sys="be brief" max=50 think="low"`},
		{"blocks", `["pa","m1",[{"role":"user","timestamp":5,"content":[{"type":"text","text":"look"},{"type":"image","data":"aGk=","mimeType":"image/jpeg"}]},{"role":"user","content":"and?"}]]`,
			`ok: pa/m1 [text:look image:image/jpeg:4 text:and?] sys="" max=0 think=""`},
		{"no messages", `["pa","m1",[]]`, "error: ctx.llmPrompt: bad arguments: no messages"},
		{"messages not an array", `["pa","m1","hi"]`, "error: ctx.llmPrompt: bad arguments"},
		{"assistant", `["pa","m1",[{"role":"assistant","content":"hi"}]]`, `error: ctx.llmPrompt: bad arguments: messages[0]: role must be "user"`},
		{"content object", `["pa","m1",[{"role":"user","content":{"text":"hi"}}]]`, "error: ctx.llmPrompt: bad arguments: messages[0]: content must be a string or an array"},
		{"audio block", `["pa","m1",[{"role":"user","content":[{"type":"audio","data":"aGk="}]}]]`, "error: ctx.llmPrompt: bad arguments: messages[0].content[0]: want"},
		{"image type", `["pa","m1",[{"role":"user","content":[{"type":"image","data":"aGk=","mimeType":"image/svg+xml"}]}]]`, "error: ctx.llmPrompt: bad arguments: messages[0].content[0]: mimeType must be one of"},
		{"image data", `["pa","m1",[{"role":"user","content":[{"type":"image","data":"not base64!","mimeType":"image/png"}]}]]`, "error: ctx.llmPrompt: bad arguments: messages[0].content[0]: data is not base64"},
		{"image over 5 MiB", `image6`, "error: ctx.llmPrompt: bad arguments: messages[0].content[0]: an image over 5 MiB"},
		{"over a frame", `big`, "error: ctx.llmPrompt: the messages are over 8 MiB in all"},
		{"too many", `["pa","m1",` + many + `]`, "error: ctx.llmPrompt: bad arguments: more than 100 messages"},
		{"maxTokens 0", `["pa","m1",[{"role":"user","content":"hi"}],{"maxTokens":0}]`, "error: ctx.llmPrompt: bad arguments: maxTokens must be a whole number from 1 to 128000"},
		{"maxTokens fraction", `["pa","m1",[{"role":"user","content":"hi"}],{"maxTokens":1.5}]`, "error: ctx.llmPrompt: bad arguments: maxTokens must be"},
		{"maxTokens huge", `["pa","m1",[{"role":"user","content":"hi"}],{"maxTokens":1e12}]`, "error: ctx.llmPrompt: bad arguments: maxTokens must be"},
		{"thinking", `["pa","m1",[{"role":"user","content":"hi"}],{"thinkingLevel":"xhigh"}]`, "error: ctx.llmPrompt: bad arguments: thinkingLevel must be off, minimal, low, medium or high"},
		{"no provider", `["","m1",[{"role":"user","content":"hi"}]]`, "error: ctx.llmPrompt: bad arguments: an empty name"},
		{"gateway error", `["nosuch","m1",[{"role":"user","content":"hi"}]]`, `error: ctx.llmPrompt: provider "nosuch" is not configured`},
	} {
		resp := f.call("travel", "asker", tc.args)
		if !strings.HasPrefix(resp.Output, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, resp.Output, tc.want)
		}
	}
	pc.mu.Lock()
	n := len(pc.reqs)
	plug := pc.reqs[0].Plugin
	pc.mu.Unlock()
	if n != 3 || plug != "asker" {
		t.Errorf("%d calls reached the gateway (want 3: two good ones and the unknown provider), plugin %q", n, plug)
	}
	if strings.Contains(f.log.String(), "plugin host restarted") || strings.Contains(f.log.String(), "protocol error") {
		t.Errorf("the host did not survive:\n%s", f.log)
	}
}

// TestLLMPromptCancelledWithHost: a model call of a plugin ends when its
// host goes (the plugin crashed): the gateway's call is cancelled, not
// left running.
func TestLLMPromptCancelledWithHost(t *testing.T) {
	shortTimeouts(t, 10*time.Second)
	f := mustFixture(t, map[string][]string{"travel": {"asker"}}, tsPlugin{name: "asker", source: askerPlugin})
	pc := &llmContext{started: make(chan struct{}), cancelled: make(chan struct{})}
	if err := f.host.Start(context.Background(), pc); err != nil {
		t.Fatal(err)
	}
	done := make(chan proto.ToolResponse, 1)
	go func() { done <- f.call("travel", "asker", `["hang","m1",[{"role":"user","content":"hi"}]]`) }()
	select {
	case <-pc.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not reach the gateway")
	}
	f.call("travel", "asker", "exit")
	select {
	case <-pc.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the model call was not cancelled when the host exited")
	}
	if resp := <-done; resp.Success || resp.Error == "" {
		t.Errorf("the hanging call answered %+v", resp)
	}
}

// FuzzParseLLMPrompt: whatever a plugin sends as ctx.llmPrompt's
// arguments, parsing does not panic, and what it accepts is within the
// bounds: user messages only, their counts and sizes, valid base64 images
// of the allowed types, maxTokens and thinkingLevel in range.
func FuzzParseLLMPrompt(f *testing.F) {
	for _, s := range []string{
		`{"provider":"pa","modelId":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"provider":"pa","modelId":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","data":"aGk=","mimeType":"image/png"}]}],"opts":{"systemPrompt":"s","maxTokens":5,"thinkingLevel":"high"}}`,
		`{"provider":"pa","modelId":"m","messages":[{"role":"user","content":[{"type":"image","data":"aGk","mimeType":"image/png"}]}]}`,
		`{"provider":"pa","modelId":"m","messages":[{"role":"user","content":null}],"opts":{"maxTokens":-1e308}}`,
		`{"provider":"pa","modelId":"m","messages":[{"role":"user","content":[]}],"opts":null}`,
		`{"messages":[{"role":"user","content":"x","extra":1}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		req, err := parseLLMPrompt(raw)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "ctx.llmPrompt: ") {
				t.Fatalf("error %q does not name the method", err)
			}
			return
		}
		if req.Provider == "" || req.Model == "" || len(req.Provider) > maxNameLen || len(req.Model) > maxNameLen {
			t.Fatalf("names %q %q accepted", req.Provider, req.Model)
		}
		if len(req.Messages) == 0 || len(req.Messages) > maxLLMMessages {
			t.Fatalf("%d messages accepted", len(req.Messages))
		}
		if req.MaxTokens < 0 || req.MaxTokens > maxLLMMaxTokens {
			t.Fatalf("maxTokens %d accepted", req.MaxTokens)
		}
		if req.ThinkingLevel != "" && !slices.Contains(llmThinkingLevels, req.ThinkingLevel) {
			t.Fatalf("thinkingLevel %q accepted", req.ThinkingLevel)
		}
		text, images, blocks := len(req.SystemPrompt), 0, 0
		for _, m := range req.Messages {
			if m.User == nil || m.Assistant != nil || m.ToolResult != nil || len(m.User.Content) == 0 {
				t.Fatalf("message %+v accepted", m)
			}
			for _, b := range m.User.Content {
				blocks++
				switch b.Type {
				case llm.ContentText:
					text += len(b.Text)
				case llm.ContentImage:
					images++
					data, err := base64.StdEncoding.DecodeString(b.Data)
					if err != nil || len(data) == 0 || len(data) > maxLLMImage || !slices.Contains(llmImageTypes, b.MimeType) {
						t.Fatalf("image %q (%s) accepted", b.Data, b.MimeType)
					}
				default:
					t.Fatalf("block type %q accepted", b.Type)
				}
			}
		}
		if text > maxLLMText || images > maxLLMImages || blocks > maxLLMBlocks {
			t.Fatalf("%d bytes of text, %d images, %d blocks accepted", text, images, blocks)
		}
	})
}

// TestToolkitImageAnalyze: the toolkit's image plugin, unmodified, analyses
// a picture through ctx.llmPrompt: the gateway gets the configured
// provider and model, the picture as a base64 image block and the prompt,
// and the tool answers the model's text.
func TestToolkitImageAnalyze(t *testing.T) {
	tk := toolkitDir(t, "image")
	pics := t.TempDir()
	png := []byte("\x89PNG\r\n\x1a\nnot really a picture")
	if err := os.WriteFile(filepath.Join(pics, "cat.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	f := mustFixture(t, map[string][]string{"travel": {"image"}},
		tsPlugin{name: "image", dir: filepath.Join(tk, "image"), allowRead: []string{pics},
			config: map[string]any{"analyzeProvider": "pa", "analyzeModel": "claude-sonnet-4-5"}})
	pc := &llmContext{}
	if err := f.host.Start(context.Background(), pc); err != nil {
		t.Fatal(err)
	}
	resp := f.call("travel", "image", "analyze", filepath.Join(pics, "cat.png"), "--prompt", "what animal?")
	want := fmt.Sprintf(`pa/claude-sonnet-4-5 [image:image/png:%d text:what animal?] sys="" max=0 think=""`, base64.StdEncoding.EncodedLen(len(png)))
	if !resp.Success || resp.Output != want {
		t.Fatalf("got %+v, want output %q\n%s", resp, want, f.log)
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if len(pc.reqs) != 1 || pc.reqs[0].Messages[0].User.Content[0].Data != base64.StdEncoding.EncodeToString(png) {
		t.Errorf("the gateway got %+v", pc.reqs)
	}
}
