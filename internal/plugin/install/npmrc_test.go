package install

import (
	"bytes"
	"context"
	"encoding/base64"
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
		want := tc.token
		if want != "" {
			want = "Bearer " + want
		}
		if got := c.authFor(u); got != want {
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
	if c.Registry != "https://user.example/" || c.Scopes["@a"] != "https://home-a.example/" || c.Scopes["@b"] != "https://user-b.example/" || c.authFor(u) != "Bearer u" {
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

func newPrivateRegistry(t *testing.T, wantAuth string, tarballs map[string][]byte) *privateRegistry {
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
		if r.Header.Get("Authorization") != wantAuth {
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

// TestInstallPrivateRegistryTokenOnlyToItsHost: each kind of credential npm
// reads for a registry (:_authToken, :_auth, :username with :_password,
// all from ${VAR}) is sent to that registry's host and path only, not to
// the tarball host it redirects to, and never shown.
func TestInstallPrivateRegistryTokenOnlyToItsHost(t *testing.T) {
	const token, user, password = "npm_s3cretT0ken", "ci-bot", "pa55:w0rd"
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	for _, tc := range []struct {
		name, lines, auth string
		env               map[string]string
		secrets           []string
	}{
		{"token", "//HOST/npm/:_authToken=${MY_TOKEN}\n", "Bearer " + token, map[string]string{"MY_TOKEN": token}, []string{token}},
		{"_auth", "//HOST/npm/:_auth=${MY_AUTH}\n", "Basic " + basic, map[string]string{"MY_AUTH": basic}, []string{basic}},
		{"username and _password", "//HOST/npm/:username=" + user + "\n//HOST/npm/:_password=${MY_PASSWORD}\n", "Basic " + basic,
			map[string]string{"MY_PASSWORD": base64.StdEncoding.EncodeToString([]byte(password))}, []string{password, basic}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, cfg, _ := testHome(t)
			p := newPrivateRegistry(t, tc.auth, map[string][]byte{"1.0.0": kitTgz(t, "1.0.0"), "2.0.0": kitTgz(t, "2.0.0")})
			regHost := strings.TrimPrefix(p.reg.URL, "http://")
			writeFiles(t, dir, map[string]string{".npmrc": "@acme:registry=" + p.reg.URL + "/npm/\n" + strings.ReplaceAll(tc.lines, "HOST", regHost)})
			env := maps.Clone(tc.env)
			env["npm_config_userconfig"] = filepath.Join(dir, "none")
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
				if a != tc.auth {
					t.Fatalf("the registry saw Authorization %q, want %q", a, tc.auth)
				}
			}
			data, _ := os.ReadFile(cfg)
			for _, sec := range tc.secrets {
				if strings.Contains(string(data), sec) || strings.Contains(log.String(), sec) || strings.Contains(npmrc.String(), sec) {
					t.Fatalf("a credential leaked into config.json5, the log or String:\n%s\n%s", data, log.String())
				}
				if got := npmrc.scrub("npm said " + sec); got != "npm said ***" {
					t.Errorf("scrub left %q", got)
				}
			}
			// npm install gets the same credential in its private userconfig.
			u, _ := url.Parse(p.reg.URL + "/npm/@acme%2fkit")
			if got := ParseNPMRC(npmrc.userconfig("https://d/"), func(string) string { return "" }).authFor(u); got != tc.auth {
				t.Errorf("the userconfig for npm install gives Authorization %q, want %q", got, tc.auth)
			}

			// Without the credential: a plain refusal that names the host.
			in := newInstaller(dir, cfg, true, func(o *Options) { o.NPMRC = &NPMConfig{Scopes: npmrc.Scopes} })
			_, err = in.Install(context.Background(), mustParse(t, "npm:@acme/kit"), nil)
			if err == nil || !strings.Contains(err.Error(), "registry at "+regHost+" refused access (401") {
				t.Fatalf("no credential: %v", err)
			}
		})
	}
}

// TestNPMRCBasicAuthRules: which credential npm sends where: a token wins
// over _auth, which wins over username and _password, at one nerf dart; an
// incomplete pair (or a _password that is not base64) gives none there, so
// the match goes on up the path; the host, port and path scoping of tokens
// holds for every kind.
func TestNPMRCBasicAuthRules(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	env := map[string]string{"PW": b64("secret"), "AUTH": b64("al:ice")}
	c := ParseNPMRC([]byte(strings.Join([]string{
		"//all.example/:_authToken=tok",
		"//all.example/:_auth=${AUTH}",
		"//all.example/:username=u",
		"//all.example/:_password=${PW}",
		"//two.example/:_auth=${AUTH}",
		"//two.example/:username=u",
		"//two.example/:_password=${PW}",
		"//pair.example:8443/npm/:username=bob",
		"//pair.example:8443/npm/:_password=${PW}",
		"//up.example/:_authToken=host-wide",
		"//up.example/deep/:username=lonely",
		"//nopad.example/:username=n",
		"//nopad.example/:_password=" + strings.TrimRight(b64("ab"), "="),
		"//bad.example/:username=x",
		"//bad.example/:_password=not*base64!",
		"//h.example/:certfile=/etc/cert",
	}, "\n")), func(k string) string { return env[k] })
	for _, tc := range []struct{ url, auth string }{
		{"https://all.example/p", "Bearer tok"},
		{"https://two.example/p", "Basic " + b64("al:ice")},
		{"https://pair.example:8443/npm/@s%2fp", "Basic " + b64("bob:secret")},
		{"https://pair.example:8443/other/p", ""},
		{"https://pair.example/npm/p", ""},
		{"https://sub.pair.example:8443/npm/p", ""},
		{"https://up.example/deep/p", "Bearer host-wide"}, // a username alone is no credential
		{"https://nopad.example/p", "Basic " + b64("n:ab")},
		{"https://bad.example/p", ""},
		{"https://h.example/p", ""},
	} {
		u, _ := url.Parse(tc.url)
		if got := c.authFor(u); got != tc.auth {
			t.Errorf("%s: Authorization %q, want %q", tc.url, got, tc.auth)
		}
	}
}

// TestLoadNPMConfigRefusesUnscopedAuth: _auth, _authToken, username or
// _password without a //host/ prefix (what npm before 9 sent to whatever
// registry it used) is refused as npm 9 and later refuse it, naming the
// file and the scoped key to write instead.
func TestLoadNPMConfigRefusesUnscopedAuth(t *testing.T) {
	for _, tc := range []struct{ npmrc, want string }{
		{"_auth=${A}\n", "_auth is not scoped to a registry: write it as //registry.npmjs.org/:_auth"},
		{"registry=https://r.example/npm/\n_authToken=t\n", "write it as //r.example/npm/:_authToken"},
		{"username=u\n_password=cA==\n", "write it as //registry.npmjs.org/:username"},
		{"-authtoken=t\n", "-authtoken is not scoped to a registry: write it as //registry.npmjs.org/:_authToken"},
	} {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{".npmrc": tc.npmrc})
		env := map[string]string{"A": "eDp5", "npm_config_userconfig": filepath.Join(dir, "none")}
		_, err := LoadNPMConfig(dir, func(k string) string { return env[k] })
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, ".npmrc")+": ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.npmrc, err, tc.want)
		}
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{".npmrc": "_auth=${UNSET?}\n//r.example/:_auth=eDp5\n"})
	if _, err := LoadNPMConfig(dir, func(k string) string {
		return map[string]string{"npm_config_userconfig": filepath.Join(dir, "none")}[k]
	}); err != nil {
		t.Errorf("an empty unscoped _auth is nothing to refuse: %v", err)
	}
}

// FuzzParseNPMRC: any .npmrc parses; what it yields has no line breaks (it is
// written back as a userconfig) and reads back the same.
func FuzzParseNPMRC(f *testing.F) {
	for _, s := range []string{"registry=https://r/\n@a:registry=https://a/\n//r/:_authToken=${T}\n", "[x]\nk=v", "//h:1/p/:_authToken=\"a;b\" ; c", "\\${T}",
		"//r/p/:_auth=${T}\n//r/:username=u\n//r/:_password='cA=='\n_auth=x\n", "//h/p:username=a#b\n//h/p:_password=\"x;y\"\n"} {
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
		lines := 1 + len(c.Scopes)
		for _, k := range c.creds {
			for _, name := range npmAuthKeys {
				if k.get(name) != "" {
					lines++
				}
			}
		}
		if strings.Count(string(uc), "\n") != lines {
			t.Fatalf("%q: userconfig has extra lines:\n%s", s, uc)
		}
		if again.Registry != "https://d/" || !maps.Equal(again.Scopes, c.Scopes) || !maps.EqualFunc(again.creds, c.creds, func(a, b *npmCred) bool { return *a == *b }) {
			t.Fatalf("%q: userconfig %q reads back as %v", s, uc, again)
		}
	})
}
