package httpapi

import (
	"net/url"
	"strings"
)

// PublicURL is what the API shows of a configured URL (a provider's
// baseUrl): scheme://host[:port]/path and nothing else. The user:password
// of its userinfo, its query (?key=…) and its fragment can hold secrets and
// are never echoed; a URL that does not parse as an absolute one is shown
// as "". Every URL that leaves the API goes through it.
func PublicURL(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Opaque != "" || u.Scheme == "" || u.Host == "" {
		return ""
	}
	pub := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return pub.String()
}
