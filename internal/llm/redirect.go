package llm

import (
	"fmt"
	"net/http"
)

// NoRedirects returns a copy of hc that follows no redirect: the request
// ends with an error naming where the provider sent it. The providers'
// clients carry the API key (and configured extra headers) on every
// request, and net/http keeps custom headers such as x-api-key when it
// follows a redirect to another host; a base URL that redirects is a
// misconfiguration or an attack, never a reason to send the key elsewhere.
func NoRedirects(hc *http.Client) *http.Client {
	c := *hc
	c.CheckRedirect = RefuseRedirect
	return &c
}

// RefuseRedirect is an http.Client CheckRedirect that refuses every
// redirect (see NoRedirects).
func RefuseRedirect(req *http.Request, via []*http.Request) error {
	from := ""
	if len(via) > 0 {
		from = via[len(via)-1].URL.Redacted()
	}
	return fmt.Errorf("llm: %s answered with a redirect to %s: not followed (the API key would go with it)", from, req.URL.Redacted())
}
