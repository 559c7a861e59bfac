package agent

import (
	"encoding/json"
	"testing"
)

var entrySeeds = []string{
	`{"type":"session","version":3,"id":"0b5f6c1e-6a3e-4d7e-9a55-1c2d3e4f5a6b","timestamp":"2026-03-05T00:00:00.000Z","cwd":"/workspace"}`,
	`{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-03-05T00:00:00.000Z","message":{"role":"user","content":"hi","timestamp":1}}`,
	`{"type":"message","id":"a1b2c3d5","parentId":"a1b2c3d4","timestamp":"2026-03-05T00:00:00.000Z","message":{"role":"assistant","content":[{"type":"text","text":"yo"},{"type":"toolCall","id":"t1","name":"exec","arguments":{"command":"ls"}}],"api":"anthropic-messages","provider":"anthropic","model":"m","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"toolUse","timestamp":2}}`,
	`{"type":"message","id":"a1b2c3d6","parentId":"a1b2c3d5","timestamp":"x","message":{"role":"toolResult","toolCallId":"t1","toolName":"exec","content":[{"type":"text","text":"Exit code: 0"}],"isError":false,"timestamp":3}}`,
	`{"type":"compaction","id":"c0c0c0c0","parentId":"a1b2c3d6","timestamp":"2026-03-05T00:00:00.000Z","summary":"s","firstKeptEntryId":"a1b2c3d5","tokensBefore":123}`,
	`{"type":"model_change","id":"m0m0m0m0","parentId":null,"timestamp":"2026-03-05T00:00:00.000Z","provider":"anthropic","modelId":"claude"}`,
	`{"type":"thinking_level_change","id":"t0t0t0t0","parentId":null,"thinkingLevel":"high"}`,
	`{"type":"message","id":"x","message":{"role":"robot"}}`,
	`{"type":"message","id":"a1b2","parentId":"x","message":{"role":"assi`,
	`null`, `[]`, `{}`, `{"type":5}`, "\x00",
}

func FuzzParseEntry(f *testing.F) {
	for _, s := range entrySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := parseEntry(line)
		if err != nil {
			return
		}
		if e.Type == "" {
			t.Fatal("entry without type accepted")
		}
		if e.Type == entryMessage {
			if e.Message == nil || e.ID == "" {
				t.Fatalf("message entry %+v", e)
			}
			// What we read, we can write and read back.
			b, err := json.Marshal(messageLine{Type: entryMessage, ID: e.ID, Message: *e.Message})
			if err != nil {
				t.Fatalf("re-marshal: %v", err)
			}
			e2, err := parseEntry(b)
			if err != nil || e2.Message.Role() != e.Message.Role() {
				t.Fatalf("round trip of %s: %v", b, err)
			}
		}
	})
}

func FuzzParseSessionFile(f *testing.F) {
	all := ""
	for _, s := range entrySeeds {
		all += s + "\n"
	}
	f.Add([]byte(all))
	f.Add([]byte(entrySeeds[0] + "\n" + entrySeeds[1] + "\n" + entrySeeds[2][:40]))
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := parseSessionFile(data)
		if sf == nil {
			t.Fatal("nil result")
		}
		if sf.truncateAt > int64(len(data)) {
			t.Fatalf("truncateAt %d past %d", sf.truncateAt, len(data))
		}
		if err != nil {
			return
		}
		r := replay(sf.entries)
		if len(r.msgs) != len(r.ids) {
			t.Fatalf("%d messages, %d ids", len(r.msgs), len(r.ids))
		}
	})
}
