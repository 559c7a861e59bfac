package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/llm/llmtest"
)

// sized returns marker followed by filler up to n characters.
func sized(marker string, n int) string { return marker + " " + strings.Repeat("z", n-len(marker)-1) }

func isSummaryRequest(r llmtest.Recorded) bool {
	return strings.Contains(r.System(), "summarisation assistant")
}

func TestCompactionSmallWindow(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	// Window 2400: reserve 600, threshold 1800 tokens; 900 kept as they are.
	small := e.model
	small.ContextWindow = 2400
	e.configure(func(s *AgentSetup) { s.Model = ProviderModel{Provider: e.prov, Model: small} })

	// Every message is 1200 characters: 300 tokens.
	e.srv.Enqueue(
		llmtest.Text(sized("BRAVO", 1200)).WithUsage(400, 300),
		llmtest.Text(sized("DELTA", 1200)).WithUsage(1000, 300),
		llmtest.Text(sized("FOXTROT", 1200)).WithUsage(1600, 300), // 1900 > 1800 from now on
		llmtest.Text("SUMMARY-XYZ: the user said alpha and charlie").WithUsage(700, 20),
		llmtest.Text("golf answer"),
	)
	e.prompt(sized("ALPHA", 1200))
	e.prompt(sized("CHARLIE", 1200))
	e.prompt(sized("ECHO", 1200))
	if e.srv.Count() != 3 {
		t.Fatalf("%d requests before the threshold", e.srv.Count())
	}
	res := e.prompt("GOLF")
	if res.Compactions != 1 || res.Text != "golf answer" {
		t.Fatalf("result %+v", res)
	}
	if res.Usage.Input != 710 {
		t.Errorf("usage %+v does not count the summary", res.Usage)
	}
	sumReq := e.srv.Request(3)
	if !isSummaryRequest(sumReq) {
		t.Fatalf("request 3 is not a summary request: %s", sumReq.System())
	}
	if len(sumReq.Tools()) != 0 {
		t.Error("summary request offers tools")
	}
	// Summarised: ALPHA, BRAVO, CHARLIE; kept: DELTA on (the cut keeps ≥ 900 tokens).
	sumText := sumReq.AllText()
	for _, want := range []string{"ALPHA", "BRAVO", "CHARLIE"} {
		if !strings.Contains(sumText, want) {
			t.Errorf("summary request lacks %s", want)
		}
	}
	if strings.Contains(sumText, "DELTA") || strings.Contains(sumText, "GOLF") {
		t.Error("summary request carries kept messages")
	}
	after := e.srv.Request(4).AllText()
	if !strings.Contains(after, SummaryPrefix+"SUMMARY-XYZ") {
		t.Errorf("no summary in %q", after[:min(200, len(after))])
	}
	for _, gone := range []string{"ALPHA", "BRAVO", "CHARLIE"} {
		if strings.Contains(after, gone) {
			t.Errorf("%s still sent after compaction", gone)
		}
	}
	for _, kept := range []string{"DELTA", "ECHO", "FOXTROT", "GOLF"} {
		if !strings.Contains(after, kept) {
			t.Errorf("%s lost by compaction", kept)
		}
	}
	if len(after) >= len(e.srv.Request(2).AllText())+100 {
		t.Errorf("context did not shrink: %d vs %d bytes", len(after), len(e.srv.Request(2).AllText()))
	}

	// The file has the compaction entry, and a restart resumes from it.
	path := sessionFileOf(t, e, DefaultSessionKey(testAgent))
	var comp map[string]any
	ids := map[string]string{} // message text marker -> entry id
	for _, l := range sessionLines(t, path) {
		switch l["type"] {
		case "compaction":
			comp = l
		case "message":
			m := l["message"].(map[string]any)
			if s := textOf(m["content"]); len(s) > 3 {
				ids[strings.Fields(s)[0]] = l["id"].(string)
			}
		}
	}
	if comp == nil {
		t.Fatal("no compaction entry")
	}
	if comp["summary"] != "SUMMARY-XYZ: the user said alpha and charlie" || comp["firstKeptEntryId"] != ids["DELTA"] ||
		comp["tokensBefore"].(float64) < 1900 {
		t.Errorf("compaction entry %v (DELTA is %s)", comp, ids["DELTA"])
	}
	e.restart()
	e.srv.Enqueue(llmtest.Text("hotel answer"))
	if r := e.prompt("HOTEL"); r.Compactions != 0 {
		t.Errorf("compacted again after restart: %+v", r)
	}
	last := e.srv.Last().AllText()
	if !strings.Contains(last, "SUMMARY-XYZ") || strings.Contains(last, "ALPHA") || !strings.Contains(last, "DELTA") ||
		!strings.Contains(last, "golf answer") || !strings.Contains(last, "HOTEL") {
		t.Errorf("after restart %q", last)
	}
	if isSummaryRequest(e.srv.Last()) || e.srv.Count() != 6 {
		t.Errorf("%d requests", e.srv.Count())
	}
}

