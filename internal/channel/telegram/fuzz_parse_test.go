package telegram

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-telegram/bot/models"
)

// FuzzParseCommand: whatever a user sends, a command is one of the menu's
// (or an alias), its arguments trimmed and inside the text; text that does
// not start with "/" is never a command.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{"/new", "/v on", "/S  off ", "/model openai/gpt-4o", "/status@Beige_Bot",
		"/status@other_bot", "/etc/hosts", "hello /new", "/verbose\non", "/", "/@", "/new@", "/\u00a0new"} {
		f.Add(s, "beige_bot")
	}
	f.Fuzz(func(t *testing.T, text, botName string) {
		name, args, kind := parseCommand(text, botName)
		switch kind {
		case notCommand, forOtherBot:
			if name != "" || args != "" {
				t.Fatalf("%v with name %q args %q", kind, name, args)
			}
			if kind == forOtherBot && (botName == "" || !strings.Contains(text, "@")) {
				t.Fatalf("%q for another bot while ours is %q", text, botName)
			}
		case isCommand:
			if !strings.HasPrefix(text, "/") {
				t.Fatalf("%q is a command", text)
			}
			known := false
			for _, c := range commands {
				known = known || c.name == name
			}
			if !known {
				t.Fatalf("unknown command %q", name)
			}
			if args != strings.TrimSpace(args) || !strings.Contains(text, args) {
				t.Fatalf("args %q of %q", args, text)
			}
		default:
			t.Fatalf("kind %v", kind)
		}
	})
}

var updateSeeds = []string{
	`{"update_id":1,"message":{"message_id":5,"date":1,"chat":{"id":42,"type":"private"},"from":{"id":42,"is_bot":false,"first_name":"U","username":"alice_x"},"text":"  hi  "}}`,
	`{"update_id":2,"message":{"message_id":6,"chat":{"id":-1001,"type":"supergroup","is_forum":true},"from":{"id":42},"message_thread_id":9,"is_topic_message":true,"text":"/status@beige_bot"}}`,
	`{"update_id":3,"message":{"message_id":7,"chat":{"id":-1001,"type":"group"},"from":{"id":42},"message_thread_id":9,"reply_to_message":{"message_id":1,"chat":{"id":-1001,"type":"group"}},"text":"in a reply chain"}}`,
	`{"update_id":4,"message":{"message_id":8,"chat":{"id":42,"type":"private"},"from":{"id":42},"photo":[{"file_id":"x","file_unique_id":"y","width":1,"height":1}]}}`,
	`{"update_id":5,"message":{"message_id":9,"chat":{"id":42,"type":"private"},"from":{"id":999,"username":"ALICE_X"},"text":"by name"}}`,
	`{"update_id":6,"message":{"message_id":9,"chat":{"id":42,"type":"private"},"from":{"id":7,"is_bot":true},"text":"bot"}}`,
	`{"update_id":7,"edited_message":{"message_id":9,"chat":{"id":42,"type":"private"},"text":"x"}}`,
	`{"update_id":8,"message":{"message_id":9,"chat":{"id":42,"type":"private"},"text":"no sender"}}`,
}

// FuzzIntake reads Telegram updates as the bot library decodes them and
// takes them in: only a message from an allowed user with text (or media
// in a private chat) is accepted; what is accepted is what the queue stores
// and reads back unchanged after a restart.
func FuzzIntake(f *testing.F) {
	for _, s := range updateSeeds {
		f.Add([]byte(s))
	}
	cfg, err := ParseConfig(Name, map[string]any{
		"token": "1:abcdefgh", "allowedUsers": []any{float64(42), "@alice_x"}, "agentMapping": map[string]any{"default": "main"},
	})
	if err != nil {
		f.Fatal(err)
	}
	r := &run{p: &Plugin{name: Name}, cfg: cfg, log: slog.New(slog.DiscardHandler)}
	f.Fuzz(func(t *testing.T, data []byte) {
		var upd models.Update
		if json.Unmarshal(data, &upd) != nil {
			return
		}
		in := r.intake(&upd)
		if in == nil {
			return
		}
		msg := upd.Message
		if msg == nil || msg.From == nil || msg.From.IsBot || !cfg.allowed(msg.From.ID, msg.From.Username) {
			t.Fatalf("accepted %s", data)
		}
		if in.Text != strings.TrimSpace(in.Text) || (in.Text == "") != in.Media {
			t.Fatalf("text %q media %v", in.Text, in.Media)
		}
		if in.ThreadID != 0 && in.ThreadID != msg.MessageThreadID {
			t.Fatalf("thread %d of %d", in.ThreadID, msg.MessageThreadID)
		}
		tg := r.inboundTarget(*in)
		if want := sessionKey(Name, in.ChatID, in.ThreadID); tg.key != want || tg.agent != "main" {
			t.Fatalf("target %+v", tg)
		}
		// The queue stores it and reads it back, whatever its text.
		st := queueState{Version: queueVersion, LastUpdateID: upd.ID, Updates: []inbound{*in}}
		saved, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		back, err := parseQueue(saved)
		if in.UpdateID <= 0 || in.ChatID == 0 || in.FromID <= 0 || in.MsgID < 0 || in.ThreadID < 0 {
			return // parseQueue drops entries that make no sense
		}
		if err != nil || len(back.Updates) != 1 {
			t.Fatalf("the queue of %s reads back as %+v, %v", saved, back, err)
		}
		got := back.Updates[0]
		if !utf8.ValidString(in.Text) {
			return // stored with U+FFFD, as Telegram never sends
		}
		if got.Text != in.Text || got.ChatID != in.ChatID || got.ThreadID != in.ThreadID || got.MsgID != in.MsgID || !got.Received.Equal(in.Received) {
			t.Fatalf("stored %+v, read back %+v", *in, got)
		}
	})
}

