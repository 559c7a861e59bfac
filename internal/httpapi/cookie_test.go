package httpapi

import (
	"net/http"
	"testing"
)

// TestConsoleCookieIsTheToken: the console's cookie opens the API exactly
// as the bearer token does, and nothing more: a wrong or garbled cookie is
// refused, a cross-site request with the right one is refused, and a
// public route needs no token but keeps the browser guard.
func TestConsoleCookieIsTheToken(t *testing.T) {
	s := New(&stub{}, Options{AuthToken: "tok"})
	s.HandlePublic("GET", "/ui/login", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	s.RedirectToLogin("/ui/", "/ui/login")
	s.Handle("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	good := TokenCookie + "=" + TokenCookieValue("tok")
	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
		want               int
	}{
		{"cookie", "GET", "/api/agents", map[string]string{"Cookie": good}, http.StatusOK},
		{"bearer", "GET", "/api/agents", map[string]string{"Authorization": "Bearer tok"}, http.StatusOK},
		{"wrong cookie", "GET", "/api/agents", map[string]string{"Cookie": TokenCookie + "=" + TokenCookieValue("tak")}, http.StatusUnauthorized},
		{"raw token as cookie", "GET", "/api/agents", map[string]string{"Cookie": TokenCookie + "=tok"}, http.StatusUnauthorized},
		{"prefix of the token", "GET", "/api/agents", map[string]string{"Cookie": TokenCookie + "=" + TokenCookieValue("to")}, http.StatusUnauthorized},
		{"other cookie name", "GET", "/api/agents", map[string]string{"Cookie": "token=" + TokenCookieValue("tok")}, http.StatusUnauthorized},
		{"planted one and the right one", "GET", "/api/agents", map[string]string{"Cookie": TokenCookie + "=" + TokenCookieValue("x") + "; " + good}, http.StatusOK},
		{"wrong bearer beats a right cookie", "GET", "/api/agents", map[string]string{"Authorization": "Bearer nope", "Cookie": good}, http.StatusUnauthorized},
		{"cross-site with the cookie", "POST", "/api/agents/assistant/prompt", map[string]string{"Cookie": good, "Origin": "http://evil.example"}, http.StatusForbidden},
		{"cross-site fetch with the cookie", "GET", "/api/agents", map[string]string{"Cookie": good, "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"public route without a token", "GET", "/ui/login", nil, http.StatusOK},
		{"public route is exact", "GET", "/ui/login/x", nil, http.StatusUnauthorized},
		{"public route only for its method", "POST", "/ui/login", nil, http.StatusUnauthorized},
		{"public route escaped", "GET", "/ui%2Flogin", nil, http.StatusUnauthorized},
		{"public route keeps the browser guard", "GET", "/ui/login", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"page without a token goes to its login", "GET", "/ui/", nil, http.StatusSeeOther},
		{"page with the cookie", "GET", "/ui/", map[string]string{"Cookie": good}, http.StatusOK},
	} {
		code, body := do(t, s, tc.method, tc.path, "", tc.hdr)
		if code != tc.want {
			t.Errorf("%s: %s %s: %d %s, want %d", tc.name, tc.method, tc.path, code, body, tc.want)
		}
	}
}