func TestCompactionMidPromptOpenAI(t *testing.T) {
	e := newEnv(t, wireOpenAI)
	e.configure(func(s *AgentSetup) { s.CompactionThreshold = 1000 })
	e.srv.Enqueue(
		llmtest.Text(sized("BRAVO", 2000)).WithUsage(400, 300),
		// The next prompt: a tool call whose reply reports a context over the threshold.
		llmtest.ToolCall("exec", map[string]any{"command": "ls"}).WithUsage(1200, 20),
		llmtest.Text("SUMMARY-OAI"),
		llmtest.Text("done"),
	)
	e.prompt(sized("ALPHA", 2000))
	res := e.prompt("CHARLIE run ls")
	if res.Compactions != 1 || res.Text != "done" || res.ModelCalls != 2 {
		t.Fatalf("result %+v", res)
	}
	if !isSummaryRequest(e.srv.Request(2)) {
		t.Fatal("no summary request between the tool call and the next model call")
	}
	final := e.srv.Request(3)
	all := final.AllText()
	if !strings.Contains(all, "SUMMARY-OAI") || strings.Contains(all, "ALPHA") || !strings.Contains(all, "ran: ls") {
		t.Errorf("final request %q", all)
	}
	// The tool call and its result stay together.
	if trs, ids := toolResults(final), toolCallIDs(final); len(trs) != 1 || len(ids) != 1 || trs[0].ID != ids[0] {
		t.Errorf("results %+v calls %v", trs, ids)
	}
}

func TestManualCompact(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.srv.Enqueue(llmtest.Text("one answer"), llmtest.Text("two answer"), llmtest.Text("SUMMARY-MANUAL"))
	e.prompt("one")
	e.prompt("two")
	c, err := e.m.Compact(context.Background(), testAgent, "")
	if err != nil || c == nil || c.Summary != "SUMMARY-MANUAL" {
		t.Fatalf("Compact = %+v, %v", c, err)
	}
	e.prompt("three")
	if all := e.srv.Last().AllText(); !strings.Contains(all, "SUMMARY-MANUAL") || strings.Contains(all, "one answer") {
		t.Errorf("request %q", all)
	}
}

func TestCompactionFailureGoesOn(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	e.configure(func(s *AgentSetup) { s.CompactionThreshold = 100 })
	e.srv.Enqueue(
		llmtest.Text(sized("BRAVO", 800)).WithUsage(300, 200),
		llmtest.Status(500), // the summary fails
		llmtest.Text("answer anyway"),
	)
	e.prompt(sized("ALPHA", 800))
	res := e.prompt("CHARLIE")
	if res.Text != "answer anyway" || res.Compactions != 0 {
		t.Errorf("result %+v", res)
	}
	if !strings.Contains(e.logs.String(), "compaction failed") {
		t.Error("failure not logged")
	}
}

func msgUser(n int) llm.Message { return llm.UserText(strings.Repeat("u", n)) }

func msgCall(n int) llm.Message {
	return llm.Message{Assistant: &llm.AssistantMessage{Content: []llm.Content{
		llm.Text(strings.Repeat("a", n)), llm.ToolCallContent("c1", "exec", []byte(`{}`)),
	}, StopReason: llm.StopReasonToolUse}}
}

