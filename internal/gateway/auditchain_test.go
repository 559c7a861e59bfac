package gateway

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/beige-dev/beige/internal/audit"
)

// 1,000 tool calls at once through the API: the audit log's chain holds
// with exactly their records, in order, and the head says where it ends
// (issue #16). The client keeps 200 connections (the API caps them at
// 256, and at the cap a new connection closes one still sending its
// request), so up to 200 calls run in the gateway at once.
func TestAuditChainUnderConcurrentToolCalls(t *testing.T) {
	g := startGateway(t, "chain")
	a := g.agents[0]
	const calls = 1000
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 200, MaxIdleConnsPerHost: 200}}
	defer hc.CloseIdleConnections()
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for i := range calls {
		wg.Go(func() {
			body := fmt.Sprintf(`{"tool":"exec","params":{"command":"echo %d"}}`, i)
			resp, err := hc.Post(g.URL()+"/api/agents/"+a+"/exec", "application/json", strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(data), fmt.Sprintf("Exit code: 0\\n%d", i)) {
				errs <- fmt.Errorf("call %d: %d %s", i, resp.StatusCode, data)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := g.Shutdown(t.Context()); err != nil { // Close writes the head
		t.Fatal(err)
	}
	recs, err := audit.ReadFile(g.home.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	execs := 0
	for _, r := range recs {
		if r.Tool == "exec" && r.Agent == a {
			execs++
		}
	}
	if execs != 2*calls {
		t.Errorf("%d exec records, want %d (started and finished of each call)", execs, 2*calls)
	}
	rep, err := audit.Verify(g.home.AuditLog(), &audit.VerifyOptions{HeadPath: g.home.AuditHead()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Break != nil {
		t.Fatalf("chain broken: %s", rep.Break)
	}
	if rep.Records != int64(len(recs)) || rep.Last.Seq != int64(len(recs)) || rep.Head == nil || rep.Head.Seq != rep.Last.Seq {
		t.Errorf("verify: %d records, last seq %d, head %+v; the log has %d", rep.Records, rep.Last.Seq, rep.Head, len(recs))
	}
}
