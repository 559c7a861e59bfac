package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkExecRoundTrip is one exec call over a kept-alive loopback
// connection, as the TUI makes them: what the server's guards cost.
func BenchmarkExecRoundTrip(b *testing.B) {
	_, addr := serve(b, &stub{}, ServeOptions{})
	c := &http.Client{}
	body := `{"tool":"exec","params":{"command":"ls"}}`
	for b.Loop() {
		resp, err := c.Post("http://"+addr+"/api/agents/assistant/exec", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