func msgResult(n int) llm.Message {
	return llm.Message{ToolResult: &llm.ToolResultMessage{ToolCallID: "c1", ToolName: "exec", Content: []llm.Content{llm.Text(strings.Repeat("r", n))}}}
}

func TestPlanNeverSplitsToolResults(t *testing.T) {
	c := &Compactor{Model: ProviderModel{Model: llm.Model{ContextWindow: 100000}}, Threshold: 1000, KeepRecentTokens: 1000}
	cases := []struct {
		name string
		msgs []llm.Message
		want int
	}{
		// The candidate falls on a tool result: move on to the next assistant or user message.
		{"forward", []llm.Message{msgUser(4000), msgCall(400), msgResult(4000), msgResult(400), msgCall(40), msgUser(40)}, 4},
		// Only tool results after the candidate: move back to their call.
		{"backward", []llm.Message{msgUser(4000), msgUser(400), msgCall(40), msgResult(4000), msgResult(400)}, 2},
		// All recent: summarise all but the latest turn.
		{"all recent", []llm.Message{msgUser(40), msgCall(40), msgResult(40), msgUser(40)}, 3},
		{"nothing to summarise", []llm.Message{msgCall(40), msgResult(4000)}, 0},
		{"only the summary before", []llm.Message{SummaryMessage("s", 0), msgUser(8000)}, 0},
	}
	for _, tc := range cases {
		if got := c.Plan(tc.msgs, 5000, false); got != tc.want {
			t.Errorf("%s: cut %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := c.Plan(cases[0].msgs, 999, false); got != 0 {
		t.Errorf("under the threshold: cut %d", got)
	}
	if got := c.Plan(cases[0].msgs, 10, true); got != 4 {
		t.Errorf("forced: cut %d", got)
	}
}

func TestEstimateTokens(t *testing.T) {
	reply := func(ts int64, input int) llm.Message {
		return llm.Message{Assistant: &llm.AssistantMessage{Content: []llm.Content{llm.Text("x")},
			Usage: llm.Usage{Input: input, Output: 10, CacheRead: 5, CacheWrite: 5}, StopReason: llm.StopReasonStop, Timestamp: ts}}
	}
	msgs := []llm.Message{msgUser(400), reply(100, 1000), msgUser(400)}
	if got := EstimateTokens("", nil, msgs, 0); got != 1020+100 {
		t.Errorf("with usage: %d", got)
	}
	// A reply older than the last compaction is not trusted.
	if got := EstimateTokens("", nil, msgs, 200); got != 100+1+100 {
		t.Errorf("stale usage: %d", got)
	}
	// Failed replies are not trusted either.
	failed := reply(100, 1000)
	failed.Assistant.StopReason = llm.StopReasonError
	if got := EstimateTokens(strings.Repeat("s", 400), nil, []llm.Message{msgUser(400), failed}, 0); got != 100+100+1 {
		t.Errorf("failed reply: %d", got)
	}
	if got := messageTokens(llm.Message{User: &llm.UserMessage{Content: []llm.Content{llm.Image("xx", "image/png")}}}); got != 1200 {
		t.Errorf("image: %d", got)
	}
}

func TestCompactorLimits(t *testing.T) {
	m := func(w int) Model { return ProviderModel{Model: llm.Model{ContextWindow: w}} }
	for _, c := range []struct {
		comp              Compactor
		limit, keepRecent int
	}{
		{Compactor{Model: m(200000)}, 200000 - 16384, 20000},
		{Compactor{Model: m(8000)}, 6000, 3000},
		{Compactor{Model: m(0)}, 128000 - 16384, 20000},
		{Compactor{Model: m(200000), Threshold: 50000}, 50000, 20000},
		{Compactor{Model: m(200000), Threshold: 10000, KeepRecentTokens: 1234}, 10000, 1234},
	} {
		if got, k := c.comp.Limit(), c.comp.keepRecent(); got != c.limit || k != c.keepRecent {
			t.Errorf("%+v: limit %d keep %d, want %d %d", c.comp, got, k, c.limit, c.keepRecent)
		}
	}
}
