package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/metrics"
)

// TestMetricsGuarded: /metrics, on the API and on its own listener, is
// behind the same token, DNS-rebinding and browser guards as the API.
func TestMetricsGuarded(t *testing.T) {
	m := metrics.New()
	for name, s := range map[string]http.Handler{
		"api":      New(&stub{}, Options{Host: "127.0.0.1", AuthToken: "s3cret", Metrics: m}),
		"listener": NewMetrics(Options{Host: "127.0.0.1", AuthToken: "s3cret", Metrics: m}),
	} {
		for _, tc := range []struct {
			target string
			hdr    map[string]string
			code   int
		}{
			{"/metrics", map[string]string{}, 401},
			{"/metrics", map[string]string{"Authorization": "Bearer wrong"}, 401},
			{"http://evil.example:7433/metrics", map[string]string{"Authorization": "Bearer s3cret"}, 403},
			{"/metrics", map[string]string{"Authorization": "Bearer s3cret", "Origin": "http://evil.example"}, 403},
			{"/metrics", map[string]string{"Authorization": "Bearer s3cret"}, 200},
		} {
			code, body := do(t, s, "GET", tc.target, "", tc.hdr)
			if code != tc.code {
				t.Errorf("%s %v: %d, want %d", name, tc.hdr, code, tc.code)
			}
			if code == 200 && !strings.Contains(body, "# TYPE beige_http_requests_total counter") {
				t.Errorf("%s: no exposition: %.300s", name, body)
			}
		}
	}
	// The metrics listener serves nothing else.
	s := NewMetrics(Options{Host: "127.0.0.1", Metrics: m})
	if code, _ := do(t, s, "GET", "/api/agents", "", nil); code != 404 {
		t.Errorf("GET /api/agents on the metrics listener: %d, want 404", code)
	}
}

// TestHTTPRequestsByRoute: requests are counted by the route pattern
// that served them and their status, never by the raw path, whatever a
// client puts in it.
func TestHTTPRequestsByRoute(t *testing.T) {
	m := metrics.New()
	s := New(&stub{}, Options{Host: "127.0.0.1", Metrics: m})
	do(t, s, "GET", "/api/health", "", nil)
	do(t, s, "GET", "/api/health", "", nil)
	do(t, s, "POST", "/api/agents/assistant/exec", `{"tool":"read","params":{"path":"a"}}`, nil)
	do(t, s, "POST", "/api/agents/nobody-0123/exec", `{"tool":"read","params":{"path":"a"}}`, nil)
	do(t, s, "GET", "/secret/path/abc123", "", nil)
	do(t, s, "GET", "http://evil.example/api/health", "", nil)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1/metrics", nil))
	text := rec.Body.String()
	for _, l := range []string{
		`beige_http_requests_total{route="GET /api/health",status="200"} 2`,
		`beige_http_requests_total{route="POST /api/agents/{name}/exec",status="200"} 1`,
		`beige_http_requests_total{route="POST /api/agents/{name}/exec",status="404"} 1`,
		`beige_http_requests_total{route="/",status="404"} 1`,
		`beige_http_requests_total{route="none",status="403"} 1`,
	} {
		if !strings.Contains(text, l+"\n") {
			t.Errorf("missing %q", l)
		}
	}
	for _, raw := range []string{"nobody-0123", "abc123", "evil"} {
		if strings.Contains(text, raw) {
			t.Errorf("a raw path or host became a label value: %q", raw)
		}
	}
}
