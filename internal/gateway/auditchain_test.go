package gateway

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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

// BenchmarkToolCallAuditChain: the round trip of a tool call through the
// API (POST /exec, the pipeline with its two audit records, an in-memory
// sandbox so that the audit log's share is not lost in a container's
// noise), with the hash-chained audit log and with a plain one, alternating
// call by call in one run; it reports each p50 and their ratio (issue #16:
// within 5%).
//
//	go test -run '^$' -bench ToolCallAuditChain -benchtime 2000x ./internal/gateway
func BenchmarkToolCallAuditChain(b *testing.B) {
	chained := startGatewayWith(b, gatewaySetup{names: []string{"bench"}})
	plain := startGatewayWith(b, gatewaySetup{names: []string{"bench"}, options: func(o *Options) { o.auditUnchained = true }})
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	defer hc.CloseIdleConnections()
	call := func(g *testGateway) time.Duration {
		t0 := time.Now()
		resp, err := hc.Post(g.URL()+"/api/agents/"+g.agents[0]+"/exec", "application/json",
			strings.NewReader(`{"tool":"exec","params":{"command":"true"}}`))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("exec: %d", resp.StatusCode)
		}
		return time.Since(t0)
	}
	call(chained)
	call(plain)
	var times [2][]time.Duration
	for i := 0; b.Loop(); i++ {
		times[i%2] = append(times[i%2], call([]*testGateway{plain, chained}[i%2]))
	}
	p50 := func(ds []time.Duration) float64 {
		if len(ds) == 0 {
			return 0
		}
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds())
	}
	pp, pc := p50(times[0]), p50(times[1])
	b.ReportMetric(pp, "plain-p50-µs")
	b.ReportMetric(pc, "chained-p50-µs")
	if pp > 0 {
		b.ReportMetric(pc/pp, "ratio")
		fmt.Printf("tool call round trip p50: plain audit %.0f µs, chained %.0f µs, ratio %.3f\n", pp, pc, pc/pp)
	}
}
