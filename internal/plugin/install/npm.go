package install

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// DefaultRegistry is npm's public registry.
const DefaultRegistry = "https://registry.npmjs.org/"

// Size bounds of what the registry sends.
const (
	maxPackument = 64 << 20
	maxTarball   = 256 << 20
)

type packument struct {
	DistTags map[string]string `json:"dist-tags"`
	Versions map[string]struct {
		Version string `json:"version"`
		Dist    struct {
			Tarball   string `json:"tarball"`
			Integrity string `json:"integrity"`
			Shasum    string `json:"shasum"`
		} `json:"dist"`
	} `json:"versions"`
}

func httpURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("not an http(s) URL: %q", s)
	}
	return u, nil
}

// fetchNPM downloads the package's tarball, checks it against the
// registry's integrity, and unpacks it into dst. It returns the version.
func (in *Installer) fetchNPM(ctx context.Context, s Source, dst *os.Root, tmp string) (string, error) {
	reg, err := httpURL(in.opts.NPMRC.registryFor(s.Package, in.opts.Registry))
	if err != nil {
		return "", fmt.Errorf("npm registry: %w", err)
	}
	pu := *reg
	pu.Path = strings.TrimSuffix(pu.Path, "/") + "/" + s.Package
	pu.RawPath = strings.TrimSuffix(reg.EscapedPath(), "/") + "/" + strings.Replace(s.Package, "/", "%2f", 1)
	in.progress.Stepf("fetching %s from %s", s.Package, reg.Redacted())
	body, err := in.get(ctx, pu.String(), "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8", maxPackument, nil)
	if err != nil {
		return "", err
	}
	var p packument
	if err := json.Unmarshal(body, &p); err != nil {
		return "", fmt.Errorf("registry answer for %s: %w", s.Package, err)
	}
	names := make([]string, 0, len(p.Versions))
	for k := range p.Versions {
		names = append(names, k)
	}
	want, err := resolveVersion(s.Package, s.Version, p.DistTags, names)
	if err != nil {
		return "", err
	}
	v, ok := p.Versions[want]
	if !ok {
		return "", fmt.Errorf("%s: dist-tag %q names version %q, which the registry does not list", s.Package, s.Version, want)
	}
	tu, err := httpURL(v.Dist.Tarball)
	if err != nil {
		return "", fmt.Errorf("%s@%s: tarball: %w", s.Package, want, err)
	}
	check, err := integrityCheck(v.Dist.Integrity, v.Dist.Shasum)
	if err != nil {
		return "", fmt.Errorf("%s@%s: %w", s.Package, want, err)
	}
	f, err := os.CreateTemp(tmp, "tarball-*.tgz")
	if err != nil {
		return "", err
	}
	defer f.Close()
	label := path.Base(s.Package) + "-" + want + ".tgz"
	if _, err := in.get(ctx, tu.String(), "application/octet-stream", maxTarball, &download{w: f, label: label, check: check}); err != nil {
		return "", err
	}
	if err := check.verify(); err != nil {
		return "", fmt.Errorf("%s@%s: %w", s.Package, want, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	if err := extractTarGz(f, dst, in.opts.Limits); err != nil {
		return "", fmt.Errorf("unpack %s: %w", label, err)
	}
	return want, nil
}

// download streams a body to w through the integrity hashes and a meter.
type download struct {
	w     io.Writer
	label string
	check *integrity
}

// get fetches u. Without d it returns the body (at most limit bytes);
// with d it streams the body to d.
func (in *Installer) get(ctx context.Context, u, accept string, limit int64, d *download) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "beige-plugins-install")
	npmrc := in.opts.NPMRC
	if a := npmrc.authFor(req.URL); a != "" {
		req.Header.Set("Authorization", a)
	}
	// A redirect carries a token only when the new URL is under a host and
	// path it is configured for (Go's own rule would keep it for subdomains).
	client := *in.opts.HTTPClient
	next := client.CheckRedirect
	client.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		r.Header.Del("Authorization")
		if a := npmrc.authFor(r.URL); a != "" {
			r.Header.Set("Authorization", a)
		}
		if next != nil {
			return next(r, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", redact(u), err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("fetch %s: not found (404)", redact(u))
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("fetch %s: the registry at %s refused access (%s): the package is private or the credentials are missing or wrong", redact(u), resp.Request.URL.Host, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("fetch %s: %s", redact(u), resp.Status)
	}
	if resp.ContentLength > limit {
		return nil, fmt.Errorf("fetch %s: %d bytes, more than the %d allowed", redact(u), resp.ContentLength, limit)
	}
	body := io.LimitReader(resp.Body, limit+1)
	if d == nil {
		b, err := io.ReadAll(body)
		if err != nil {
			return nil, fmt.Errorf("fetch %s: %w", redact(u), err)
		}
		if int64(len(b)) > limit {
			return nil, fmt.Errorf("fetch %s: more than the %d bytes allowed", redact(u), limit)
		}
		return b, nil
	}
	m := in.progress.meter(d.label, resp.ContentLength)
	n, err := io.Copy(io.MultiWriter(d.w, d.check, m), body)
	m.done()
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", redact(u), err)
	}
	if n > limit {
		return nil, fmt.Errorf("download %s: more than the %d bytes allowed", redact(u), limit)
	}
	return nil, nil
}

func redact(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Redacted()
	}
	return u
}

// integrity checks a download against the registry's dist.integrity
// (sha512) or, for old packages without one, dist.shasum (sha1).
type integrity struct {
	h    hash.Hash
	algo string
	want [][]byte
}

