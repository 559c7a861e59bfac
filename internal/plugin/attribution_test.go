package plugin

import (
	"context"
	"testing"

	"github.com/beige-dev/beige/internal/proto"
)

// TestHandleUnattributed (security issue #10, finding 6): a call the
// toolbridge could not attribute to a session is audited as unattributed,
// and the tool gets only the agent; an attributed one is audited with its
// session.
func TestHandleUnattributed(t *testing.T) {
	f := newFixture(t, nil)
	r := req("echo", "a")
	r.SessionContext = &proto.SessionContext{AgentName: "travel"}
	r.Unattributed = true
	f.host.Handle(context.Background(), "travel", r)
	recs := f.records(t)
	for _, rec := range recs[len(recs)-2:] {
		if !rec.Unattributed || rec.Session != "" || rec.Channel != "" {
			t.Errorf("unattributed call audited as %+v", rec)
		}
	}
	if call := f.rec.calls[len(f.rec.calls)-1]; call.Session != (proto.SessionContext{AgentName: "travel"}) {
		t.Errorf("tool got session %+v", call.Session)
	}

	sc := proto.ParseSessionKey("travel", "telegram:1:2")
	r = req("echo", "b")
	r.SessionContext = &sc
	f.host.Handle(context.Background(), "travel", r)
	recs = f.records(t)
	if rec := recs[len(recs)-1]; rec.Unattributed || rec.Session != "telegram:1:2" || rec.Channel != "telegram" {
		t.Errorf("attributed call audited as %+v", rec)
	}
}
