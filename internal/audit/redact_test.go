package audit_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/audit"
	"github.com/beige-dev/beige/internal/redact"
)

// A configured secret in a record's args or error is not written to the
// audit log, even when the args are so large they are cut right in it.
func TestLogRedactsSecrets(t *testing.T) {
	const key = "sk-ant-api03-secretsecret"
	red := redact.New([]redact.Secret{{Name: "llm.providers.anthropic.apiKey", Value: key}})
	p := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := audit.Open(p, &audit.Options{Redactor: red})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	args, _ := json.Marshal(map[string]string{"command": "curl -H 'x-api-key: " + key + "' https://x"})
	// Args cut at MaxArgsBytes with the key straddling the cut.
	pad := strings.Repeat("a", audit.MaxArgsBytes-len(`{"command":"`)-10)
	bigArgs, _ := json.Marshal(map[string]string{"command": pad + key})
	for _, rec := range []audit.Record{
		{Agent: "a", Tool: "exec", Type: audit.TypeCoreTool, Phase: audit.PhaseStarted, Args: args},
		{Agent: "a", Tool: "exec", Type: audit.TypeCoreTool, Phase: audit.PhaseFinished, Error: "401: bad key " + key},
		{Agent: "a", Tool: "exec", Type: audit.TypeCoreTool, Phase: audit.PhaseStarted, Args: bigArgs},
	} {
		if err := l.Log(rec); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), key[:12]) {
		t.Errorf("the key (or its start) is in the audit log:\n%.600s", data)
	}
	recs, err := audit.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(recs[0].Args), "x-api-key: [redacted:llm.providers.anthropic.apiKey]") ||
		recs[1].Error != "401: bad key [redacted:llm.providers.anthropic.apiKey]" {
		t.Errorf("records: %s / %q", recs[0].Args, recs[1].Error)
	}
}