func integrityCheck(sri, shasum string) (*integrity, error) {
	var want [][]byte
	for _, tok := range strings.Fields(sri) {
		if b64, ok := strings.CutPrefix(tok, "sha512-"); ok {
			if i := strings.IndexByte(b64, '?'); i >= 0 {
				b64 = b64[:i]
			}
			sum, err := base64.StdEncoding.DecodeString(b64)
			if err != nil || len(sum) != sha512.Size {
				return nil, fmt.Errorf("bad dist.integrity %q", sri)
			}
			want = append(want, sum)
		}
	}
	if len(want) > 0 {
		return &integrity{h: sha512.New(), algo: "sha512", want: want}, nil
	}
	if shasum != "" {
		sum, err := hex.DecodeString(shasum)
		if err != nil || len(sum) != sha1.Size {
			return nil, fmt.Errorf("bad dist.shasum %q", shasum)
		}
		return &integrity{h: sha1.New(), algo: "sha1", want: [][]byte{sum}}, nil
	}
	return nil, errors.New("the registry gives no sha512 integrity or shasum to check the tarball against; refused")
}

func (c *integrity) Write(b []byte) (int, error) { return c.h.Write(b) }

func (c *integrity) verify() error {
	got := c.h.Sum(nil)
	for _, w := range c.want {
		if subtle.ConstantTimeCompare(got, w) == 1 {
			return nil
		}
	}
	return fmt.Errorf("tarball %s does not match the registry's integrity (got %s-%s): refused", c.algo, c.algo, base64.StdEncoding.EncodeToString(got))
}

// packageRoot is the folder an npm tarball keeps its files in: "package",
// or the one folder at the top.
func packageRoot(r *os.Root) (string, error) {
	if fi, err := r.Lstat("package"); err == nil && fi.IsDir() {
		return "package", nil
	}
	f, err := r.Open(".")
	if err != nil {
		return "", err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return "", err
	}
	if len(entries) == 1 && entries[0].IsDir() {
		return entries[0].Name(), nil
	}
	return ".", nil
}

// npmDeps says whether the plugin in dir has dependencies to install, and
// refuses those npm would take from outside the registry (file:, link:,
// git and URL specs, workspaces): they could link the plugin to any folder
// of the host or run a program.
func npmDeps(r *os.Root, name string) (bool, error) {
	var pkg struct {
		Dependencies         map[string]string `json:"dependencies"`
		OptionalDependencies map[string]string `json:"optionalDependencies"`
		Workspaces           json.RawMessage   `json:"workspaces"`
	}
	ok, err := readSmallJSON(r, "package.json", &pkg)
	if err != nil || !ok {
		return false, err
	}
	if len(pkg.Workspaces) > 0 && !bytes.Equal(pkg.Workspaces, []byte("null")) {
		return false, fmt.Errorf("plugin %s: package.json has workspaces, which beige does not install", name)
	}
	for _, deps := range []map[string]string{pkg.Dependencies, pkg.OptionalDependencies} {
		for dep, spec := range deps {
			if err := registrySpec(spec); err != nil {
				return false, fmt.Errorf("plugin %s: dependency %q: %w", name, dep, err)
			}
		}
	}
	return len(pkg.Dependencies)+len(pkg.OptionalDependencies) > 0, nil
}

func registrySpec(spec string) error {
	s := strings.TrimSpace(spec)
	if rest, ok := strings.CutPrefix(s, "npm:"); ok {
		// An alias: npm:name@range.
		at := strings.LastIndexByte(rest, '@')
		if at <= 0 {
			return validNPMName(rest)
		}
		if err := validNPMName(rest[:at]); err != nil {
			return err
		}
		s = rest[at+1:]
	}
	if strings.ContainsAny(s, ":/\\") || strings.HasPrefix(s, ".") || strings.HasPrefix(s, "~/") {
		return fmt.Errorf("%q is not a registry version range (file:, link:, git and URL dependencies are refused)", spec)
	}
	return nil
}

// runNPM installs the plugin's dependencies in dir: never lifecycle
// scripts, no dev or peer dependencies, no audit or funding calls; a
// lockfile or .npmrc the package brought is removed first (they could
// point npm anywhere).
func (in *Installer) runNPM(ctx context.Context, r *os.Root, dir, name string) error {
	for _, f := range []string{".npmrc", "package-lock.json", "npm-shrinkwrap.json"} {
		if err := r.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("plugin %s: remove %s: %w", name, f, err)
		}
	}
	npm := in.opts.NPM
	if npm == "" {
		p, err := exec.LookPath("npm")
		if err != nil {
			return fmt.Errorf("plugin %s has npm dependencies, but npm is not installed (install Node.js and npm, then run the install again)", name)
		}
		npm = p
	}
	in.progress.Stepf("installing npm dependencies of %s (npm install --omit=dev --ignore-scripts --legacy-peer-deps)", name)
	// The registries and tokens go to npm in a private userconfig (0600, in
	// a 0700 temp dir, removed after), never on the command line or in the
	// user's own files.
	cfgDir, err := os.MkdirTemp("", "beige-npmrc-*")
	if err != nil {
		return fmt.Errorf("plugin %s: npm config: %w", name, err)
	}
	defer os.RemoveAll(cfgDir)
	userconfig := filepath.Join(cfgDir, "npmrc")
	if err := os.WriteFile(userconfig, in.opts.NPMRC.userconfig(in.opts.Registry), 0o600); err != nil {
		return fmt.Errorf("plugin %s: npm config: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--omit=dev", "--legacy-peer-deps", "--ignore-scripts", "--no-audit", "--no-fund",
		"--no-package-lock", "--userconfig", userconfig)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(in.opts.NPMRC.scrub(out.String()))
		if len(msg) > 4000 {
			msg = msg[len(msg)-4000:]
		}
		return fmt.Errorf("plugin %s: npm install: %v\n%s", name, err, msg)
	}
	return nil
}
