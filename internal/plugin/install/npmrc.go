package install

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// NPMConfig is the registry part of the user's npm configuration: the
// default registry, per-scope registries and the auth tokens, keyed by
// npm's "nerf dart" (//host[:port]/path/). It never prints a token.
type NPMConfig struct {
	// Registry is the default registry ("registry="); empty: DefaultRegistry.
	Registry string
	// Scopes maps "@scope" to its registry ("@scope:registry=").
	Scopes map[string]string
	tokens map[string]string
}

func (c *NPMConfig) String() string {
	keys := make([]string, 0, len(c.tokens))
	for k := range c.tokens {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return fmt.Sprintf("npm config{registry=%q scopes=%v tokens for %v}", c.Registry, c.Scopes, keys)
}

// GoString keeps %#v from printing the tokens.
func (c *NPMConfig) GoString() string { return c.String() }

// LoadNPMConfig reads the user's .npmrc (npm_config_userconfig, or
// ~/.npmrc), then home/.npmrc ($BEIGE_HOME's wins), then the
// npm_config_registry / NPM_CONFIG_REGISTRY environment variable (wins over
// both, as it does for npm). ${VAR} in keys and values expands as npm does.
// A missing file is no error.
func LoadNPMConfig(home string, getenv func(string) string) (*NPMConfig, error) {
	c := &NPMConfig{}
	user := getenv("npm_config_userconfig")
	if user == "" {
		user = getenv("NPM_CONFIG_USERCONFIG")
	}
	if user == "" {
		if h, err := os.UserHomeDir(); err == nil {
			user = filepath.Join(h, ".npmrc")
		}
	}
	files := []string{user}
	if home != "" {
		files = append(files, filepath.Join(home, ".npmrc"))
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read npm config %s: %w", f, err)
		}
		c.parse(b, getenv)
	}
	for _, k := range []string{"npm_config_registry", "NPM_CONFIG_REGISTRY"} {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			c.Registry = v
			break
		}
	}
	return c, nil
}

// ParseNPMRC parses .npmrc text (ini, as npm reads it).
func ParseNPMRC(data []byte, getenv func(string) string) *NPMConfig {
	c := &NPMConfig{}
	c.parse(data, getenv)
	return c
}

