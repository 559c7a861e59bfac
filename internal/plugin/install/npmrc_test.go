package install

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestNPMRCParse(t *testing.T) {
	env := map[string]string{"TOK": "s3cret", "HOST": "r.example"}
	c := ParseNPMRC([]byte(strings.Join([]string{
		"; comment",
		"# comment",
		"registry = https://default.example/ ; trailing comment",
		"@acme:registry=https://${HOST}/npm/",
		"//${HOST}/npm/:_authToken=${TOK}",
		"//R.Example:8443/:_authToken=\"quoted#token\"",
		"//unset.example/:_authToken=${NOPE}",
		"//optional.example/:_authToken=${NOPE?}",
		"//esc.example/:_authToken=\\${TOK}",
		"bad:registry=https://x/",
		"[section]",
		"registry=https://insection.example/",
	}, "\r\n")), func(k string) string { return env[k] })
	if c.Registry != "https://default.example/" || c.Scopes["@acme"] != "https://r.example/npm/" || len(c.Scopes) != 1 {
		t.Fatalf("parsed %v", c)
	}
	for _, tc := range []struct{ url, token string }{
		{"https://r.example/npm/@acme%2fkit", "s3cret"},
		{"http://r.example/npm/-/kit-1.0.0.tgz", "s3cret"}, // npm ignores the scheme
		{"https://r.example:443/npm/x", "s3cret"},          // the default port is no port
		{"https://user:pw@r.example/npm/x?q#f", "s3cret"},
		{"https://r.example/npm", ""},     // above the configured path
		{"https://r.example/npmx/y", ""},  // a sibling path
		{"https://r.example/other/x", ""}, // another path on the host
		{"https://r.example:8443/a/b", "quoted#token"},
		{"https://r.example:8444/npm/x", ""}, // another port
		{"https://evil.r.example/npm/x", ""}, // a subdomain
		{"https://r.example.evil/npm/x", ""},
		{"https://unset.example/x", "${NOPE}"}, // npm leaves unset variables as written
		{"https://optional.example/x", ""},     // ${NOPE?} is empty: no token
		{"https://esc.example/x", "${TOK}"},
		{"ftp://r.example/npm/x", ""},
	} {
		u, _ := url.Parse(tc.url)
		if got := c.tokenFor(u); got != tc.token {
			t.Errorf("token for %s = %q, want %q", tc.url, got, tc.token)
		}
	}
	if s := c.String() + c.GoString(); strings.Contains(s, "s3cret") || strings.Contains(s, "quoted#token") {
		t.Fatalf("String prints a token: %s", s)
	}
}

func TestLoadNPMConfigPrecedence(t *testing.T) {
	home, user := t.TempDir(), filepath.Join(t.TempDir(), "npmrc")
	writeFiles(t, filepath.Dir(user), map[string]string{"npmrc": "registry=https://user.example/\n@a:registry=https://user-a.example/\n@b:registry=https://user-b.example/\n//user.example/:_authToken=u\n"})
	writeFiles(t, home, map[string]string{".npmrc": "@a:registry=https://home-a.example/\n"})
	env := map[string]string{"npm_config_userconfig": user}
	c, err := LoadNPMConfig(home, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("https://user.example/p")
	if c.Registry != "https://user.example/" || c.Scopes["@a"] != "https://home-a.example/" || c.Scopes["@b"] != "https://user-b.example/" || c.tokenFor(u) != "u" {
		t.Fatalf("loaded %v", c)
	}
	env["NPM_CONFIG_REGISTRY"] = "https://env.example/"
	if c, _ = LoadNPMConfig(home, func(k string) string { return env[k] }); c.Registry != "https://env.example/" {
		t.Fatalf("env registry: %v", c)
	}
}

// privateRegistry requires the token on every request; its tarballs live on
// a second server (a CDN), one of them behind a redirect from the registry.
type privateRegistry struct {
	reg, cdn *httptest.Server
	mu       sync.Mutex
	cdnAuth  []string // Authorization headers the CDN saw
	regAuth  []string
}

func newPrivateRegistry(t *testing.T, token string, tarballs map[string][]byte) *privateRegistry {
	p := &privateRegistry{}
	p.cdn = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.cdnAuth = append(p.cdnAuth, r.Header.Get("Authorization"))
		p.mu.Unlock()
		b, ok := tarballs[strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/t/"), ".tgz")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(p.cdn.Close)
	p.reg = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.regAuth = append(p.regAuth, r.Header.Get("Authorization"))
		p.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "auth required", http.StatusUnauthorized)
			return
		}
		if v, ok := strings.CutPrefix(r.URL.Path, "/npm/redirect/"); ok {
			http.Redirect(w, r, p.cdn.URL+"/t/"+v, http.StatusFound)
			return
		}
		if r.URL.EscapedPath() != "/npm/@acme%2fkit" {
			http.NotFound(w, r)
			return
		}
		versions := map[string]any{}
		for v, b := range tarballs {
			tb := p.cdn.URL + "/t/" + v + ".tgz"
			if v == "2.0.0" {
				tb = p.reg.URL + "/npm/redirect/" + v + ".tgz"
			}
			versions[v] = map[string]any{"version": v, "dist": map[string]any{"tarball": tb, "integrity": sri(b)}}
		}
		json.NewEncoder(w).Encode(map[string]any{"name": "@acme/kit", "dist-tags": map[string]string{"latest": "2.0.0"}, "versions": versions})
	}))
	t.Cleanup(p.reg.Close)
	return p
}

