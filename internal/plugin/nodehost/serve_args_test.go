package nodehost

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/plugin"
)

// TestBadArgumentsNameTheMethod: arguments a ctx method does not take are
// refused, before anything is done, with an error that starts
// "ctx.<method>: bad arguments:", for every method.
func TestBadArgumentsNameTheMethod(t *testing.T) {
	p := &Plugin{env: plugin.Env{Name: "p"}, log: slog.New(slog.DiscardHandler), pc: &fakeContext{}}
	for _, op := range []string{
		"getChannel", "channel.sendTo", "prompt", "newSession", "getSessionSettings", "updateSessionSettings",
		"clearSessionSettings", "isSessionActive", "getRegisteredTools", "abortSession", "compactSession",
		"listSessions", "listSessionKeys", "getSessionEntry", "createSession", "setSessionMetadata",
		"getSessionMetadata", "getSessionModel", "persistSessionModel", "getModelHealth", "clearModelHealth",
		"disposeSession", "getSessionUsage", "getModel", "clearSessionModel", "invokeTool",
	} {
		_, err := p.serve(context.Background(), op, json.RawMessage(`{"planted":1}`), nil)
		if want := "ctx." + op + ": bad arguments: "; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: error %v, want it to start %q", op, err, want)
		}
	}
}