func (c *NPMConfig) parse(data []byte, getenv func(string) string) {
	inSection := false
	for _, line := range bytes.Split(data, []byte("\n")) {
		l := strings.TrimSpace(strings.TrimSuffix(string(line), "\r"))
		if l == "" || l[0] == ';' || l[0] == '#' {
			continue
		}
		if l[0] == '[' && strings.HasSuffix(l, "]") {
			inSection = true // npm ignores keys inside [sections]
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok || inSection {
			continue
		}
		key := envReplace(strings.TrimSpace(unquoteINI(strings.TrimSpace(k))), getenv)
		val := envReplace(unquoteINI(strings.TrimSpace(v)), getenv)
		if strings.ContainsFunc(key+val, isControl) || strings.ContainsAny(key, "=;#\"'\\ \t") {
			continue // could not be written back to a userconfig line
		}
		c.set(key, strings.TrimSpace(val))
	}
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func (c *NPMConfig) set(key, val string) {
	switch {
	case key == "registry":
		c.Registry = val
	case strings.HasPrefix(key, "@") && strings.HasSuffix(key, ":registry"):
		scope := strings.TrimSuffix(key, ":registry")
		if validNPMName(scope+"/x") != nil {
			return
		}
		if c.Scopes == nil {
			c.Scopes = map[string]string{}
		}
		c.Scopes[scope] = val
	case strings.HasPrefix(key, "//") && strings.HasSuffix(key, ":_authToken"):
		nerf := strings.TrimSuffix(key, ":_authToken")
		host, p, _ := strings.Cut(nerf[2:], "/")
		if host == "" || val == "" {
			return
		}
		if c.tokens == nil {
			c.tokens = map[string]string{}
		}
		c.tokens["//"+strings.ToLower(host)+"/"+p] = val
	}
}

// unquoteINI takes a value as npm's ini does: "…" or '…' quoted as is, else
// up to an unescaped ; or #.
func unquoteINI(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == s[0] {
		var v string
		if json.Unmarshal([]byte(s), &v) == nil {
			return v
		}
		return s
	}
	var b strings.Builder
	esc := false
	for _, r := range s {
		switch {
		case esc:
			if !strings.ContainsRune(`\;#`, r) {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
			esc = false
		case r == '\\':
			esc = true
		case r == ';' || r == '#':
			return strings.TrimSpace(b.String())
		default:
			b.WriteRune(r)
		}
	}
	if esc {
		b.WriteByte('\\')
	}
	return strings.TrimSpace(b.String())
}

var envRef = regexp.MustCompile(`(\\*)\$\{([^${}?]+)(\?)?\}`)

// envReplace expands ${NAME} as npm does: an unset NAME stays as written,
// ${NAME?} becomes empty, \${NAME} is literal.
func envReplace(s string, getenv func(string) string) string {
	return envRef.ReplaceAllStringFunc(s, func(m string) string {
		g := envRef.FindStringSubmatch(m)
		esc, name, opt := g[1], g[2], g[3]
		if len(esc)%2 == 1 {
			return m[(len(esc)+1)/2:]
		}
		v := getenv(name)
		if v == "" && opt == "" {
			v = m[len(esc):]
		}
		return esc[:len(esc)/2] + v
	})
}

// registryFor is the registry a package is fetched from: its scope's, or
// the default.
func (c *NPMConfig) registryFor(pkg, def string) string {
	if scope, _, ok := strings.Cut(pkg, "/"); ok && strings.HasPrefix(scope, "@") {
		if r := c.Scopes[scope]; r != "" {
			return r
		}
	}
	return def
}

// nerfDart is npm's key of a URL: //host[:port]/dir/ — no scheme, user,
// query or fragment, the last path segment dropped, a default port too.
func nerfDart(u *url.URL) string {
	host := strings.ToLower(u.Hostname())
	if p := u.Port(); p != "" && !(u.Scheme == "https" && p == "443") && !(u.Scheme == "http" && p == "80") {
		host = net.JoinHostPort(host, p)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	dir := u.EscapedPath()
	if i := strings.LastIndexByte(dir, '/'); i >= 0 {
		dir = dir[:i+1]
	} else {
		dir = "/"
	}
	return "//" + host + dir
}

// tokenFor is the token to send with a request to u: the one configured for
// the longest //host[:port]/path prefix of u (npm's matching: drop a
// trailing slash or a last segment at a time, never the host). None for
// another host, or for a URL outside the configured path.
func (c *NPMConfig) tokenFor(u *url.URL) string {
	if len(c.tokens) == 0 || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	key := nerfDart(u)
	hostEnd := 2 + strings.IndexByte(key[2:], '/')
	for len(key) >= hostEnd {
		if t, ok := c.tokens[key]; ok {
			return t
		}
		if strings.HasSuffix(key, "/") {
			key = key[:len(key)-1]
		} else {
			key = key[:strings.LastIndexByte(key, '/')+1]
		}
	}
	return ""
}

// userconfig is the .npmrc given to `npm install` (--userconfig): the same
// registries and tokens beige fetched with.
func (c *NPMConfig) userconfig(registry string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "registry=%s\n", iniValue(registry))
	scopes := make([]string, 0, len(c.Scopes))
	for s := range c.Scopes {
		scopes = append(scopes, s)
	}
	slices.Sort(scopes)
	for _, s := range scopes {
		fmt.Fprintf(&b, "%s:registry=%s\n", s, iniValue(c.Scopes[s]))
	}
	keys := make([]string, 0, len(c.tokens))
	for k := range c.tokens {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s:_authToken=%s\n", k, iniValue(c.tokens[k]))
	}
	return b.Bytes()
}

// iniValue writes v so that npm's ini reads it back as is: JSON-quoted
// when it has a comment, quote or escape character or outer spaces.
func iniValue(v string) string {
	if !strings.ContainsAny(v, ";#\"'\\") && strings.TrimSpace(v) == v {
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// scrub removes the tokens from text (npm's output) before it is shown.
func (c *NPMConfig) scrub(s string) string {
	for _, t := range c.tokens {
		s = strings.ReplaceAll(s, t, "***")
	}
	return s
}
