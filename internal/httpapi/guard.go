package httpapi

import (
	"mime"
	"net/http"
	"strings"
)

// The browser guard. A web page on any site can make the user's browser
// send "simple" requests to the gateway (a text/plain or form POST needs no
// CORS preflight), so the API refuses what only a browser driven by another
// site would send:
//
//   - a Sec-Fetch-Site other than "same-origin" or "none";
//   - an Origin other than the gateway's own (the scheme and the Host the
//     request came to, which has passed the DNS-rebinding guard), "null"
//     included;
//   - a Content-Type other than application/json, and a body without one.
//
// Clients that are not browsers (curl, the beige CLI and TUI) send neither
// Origin nor Sec-Fetch-Site, and send bodies as application/json; a POST
// without a body and without a Content-Type (curl -X POST) is fine. The API
// never sends Access-Control-Allow-* headers, so a browser cannot read a
// cross-origin response either.

// crossSite reports why r looks like a request made by a page of another
// site, or "" when it does not.
func crossSite(r *http.Request) string {
	if v := r.Header.Values("Sec-Fetch-Site"); len(v) > 0 {
		if len(v) > 1 || (v[0] != "same-origin" && v[0] != "none") {
			return "Sec-Fetch-Site " + strings.Join(v, ",")
		}
	}
	if v := r.Header.Values("Origin"); len(v) > 0 {
		if len(v) > 1 || !sameOrigin(v[0], r) {
			return "Origin " + strings.Join(v, ",")
		}
	}
	return ""
}

// sameOrigin reports whether origin is the origin the request was sent to.
// A browser serializes an Origin as scheme://host[:port], nothing more, and
// sends the same host[:port] as Host.
func sameOrigin(origin string, r *http.Request) bool {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return r.Host != "" && strings.EqualFold(origin, scheme+r.Host)
}

// badContentType reports why r's body is not acceptable, or "" when it is:
// a Content-Type, when sent, must be application/json (parameters such as
// charset allowed), and a body needs one.
func badContentType(r *http.Request) string {
	ct := r.Header.Values("Content-Type")
	if len(ct) == 0 {
		if r.ContentLength != 0 { // a body, or a chunked one of unknown length
			return "a request body needs Content-Type: application/json"
		}
		return ""
	}
	if len(ct) > 1 {
		return "more than one Content-Type"
	}
	mt, _, err := mime.ParseMediaType(ct[0])
	if err != nil || mt != "application/json" {
		return "this Content-Type is not accepted (send application/json)"
	}
	return ""
}