func TestInstallPrivateRegistryTokenOnlyToItsHost(t *testing.T) {
	const token = "npm_s3cretT0ken"
	dir, cfg, _ := testHome(t)
	p := newPrivateRegistry(t, token, map[string][]byte{"1.0.0": kitTgz(t, "1.0.0"), "2.0.0": kitTgz(t, "2.0.0")})
	regHost := strings.TrimPrefix(p.reg.URL, "http://")
	writeFiles(t, dir, map[string]string{".npmrc": "@acme:registry=" + p.reg.URL + "/npm/\n//" + regHost + "/npm/:_authToken=${MY_TOKEN}\n"})
	env := map[string]string{"MY_TOKEN": token, "npm_config_userconfig": filepath.Join(dir, "none")}
	npmrc, err := LoadNPMConfig(dir, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	for _, version := range []string{"1.0.0", "2.0.0"} { // 2.0.0: the registry redirects to the CDN
		in := newInstaller(dir, cfg, true, func(o *Options) {
			o.NPMRC, o.Registry, o.Progress = npmrc, "http://127.0.0.1:9/", &Progress{W: &log}
		})
		out, err := in.Install(context.Background(), mustParse(t, "npm:@acme/kit@"+version), nil)
		if err != nil || out[0].Version != version {
			t.Fatalf("install %s from the private registry: %+v %v", version, out, err)
		}
	}
	p.mu.Lock()
	cdnAuth, regAuth := p.cdnAuth, p.regAuth
	p.mu.Unlock()
	if len(cdnAuth) != 2 || cdnAuth[0] != "" || cdnAuth[1] != "" {
		t.Fatalf("the tarball server on another host saw Authorization %q; want none", cdnAuth)
	}
	for _, a := range regAuth {
		if a != "Bearer "+token {
			t.Fatalf("the registry saw Authorization %q", a)
		}
	}
	data, _ := os.ReadFile(cfg)
	if strings.Contains(string(data), token) || strings.Contains(log.String(), token) {
		t.Fatalf("the token leaked into config.json5 or the log:\n%s\n%s", data, log.String())
	}

	// Without the token: a plain refusal that names the host, and no token.
	in := newInstaller(dir, cfg, true, func(o *Options) { o.NPMRC = &NPMConfig{Scopes: npmrc.Scopes} })
	_, err = in.Install(context.Background(), mustParse(t, "npm:@acme/kit"), nil)
	if err == nil || !strings.Contains(err.Error(), "registry at "+regHost+" refused access (401") {
		t.Fatalf("no token: %v", err)
	}
}

// FuzzParseNPMRC: any .npmrc parses; what it yields has no line breaks (it is
// written back as a userconfig) and reads back the same.
func FuzzParseNPMRC(f *testing.F) {
	for _, s := range []string{"registry=https://r/\n@a:registry=https://a/\n//r/:_authToken=${T}\n", "[x]\nk=v", "//h:1/p/:_authToken=\"a;b\" ; c", "\\${T}"} {
		f.Add(s)
	}
	env := func(k string) string {
		if k == "T" {
			return "tok\nregistry=https://evil/"
		}
		return "v"
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := ParseNPMRC([]byte(s), env)
		uc := c.userconfig("https://d/")
		again := ParseNPMRC(uc, env)
		if strings.Count(string(uc), "\n") != 1+len(c.Scopes)+len(c.tokens) {
			t.Fatalf("%q: userconfig has extra lines:\n%s", s, uc)
		}
		if again.Registry != "https://d/" || !maps.Equal(again.Scopes, c.Scopes) || !maps.Equal(again.tokens, c.tokens) {
			t.Fatalf("%q: userconfig %q reads back as %v", s, uc, again)
		}
	})
}
