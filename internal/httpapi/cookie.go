package httpapi

import (
	"encoding/base64"
	"net/http"
)

// TokenCookie is the name of the web console's cookie: it holds the
// gateway's token (base64url, as a token may hold bytes a cookie value
// may not), HttpOnly and SameSite=Strict, set by the console's login.
const TokenCookie = "beige_token"

// CookieTokens returns the tokens in r's console cookies. There can be
// more than one: cookies are not kept apart by port, so another site on the
// same host may have set one too; a caller accepts r when any matches.
func CookieTokens(r *http.Request) []string {
	var toks []string
	for _, c := range r.CookiesNamed(TokenCookie) {
		if b, err := base64.RawURLEncoding.DecodeString(c.Value); err == nil && len(b) > 0 {
			toks = append(toks, string(b))
		}
		if len(toks) == 4 { // bound the work of a request stuffed with cookies
			break
		}
	}
	return toks
}

// TokenCookieValue encodes a token as the value of the console cookie.
func TokenCookieValue(token string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(token))
}
