package tools

import (
	"context"
	"testing"

	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/sandbox"
)

// TestExecCallToken (security issue #10, finding 6): each exec command gets
// a call token registered for its session, valid exactly while it runs.
func TestExecCallToken(t *testing.T) {
	e := newEnv(t, nil)
	live := map[string]proto.SessionContext{}
	e.runner.SetCallTokens(func(agent string, sc proto.SessionContext) (string, func()) {
		tok := "tok-" + sc.SessionKey
		live[tok] = sc
		return tok, func() { delete(live, tok) }
	})
	var during map[string]proto.SessionContext
	e.sb.execFn = func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		during = map[string]proto.SessionContext{}
		for k, v := range live {
			during[k] = v
		}
		return sandbox.ExecResult{}, nil
	}
	e.run(t, &ExecCall{Command: "true"})
	tok := e.sb.execs[0].Env[proto.CallTokenEnv]
	if sc, ok := during[tok]; !ok || sc.SessionKey != "telegram:123:45" || sc.AgentName != "travel" {
		t.Errorf("command got token %q; registered while it ran: %v", tok, during)
	}
	if len(live) != 0 {
		t.Errorf("tokens still registered after the command ended: %v", live)
	}
}
