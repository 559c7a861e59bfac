package agent

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/llm/llmtest"
)

// TestSessionMetadataPersists: metadata set on a session is kept in its
// session-map entry and is there after a restart; a session without an
// entry, and oversized or bad values, are refused.
func TestSessionMetadataPersists(t *testing.T) {
	e := newEnv(t, wireAnthropic)
	key := DefaultSessionKey(testAgent)
	if err := e.m.SetSessionMetadata(key, "k", json.RawMessage(`1`)); !errors.Is(err, ErrNoSessionEntry) {
		t.Errorf("before the first message: %v", err)
	}
	e.srv.Enqueue(llmtest.Text("hi"))
	e.prompt("hello")
	if err := e.m.SetSessionMetadata(key, "telegram_settings", json.RawMessage(`{"agent":"other"}`)); err != nil {
		t.Fatal(err)
	}
	if err := e.m.SetSessionMetadata(key, "gone", json.RawMessage(`true`)); err != nil {
		t.Fatal(err)
	}
	if err := e.m.SetSessionMetadata(key, "gone", nil); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		name string
		v    json.RawMessage
	}{
		{"", json.RawMessage(`1`)},
		{strings.Repeat("n", MaxMetadataName+1), json.RawMessage(`1`)},
		{"big", json.RawMessage(`"` + strings.Repeat("x", MaxMetadataValue) + `"`)},
		{"notjson", json.RawMessage(`{`)},
	} {
		if err := e.m.SetSessionMetadata(key, bad.name, bad.v); err == nil {
			t.Errorf("accepted %.20q", bad.name)
		}
	}
	for i := range 5 {
		err := e.m.SetSessionMetadata(key, "fill"+string(rune('a'+i)), json.RawMessage(`"`+strings.Repeat("x", MaxMetadataValue-100)+`"`))
		if i == 4 && err == nil {
			t.Error("the whole metadata grew over its limit")
		}
	}
	e.restart()
	meta, ok := e.m.SessionMetadata(key)
	var ts struct{ Agent string }
	if !ok || json.Unmarshal(meta["telegram_settings"], &ts) != nil || ts.Agent != "other" || meta["gone"] != nil {
		t.Errorf("after restart: %v %.200s", ok, meta["telegram_settings"])
	}
	if _, ok := e.m.SessionMetadata("api:nobody"); ok {
		t.Error("metadata of a session with no entry")
	}
}