// FuzzParseQueue reads queue.json as it may be found: no panic; what reads
// holds at most maxQueued entries, no update twice, none without a chat,
// sender or text; and it is written and read back the same.
func FuzzParseQueue(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"lastUpdateId":9,"savedAt":"2026-12-01T16:00:00Z","updates":[{"updateId":9,"messageId":5,"chatId":42,"chatType":"private","fromId":42,"text":"hi","received":"2026-12-01T16:00:00Z"}]}`,
		`{"version":1,"updates":[{"updateId":9,"chatId":42,"fromId":42,"text":"a"},{"updateId":9,"chatId":42,"fromId":42,"text":"b"}]}`,
		`{"version":1,"updates":[{"updateId":1,"chatId":-100,"threadId":-4,"fromId":42,"media":true}]}`,
		`{"version":2}`, `{"version":1,"updates":null}`, `{"version":1,"lastUpdateId":-5}`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := parseQueue(data)
		if err != nil {
			return
		}
		if len(st.Updates) > maxQueued || st.LastUpdateID < 0 {
			t.Fatalf("%d entries, last %d", len(st.Updates), st.LastUpdateID)
		}
		seen := map[int64]bool{}
		for _, in := range st.Updates {
			if seen[in.UpdateID] || in.ChatID == 0 || in.FromID <= 0 || in.Attempts < 0 || (in.Text == "" && !in.Media) {
				t.Fatalf("kept %+v", in)
			}
			seen[in.UpdateID] = true
		}
		out, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		st2, err := parseQueue(out)
		if err != nil {
			t.Fatalf("read back %s: %v", out, err)
		}
		if out2, _ := json.Marshal(st2); !bytes.Equal(out, out2) {
			t.Fatalf("not stable:\n%s\n%s", out, out2)
		}
	})
}

// FuzzParseConfig checks the plugin's config as config.json5 may hold it:
// no panic; a refusal is bounded by the input; one that is accepted has a token without separators, an
// allowlist, a default agent and an http(s) API URL; it is accepted again
// as it was decoded, and warns at most once per allowlist entry.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{"token":"1:abcdefgh","allowedUsers":[42,"@alice_x","77"],"agentMapping":{"default":"main","-100":"x","-100:5":"y"},"defaults":{"verbose":true},"apiUrl":"http://127.0.0.1:8081/"}`,
		`{"token":"${T}","allowedUsers":[],"agentMapping":{}}`,
		`{"token":"a/b","allowedUsers":[1.5,-3,"@x"],"agentMapping":{"default":"","x":"y"},"apiUrl":"ftp://h"}`,
		`{"token":"t","allowedUsers":[9007199254740993],"agentMapping":{"default":"m"},"extra":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var raw map[string]any
		if json.Unmarshal(data, &raw) != nil {
			return
		}
		c, err := ParseConfig(Name, raw)
		if err != nil {
			if len(err.Error()) > 8*len(data)+2000 {
				t.Fatalf("an error of %d bytes for %d", len(err.Error()), len(data))
			}
			return
		}
		if c.Token == "" || strings.ContainsAny(c.Token, "/?# \t\n") || len(c.AllowedUsers) == 0 ||
			c.AgentMapping["default"] == "" || !(strings.HasPrefix(c.APIURL, "http://") || strings.HasPrefix(c.APIURL, "https://")) {
			t.Fatalf("accepted %+v", c)
		}
		if w := c.Warnings(Name); len(w) > len(c.AllowedUsers) {
			t.Fatalf("%d warnings for %d users", len(w), len(c.AllowedUsers))
		}
		for _, u := range c.AllowedUsers {
			if (u.ID == 0) == (u.Username == "") || u.ID < 0 {
				t.Fatalf("allowlist entry %+v", u)
			}
		}
	})
}
