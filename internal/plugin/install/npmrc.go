package install

import (
	"bytes"
	"encoding/base64"
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
// default registry, per-scope registries and the credentials, keyed by
// npm's "nerf dart" (//host[:port]/path/). It never prints a credential.
type NPMConfig struct {
	// Registry is the default registry ("registry="); empty: DefaultRegistry.
	Registry string
	// Scopes maps "@scope" to its registry ("@scope:registry=").
	Scopes map[string]string
	creds  map[string]*npmCred
	// unscoped are the auth keys written without a //host/ (file: key),
	// which npm 9 and later refuse.
	unscoped [][2]string
}

// npmCred is what one nerf dart's keys say: //…/:_authToken (a bearer
// token), :_auth (base64 of user:password) or :username and :_password
// (the password base64-encoded), as npm reads them.
type npmCred struct {
	token, auth, username, password string
}

// npmAuthKeys are the credential keys, in the order userconfig writes them.
var npmAuthKeys = []string{"_authToken", "_auth", "username", "_password"}

func (k *npmCred) get(key string) string {
	switch key {
	case "_authToken":
		return k.token
	case "_auth":
		return k.auth
	case "username":
		return k.username
	}
	return k.password
}

func (k *npmCred) put(key, val string) {
	switch key {
	case "_authToken":
		k.token = val
	case "_auth":
		k.auth = val
	case "username":
		k.username = val
	default:
		k.password = val
	}
}

// header is the Authorization value the credential gives, as npm chooses:
// the token, else _auth, else username and password; "" when none of them
// is complete (npm then looks further up the path).
func (k *npmCred) header() string {
	switch {
	case k.token != "":
		return "Bearer " + k.token
	case k.auth != "":
		return "Basic " + k.auth
	case k.username != "" && k.password != "":
		pw, ok := decodeNPMPassword(k.password)
		if !ok {
			return ""
		}
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(k.username+":"+pw))
	}
	return ""
}

// decodeNPMPassword decodes _password as npm does (base64, padding
// optional, URL-safe letters too); ok is false for text that is not base64.
func decodeNPMPassword(s string) (string, bool) {
	s = strings.TrimRight(s, "=")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return string(b), true
		}
	}
	return "", false
}

func (c *NPMConfig) String() string {
	keys := make([]string, 0, len(c.creds))
	for k := range c.creds {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return fmt.Sprintf("npm config{registry=%q scopes=%v credentials for %v}", c.Registry, c.Scopes, keys)
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
		c.parse(b, getenv, f)
	}
	for _, k := range []string{"npm_config_registry", "NPM_CONFIG_REGISTRY"} {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			c.Registry = v
			break
		}
	}
	if err := c.unscopedErr(); err != nil {
		return nil, err
	}
	return c, nil
}

// unscopedErr refuses credentials not scoped to a registry, as npm 9 and
// later do (ERR_INVALID_AUTH): older npm sent a bare _auth to whatever
// registry it used; beige sends a credential only to the host and path
// it is written for.
func (c *NPMConfig) unscopedErr() error {
	if len(c.unscoped) == 0 {
		return nil
	}
	reg := DefaultRegistry
	if c.Registry != "" {
		reg = c.Registry
	}
	nerf := "//<registry host>/"
	if u, err := url.Parse(reg); err == nil && u.Host != "" {
		nerf = nerfDart(u.JoinPath("x"))
	}
	var msgs []string
	for _, fk := range c.unscoped {
		key := fk[1]
		if key == "_authtoken" || key == "-authtoken" {
			key = "_authToken"
		}
		msgs = append(msgs, fmt.Sprintf("%s: %s is not scoped to a registry: write it as %s:%s (npm 9 and later refuse it too; `npm config fix` rewrites it)", fk[0], fk[1], nerf, key))
	}
	return fmt.Errorf("npm config: %s", strings.Join(msgs, "; "))
}

// ParseNPMRC parses .npmrc text (ini, as npm reads it). Credentials not
// scoped to a registry are left out (LoadNPMConfig refuses them).
func ParseNPMRC(data []byte, getenv func(string) string) *NPMConfig {
	c := &NPMConfig{}
	c.parse(data, getenv, ".npmrc")
	return c
}

func (c *NPMConfig) parse(data []byte, getenv func(string) string, file string) {
	inSection := false
	// npm reads the file as UTF-8 text: a byte that is not UTF-8 is the
	// replacement character, as it is in what the userconfig carries.
	data = bytes.ToValidUTF8(data, []byte("\uFFFD"))
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
		if slices.Contains(npmAuthKeys, key) || key == "_authtoken" || key == "-authtoken" {
			if strings.TrimSpace(val) != "" {
				c.unscoped = append(c.unscoped, [2]string{file, key})
			}
			continue
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
	case strings.HasPrefix(key, "//"):
		i := strings.LastIndexByte(key, ':')
		if i < 0 || !slices.Contains(npmAuthKeys, key[i+1:]) {
			return
		}
		host, p, _ := strings.Cut(key[2:i], "/")
		if host == "" || val == "" {
			return
		}
		if c.creds == nil {
			c.creds = map[string]*npmCred{}
		}
		nerf := "//" + strings.ToLower(host) + "/" + p
		k := c.creds[nerf]
		if k == nil {
			k = &npmCred{}
			c.creds[nerf] = k
		}
		k.put(key[i+1:], val)
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
		v := strings.ToValidUTF8(getenv(name), "\uFFFD") // as Node sees it
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

// authFor is the Authorization header to send with a request to u: the
// credential configured for the longest //host[:port]/path prefix of u
// that has a complete one (npm's matching: drop a trailing slash or a last
// segment at a time, never the host). None for another host, or for a URL
// outside the configured path.
func (c *NPMConfig) authFor(u *url.URL) string {
	if len(c.creds) == 0 || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	key := nerfDart(u)
	hostEnd := 2 + strings.IndexByte(key[2:], '/')
	for len(key) >= hostEnd {
		if k, ok := c.creds[key]; ok {
			if h := k.header(); h != "" {
				return h
			}
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
// registries and credentials beige fetched with.
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
	keys := make([]string, 0, len(c.creds))
	for k := range c.creds {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, name := range npmAuthKeys {
			if v := c.creds[k].get(name); v != "" {
				fmt.Fprintf(&b, "%s:%s=%s\n", k, name, iniValue(v))
			}
		}
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

// scrub removes the credentials from text (npm's output) before it is
// shown: tokens, _auth, passwords as written and decoded, and the Basic
// values they make.
func (c *NPMConfig) scrub(s string) string {
	for _, k := range c.creds {
		secrets := []string{k.token, k.auth, k.password}
		if pw, ok := decodeNPMPassword(k.password); ok {
			secrets = append(secrets, pw)
		}
		if h, ok := strings.CutPrefix(k.header(), "Basic "); ok {
			secrets = append(secrets, h)
		}
		for _, t := range secrets {
			if t != "" {
				s = strings.ReplaceAll(s, t, "***")
			}
		}
	}
	return s
}
