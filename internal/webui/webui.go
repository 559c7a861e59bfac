// Package webui is the gateway's web console at /ui: a few static files
// embedded in the binary (plain HTML, CSS and ES modules; no build step),
// the login that turns the token into a cookie, the chat stream, and one
// Server-Sent Events stream (/ui/events) with the audit records and the
// health snapshots. It is served by internal/httpapi, behind the same
// DNS-rebinding and browser guards and the same token as the API.
//
// Everything the page shows may come from an agent (model output, tool
// arguments and output, file names): the page only ever sets textContent,
// and every response carries a strict Content-Security-Policy.
package webui

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/beige-dev/beige/internal/httpapi"
	"github.com/beige-dev/beige/internal/proto"
)

//go:embed assets
var assets embed.FS

// CSP is the Content-Security-Policy of every console response: only the
// gateway's own scripts, styles and connections; no inline script, no
// framing.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Options configures the console. Zero fields are left out of the views.
type Options struct {
	// AuthToken is gateway.authToken; "" means the console opens without
	// a login, like the API (the gateway then listens on loopback only).
	AuthToken string
	// Status is the Agents and health view's snapshot.
	Status func(ctx context.Context) Status
	// Audit is where the Activity view reads the audit records.
	Audit AuditReader
	// Chat runs the Chat view's prompts.
	Chat Chat
	// Approvals are the tool calls that wait for a human's answer, shown
	// as a banner; nil: none. The page answers through POST
	// /api/approvals/{id}.
	Approvals Approvals
	// StatusEvery is how often the health snapshot is taken to see whether
	// it changed (default 1 s); an audit record takes one at once.
	StatusEvery time.Duration
	Logger      *slog.Logger
}

// Approvals lists the calls that wait for approval (the gateway's broker).
type Approvals interface {
	Pending() []proto.ApprovalRequest
	// Changed is closed when the list may have changed.
	Changed() <-chan struct{}
}

// Router is where the console registers its routes: *httpapi.Server.
type Router interface {
	Handle(pattern string, h http.HandlerFunc)
	HandlePublic(method, path string, h http.HandlerFunc)
	RedirectToLogin(path, login string)
}

// UI is the console's handlers.
type UI struct {
	opts Options
	log  *slog.Logger
	fs   fs.FS

	closeOnce sync.Once
	done      chan struct{} // closed by Close: the event streams end

	// The last health snapshot, shared by the event streams: taking one
	// pings the sandbox engine, so it is taken at most about once per
	// StatusEvery however many consoles are open.
	statusMu   sync.Mutex
	statusAt   time.Time
	statusJSON []byte
}

// New returns the console.
func New(opts Options) *UI {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.StatusEvery <= 0 {
		opts.StatusEvery = time.Second
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return &UI{opts: opts, log: opts.Logger, fs: sub, done: make(chan struct{})}
}

// Close ends the event streams, which would otherwise run until the
// browser goes away: the gateway calls it when it stops serving
// (http.Server.RegisterOnShutdown), so that an open console does not hold
// up a shutdown or restart for the whole drain timeout. The browser
// reconnects to the next gateway by itself.
func (u *UI) Close() { u.closeOnce.Do(func() { close(u.done) }) }

// publicAssets are served without the token: what the login page needs.
var publicAssets = []string{"login.html", "login.js", "style.css"}

// Register adds the console's routes to r.
func (u *UI) Register(r Router) {
	r.HandlePublic("GET", "/ui/login", u.loginPage)
	r.HandlePublic("POST", "/ui/login", u.login)
	r.HandlePublic("POST", "/ui/logout", u.logout)
	for _, name := range publicAssets {
		r.HandlePublic("GET", "/ui/assets/"+name, u.asset)
	}
	r.RedirectToLogin("/ui", "/ui/login")
	r.RedirectToLogin("/ui/", "/ui/login")
	r.Handle("GET /ui", u.index)
	r.Handle("GET /ui/{$}", u.index)
	r.Handle("GET /ui/assets/{file}", u.asset)
	r.Handle("GET /ui/events", u.events)
	r.Handle("POST /ui/api/agents/{name}/prompt", u.prompt)
	r.Handle("POST /ui/api/agents/{name}/abort", u.abort)
	r.Handle("POST /ui/api/agents/{name}/new", u.newSession)
	r.Handle("POST /ui/api/agents/{name}/history", u.history)
	r.Handle("POST /ui/api/agents/{name}/thinking", u.thinking)
}

// headers sets what every console response carries.
func headers(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".png":  "image/png",
	".svg":  "image/svg+xml",
}

func (u *UI) serveFile(w http.ResponseWriter, name string, status int) {
	ct, ok := contentTypes[path.Ext(name)]
	b, err := fs.ReadFile(u.fs, name)
	if !ok || err != nil {
		headers(w)
		httpapi.WriteError(w, http.StatusNotFound, "no such console file")
		return
	}
	headers(w)
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (u *UI) asset(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/ui/assets/")
	if name == "" || strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, ".") {
		headers(w)
		httpapi.WriteError(w, http.StatusNotFound, "no such console file")
		return
	}
	u.serveFile(w, name, http.StatusOK)
}

func (u *UI) index(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/ui" {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	u.serveFile(w, "index.html", http.StatusOK)
}

// loginPage serves the login form; without a configured token there is
// nothing to log in with, and it sends the browser on to the console.
func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	if u.opts.AuthToken == "" {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	u.serveFile(w, "login.html", http.StatusOK)
}

// LoginRequest is the body of POST /ui/login.
type LoginRequest struct {
	Token string `json:"token"`
}

// loginDelay slows down guessing: a wrong token is answered after it.
const loginDelay = 500 * time.Millisecond

func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	headers(w)
	var req LoginRequest
	if err := httpapi.DecodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if u.opts.AuthToken == "" {
		httpapi.WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
		return
	}
	if subtle.ConstantTimeCompare([]byte(req.Token), []byte(u.opts.AuthToken)) != 1 {
		u.log.Warn("console login with a wrong token", "remote", r.RemoteAddr)
		select {
		case <-time.After(loginDelay):
		case <-r.Context().Done():
		}
		httpapi.WriteError(w, http.StatusUnauthorized, "wrong token (it is gateway.authToken in config.json5)")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: httpapi.TokenCookie, Value: httpapi.TokenCookieValue(u.opts.AuthToken), Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	httpapi.WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request) {
	headers(w)
	http.SetCookie(w, &http.Cookie{
		Name: httpapi.TokenCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	httpapi.WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func writeErr(w http.ResponseWriter, err error) {
	if pe, ok := err.(*proto.Error); ok {
		httpapi.WriteError(w, pe.Status, pe.Msg)
		return
	}
	httpapi.WriteError(w, http.StatusInternalServerError, err.Error())
}

func writeJSONLine(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
