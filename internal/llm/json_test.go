package llm

import (
	"encoding/json"
	"reflect"
	"testing"
)

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestContentJSON(t *testing.T) {
	tests := []struct {
		name string
		c    Content
		want string
	}{
		{"text", Text("hi"), `{"type":"text","text":"hi"}`},
		{"empty text keeps text", Text(""), `{"type":"text","text":""}`},
		{"text signature", Content{Type: ContentText, Text: "a", TextSignature: "msg_1"}, `{"type":"text","text":"a","textSignature":"msg_1"}`},
		{"thinking", Content{Type: ContentThinking, Thinking: "hmm", ThinkingSignature: "sig"}, `{"type":"thinking","thinking":"hmm","thinkingSignature":"sig"}`},
		{"redacted", Content{Type: ContentThinking, Thinking: "x", ThinkingSignature: "d", Redacted: true}, `{"type":"thinking","thinking":"x","thinkingSignature":"d","redacted":true}`},
		{"image", Image("aGk=", "image/png"), `{"type":"image","data":"aGk=","mimeType":"image/png"}`},
		{"tool call", ToolCallContent("t1", "exec", json.RawMessage(`{ "command" : "ls" }`)), `{"type":"toolCall","id":"t1","name":"exec","arguments":{"command":"ls"}}`},
		{"nil args", Content{Type: ContentToolCall, ID: "t", Name: "n"}, `{"type":"toolCall","id":"t","name":"n","arguments":{}}`},
		{"bad args", Content{Type: ContentToolCall, ID: "t", Name: "n", Arguments: json.RawMessage(`[1`)}, `{"type":"toolCall","id":"t","name":"n","arguments":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustMarshal(t, tt.c); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			var back Content
			if err := json.Unmarshal([]byte(tt.want), &back); err != nil {
				t.Fatal(err)
			}
			if got := mustMarshal(t, back); got != tt.want {
				t.Errorf("round trip %s", got)
			}
		})
	}
}

func TestContentArgumentsDecode(t *testing.T) {
	for in, want := range map[string]struct{ args, invalid string }{
		`{"type":"toolCall","id":"a","name":"n","arguments":{"x":1}}`:   {`{"x":1}`, ""},
		`{"type":"toolCall","id":"a","name":"n"}`:                       {`{}`, ""},
		`{"type":"toolCall","id":"a","name":"n","arguments":null}`:      {`{}`, ""},
		`{"type":"toolCall","id":"a","name":"n","arguments":"{\"x\"}"}`: {`{}`, `"{\"x\"}"`},
		`{"type":"toolCall","id":"a","name":"n","arguments":[1,2]}`:     {`{}`, `[1,2]`},
	} {
		var c Content
		if err := json.Unmarshal([]byte(in), &c); err != nil {
			t.Fatal(err)
		}
		if string(c.Arguments) != want.args || c.InvalidArguments != want.invalid {
			t.Errorf("%s: args %s invalid %q", in, c.Arguments, c.InvalidArguments)
		}
	}
}

func TestParseArguments(t *testing.T) {
	for in, want := range map[string]struct {
		out string
		ok  bool
	}{
		"":                  {"{}", true},
		"  ":                {"{}", true},
		`{"a": [1, 2]}`:     {`{"a":[1,2]}`, true},
		`{"a": 1`:           {"{}", false},
		`[1]`:               {"{}", false},
		`"str"`:             {"{}", false},
		`{"a":1} trailing`:  {"{}", false},
		"{}\n":              {"{}", true},
		`{"s":"\u00e9\n"}`:  {`{"s":"\u00e9\n"}`, true},
		`{"a":{"b":{"c":`:   {"{}", false},
		`null`:              {"{}", false},
		`{"dup":1,"dup":2}`: {`{"dup":1,"dup":2}`, true},
	} {
		out, ok := ParseArguments(in)
		if string(out) != want.out || ok != want.ok {
			t.Errorf("ParseArguments(%q) = %s, %v; want %s, %v", in, out, ok, want.out, want.ok)
		}
	}
}

func TestMessageJSON(t *testing.T) {
	user := `{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","data":"AA==","mimeType":"image/png"}],"timestamp":1700000000000}`
	asst := `{"role":"assistant","content":[{"type":"thinking","thinking":"t","thinkingSignature":"s"},{"type":"text","text":"ok"},{"type":"toolCall","id":"c1","name":"exec","arguments":{"command":"ls"}}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":10,"cost":{"input":0.1,"output":0.2,"cacheRead":0.3,"cacheWrite":0.4,"total":1}},"stopReason":"toolUse","timestamp":1700000000001}`
	failed := `{"role":"assistant","content":[],"api":"openai-completions","provider":"zai","model":"glm","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"error","errorMessage":"429 rate limited","timestamp":5}`
	result := `{"role":"toolResult","toolCallId":"c1","toolName":"exec","content":[{"type":"text","text":"Exit code: 0"}],"details":{"exitCode":0},"isError":false,"timestamp":1700000000002}`
	resultNoDetails := `{"role":"toolResult","toolCallId":"c1","toolName":"exec","content":[],"isError":true,"timestamp":3}`
	for _, in := range []string{user, asst, failed, result, resultNoDetails} {
		var m Message
		if err := json.Unmarshal([]byte(in), &m); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := mustMarshal(t, m); got != in {
			t.Errorf("round trip\n got %s\nwant %s", got, in)
		}
	}

	// A user message's content may be a string.
	var m Message
	if err := json.Unmarshal([]byte(`{"role":"user","content":"Hello!"}`), &m); err != nil {
		t.Fatal(err)
	}
	if m.Role() != RoleUser || m.User.Text() != "Hello!" {
		t.Errorf("m = %+v", m.User)
	}
	if got := mustMarshal(t, m); got != `{"role":"user","content":[{"type":"text","text":"Hello!"}],"timestamp":0}` {
		t.Errorf("got %s", got)
	}

	if err := json.Unmarshal([]byte(`{"role":"system","content":"x"}`), &m); err == nil {
		t.Error("unknown role accepted")
	}
	if _, err := json.Marshal(Message{}); err == nil {
		t.Error("empty message marshalled")
	}
	// Nil content is written as [].
	if got := mustMarshal(t, AssistantMessage{StopReason: StopReasonStop}); got[:35] != `{"role":"assistant","content":[],"a` {
		t.Errorf("got %s", got)
	}
}

func TestContextJSON(t *testing.T) {
	in := `{"systemPrompt":"sys","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"exec","description":"Run","parameters":{"type":"object","properties":{"command":{"type":"string"}}}}]}`
	var c Context
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	if c.SystemPrompt != "sys" || len(c.Messages) != 1 || len(c.Tools) != 1 || c.Tools[0].Name != "exec" {
		t.Fatalf("c = %+v", c)
	}
	want := `{"systemPrompt":"sys","messages":[{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":0}],"tools":[{"name":"exec","description":"Run","parameters":{"type":"object","properties":{"command":{"type":"string"}}}}]}`
	if got := mustMarshal(t, c); got != want {
		t.Errorf("got %s", got)
	}
	if got := mustMarshal(t, Context{}); got != `{"messages":[]}` {
		t.Errorf("empty = %s", got)
	}
}

func TestEventJSON(t *testing.T) {
	msg := &AssistantMessage{Content: []Content{Text("x")}, API: "a", Provider: "p", Model: "m", StopReason: StopReasonStop}
	call := ToolCallContent("c", "exec", json.RawMessage(`{}`))
	tests := []struct {
		e    Event
		want string
	}{
		{Event{Type: EventStart}, `{"type":"start"}`},
		{Event{Type: EventTextStart}, `{"type":"text_start","contentIndex":0}`},
		{Event{Type: EventTextDelta, ContentIndex: 2, Delta: ""}, `{"type":"text_delta","contentIndex":2,"delta":""}`},
		{Event{Type: EventTextEnd, Content: ""}, `{"type":"text_end","contentIndex":0,"content":""}`},
		{Event{Type: EventThinkingDelta, Delta: "hm"}, `{"type":"thinking_delta","contentIndex":0,"delta":"hm"}`},
		{Event{Type: EventToolCallDelta, ContentIndex: 1, Delta: `{"a`}, `{"type":"toolcall_delta","contentIndex":1,"delta":"{\"a"}`},
		{Event{Type: EventToolCallEnd, ContentIndex: 1, ToolCall: &call}, `{"type":"toolcall_end","contentIndex":1,"toolCall":{"type":"toolCall","id":"c","name":"exec","arguments":{}}}`},
		{Event{Type: EventDone, Reason: "stop", Message: msg}, `{"type":"done","reason":"stop","message":` + mustMarshal(t, msg) + `}`},
		{Event{Type: EventError, Reason: "aborted", Error: msg}, `{"type":"error","reason":"aborted","error":` + mustMarshal(t, msg) + `}`},
		{Event{Type: EventBlocked, Reason: "not allowed"}, `{"type":"blocked","reason":"not allowed"}`},
		{Event{Type: EventModelFallback, Provider: "anthropic", ModelID: "claude-3-5-sonnet-20241022"}, `{"type":"model_fallback","provider":"anthropic","modelId":"claude-3-5-sonnet-20241022"}`},
		{Event{Type: EventTextDelta, Delta: "a", Partial: msg}, `{"type":"text_delta","contentIndex":0,"delta":"a","partial":` + mustMarshal(t, msg) + `}`},
	}
	for _, tt := range tests {
		got := mustMarshal(t, tt.e)
		if got != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
			continue
		}
		var back Event
		if err := json.Unmarshal([]byte(got), &back); err != nil {
			t.Fatal(err)
		}
		if again := mustMarshal(t, back); again != got {
			t.Errorf("round trip %s", again)
		}
	}
}

func TestAccumulator(t *testing.T) {
	var got []Event
	b := NewBuilder(Model{ID: "m", API: "x", Provider: "p"}, func(e Event) { got = append(got, e) })
	th := b.BeginThinking()
	b.AppendThinking(th, "a")
	b.AppendThinking(th, "b")
	b.AppendSignature(th, "s1")
	b.End(th)
	tx := b.BeginText()
	b.AppendText(tx, "hel")
	b.AppendText(tx, "lo")
	tc := b.BeginToolCall("id1", "exec")
	b.AppendToolCall(tc, `{"command"`)
	b.AppendToolCall(tc, `:"ls"}`)
	b.SetStopReason(StopReasonToolUse)
	msg, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	var acc Accumulator
	for i, e := range got {
		acc.Apply(e)
		if i == 7 { // after the second text delta
			if p := acc.Message(); len(p.Content) != 2 || p.Content[1].Text != "hello" {
				t.Errorf("partial = %+v", p.Content)
			}
		}
	}
	if !reflect.DeepEqual(acc.Message(), msg) {
		t.Errorf("accumulated %+v\nwant %+v", acc.Message(), msg)
	}
	want := []EventType{EventStart, EventThinkingStart, EventThinkingDelta, EventThinkingDelta, EventThinkingEnd,
		EventTextStart, EventTextDelta, EventTextDelta, EventToolCallStart, EventToolCallDelta, EventToolCallDelta,
		EventTextEnd, EventToolCallEnd, EventDone}
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Type != want[i] {
			t.Errorf("event %d = %s, want %s", i, got[i].Type, want[i])
		}
	}
	if msg.Content[0].ThinkingSignature != "s1" || string(msg.Content[2].Arguments) != `{"command":"ls"}` {
		t.Errorf("msg = %+v", msg)
	}
}

// TestAccumulatorFallback: after model_fallback the message so far is the
// new attempt's alone, even when the failed one stopped mid-block.
func TestAccumulatorFallback(t *testing.T) {
	var acc Accumulator
	for _, e := range []Event{
		{Type: EventStart, Partial: &AssistantMessage{Provider: "pa", Model: "a"}},
		{Type: EventTextStart, ContentIndex: 0},
		{Type: EventTextDelta, ContentIndex: 0, Delta: "failed attempt"},
		{Type: EventToolCallStart, ContentIndex: 1},
		{Type: EventToolCallDelta, ContentIndex: 1, Delta: `{"x":`},
		{Type: EventModelFallback, Provider: "pb", ModelID: "b"},
		{Type: EventTextStart, ContentIndex: 0},
		{Type: EventTextDelta, ContentIndex: 0, Delta: "from b"},
	} {
		acc.Apply(e)
	}
	m := acc.Message()
	if len(m.Content) != 1 || m.Text() != "from b" || m.Provider != "pb" || m.Model != "b" {
		t.Errorf("message so far %+v", m)
	}
}
