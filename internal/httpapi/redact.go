package httpapi

import (
	"net/url"
	"regexp"
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

// urlPattern finds URLs in text: a scheme, "://" and what follows up to a
// space or a quote.
var urlPattern = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>\x60]+`)

// redactURLs replaces every URL in msg (an error from a provider's client
// quotes the URL it called) by its PublicURL, or by "[url]".
func redactURLs(msg string) string {
	if !strings.Contains(msg, "://") {
		return msg
	}
	return urlPattern.ReplaceAllStringFunc(msg, func(u string) string {
		if pub := PublicURL(u); pub != "" {
			return pub
		}
		return "[url]"
	})
}
