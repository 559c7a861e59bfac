package deptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is the import path of this module; rule paths starting with
// "internal/" or "cmd/" are relative to it.
const module = "github.com/beige-dev/beige"

// rule says that the packages matching pkgs must not depend, directly or
// not, on any package matching forbid, unless it matches allow. Patterns
// are Go's: "x/..." is x and every package below it, anything else one
// package.
type rule struct {
	pkgs   []string
	forbid []string
	allow  []string
	why    string
}

var rules = []rule{
	{
		pkgs:   []string{"internal/tui/...", "internal/client/..."},
		forbid: []string{"github.com/moby/...", "internal/httpapi/...", "internal/gateway/...", "internal/sandbox/docker/...", "internal/egress"},
		why:    "the terminal client and the API client reach no sandbox and no server: wire types come from internal/proto",
	},
	{
		pkgs:   []string{"internal/httpapi/..."},
		forbid: []string{"internal/agent/...", "internal/gateway/...", "internal/tui/...", "internal/client/...", "charm.land/...", "github.com/moby/..."},
		why:    "the HTTP API is the server's edge: it sees the gateway through its Backend interface and the wire types only",
	},
	{
		pkgs:   []string{"internal/webui/..."},
		forbid: []string{"internal/agent/...", "internal/gateway/...", "internal/sandbox/...", "internal/tui/...", "internal/client/...", "github.com/moby/...", "github.com/chromedp/..."},
		why:    "the web console sees the gateway through its Chat, Status and AuditReader and the wire types only; chromedp is for its tests",
	},
	{
		pkgs:   []string{"internal/gateway/...", "internal/httpapi/...", "cmd/beige-sandbox/..."},
		forbid: []string{"internal/tui/...", "internal/client/...", "charm.land/..."},
		why:    "the gateway does not link the terminal client or its UI libraries",
	},
	{
		pkgs:   []string{"internal/sandbox", "internal/sandbox/helper/...", "internal/proto/...", "internal/tools/...", "internal/agent/...", "internal/llm/..."},
		forbid: []string{"github.com/moby/...", "internal/sandbox/docker/..."},
		why:    "only the Docker runtime (internal/sandbox/docker) and what assembles it talk to the engine",
	},
	{
		pkgs:   []string{"internal/sandbox/memsandbox"},
		forbid: []string{"os/exec", "github.com/moby/...", "internal/sandbox/docker/..."},
		why:    "the in-memory sandbox of tests never runs a program on the host, nor reaches an engine",
	},
	{
		pkgs:   []string{"internal/agent/..."},
		forbid: []string{"internal/httpapi/...", "internal/gateway/..."},
		why:    "the agent loop runs in the gateway and in the terminal client alike",
	},
	{
		pkgs:   []string{"internal/agent/..."},
		forbid: []string{"internal/tools/...", "internal/sandbox/...", "internal/pipeline/..."},
		why:    "the agent loop sees tools through its Tools interface (the terminal client implements it too); the core tools and their pipeline are the gateway's",
	},
	{
		pkgs:   []string{"internal/pipeline/..."},
		forbid: []string{"internal/tools/...", "internal/plugin/...", "internal/sandbox/...", "internal/gateway/...", "internal/agent/..."},
		why:    "the tool pipeline wraps any tool: core and plugin tools depend on it, not it on them",
	},
	{
		pkgs:   []string{"internal/proto", "internal/sandbox/helper", "internal/toolclient"},
		forbid: []string{module + "/..."},
		allow:  []string{"internal/proto"},
		why:    "linked into the small in-sandbox binary: the standard library and internal/proto only",
	},
	{
		pkgs:   []string{"internal/proto/llmproto"},
		forbid: []string{module + "/..."},
		allow:  []string{"internal/proto", "internal/llm"},
		why:    "wire types: they carry the provider-neutral llm types and nothing else of ours",
	},
	{
		pkgs:   []string{"internal/...", "cmd/..."},
		forbid: []string{"internal/testutil"},
		why:    "internal/testutil holds helpers for tests: only _test.go files import it",
	},
	{
		pkgs:   []string{"internal/toolclient"},
		forbid: []string{"net"},
		why:    "the in-sandbox tool client talks over the socket it is given, without package net",
	},
}

// pkg is what the checker needs of one `go list -json` record.
type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
	Standard   bool
}

// abs makes a rule path absolute: module-relative paths get the module prefix.
func abs(p string) string {
	if strings.HasPrefix(p, "internal/") || strings.HasPrefix(p, "cmd/") {
		return module + "/" + p
	}
	return p
}

// match reports whether path matches the pattern (see rule).
func match(pattern, path string) bool {
	pattern = abs(pattern)
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

func matchAny(patterns []string, path string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, path) })
}

// violation is one forbidden dependency, with the import chain that makes it.
type violation struct {
	pkg, dep string
	pattern  string // the rule's forbid pattern dep matches
	chain    []string
	why      string
}

func (v violation) String() string {
	return fmt.Sprintf("%s must not depend on %s (%s)\n\timport chain: %s", v.pkg, v.dep, v.why, strings.Join(v.chain, " -> "))
}

// check returns every violation of rules in pkgs (all packages go list
// printed, dependencies included); rules whose package patterns match none
// of pkgs are reported too, so that a renamed package cannot silently
// leave its rule checking nothing.
func check(pkgs []pkg, rules []rule) (vs []violation, unmatched []string) {
	byPath := make(map[string]*pkg, len(pkgs))
	for i := range pkgs {
		byPath[pkgs[i].ImportPath] = &pkgs[i]
	}
	for _, r := range rules {
		for _, pat := range r.pkgs {
			matched := false
			for _, p := range pkgs {
				if !match(pat, p.ImportPath) || p.Standard {
					continue
				}
				matched = true
				// One violation per forbidden pattern: the dependency
				// with the shortest import chain (the edge to cut).
				for _, f := range r.forbid {
					var best *violation
					for _, d := range p.Deps {
						if !match(f, d) || matchAny(r.allow, d) {
							continue
						}
						if c := chain(byPath, p.ImportPath, d); best == nil || len(c) < len(best.chain) {
							best = &violation{pkg: p.ImportPath, dep: d, pattern: f, chain: c, why: r.why}
						}
					}
					if best != nil {
						vs = append(vs, *best)
					}
				}
			}
			if !matched {
				unmatched = append(unmatched, pat)
			}
		}
	}
	return vs, unmatched
}

// chain finds a shortest import path from one package to another.
func chain(byPath map[string]*pkg, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var out []string
			for p := to; p != ""; p = prev[p] {
				out = append(out, p)
			}
			slices.Reverse(out)
			return out
		}
		p := byPath[cur]
		if p == nil {
			continue
		}
		for _, im := range p.Imports {
			if _, seen := prev[im]; !seen {
				prev[im] = cur
				queue = append(queue, im)
			}
		}
	}
	return []string{from, "?", to}
}

// goList runs `go list -deps -json` over the whole module (with an overlay
// file when not empty) and decodes its records.
func goList(t *testing.T, overlay string) []pkg {
	t.Helper()
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	args := []string{"list", "-deps", "-json=ImportPath,Imports,Deps,Standard"}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	cmd := exec.Command(goBin, append(args, module+"/...")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestDependencyRules is the guard: every rule holds over the module as it is.
func TestDependencyRules(t *testing.T) {
	vs, unmatched := check(goList(t, ""), rules)
	for _, v := range vs {
		t.Error(v)
	}
	for _, p := range unmatched {
		t.Errorf("rule pattern %q matches no package (renamed? update the rule)", p)
	}
}

// TestAcceptance: `go list -deps ./internal/tui ./internal/client` lists no
// moby package, no internal/httpapi and no internal/sandbox/docker.
func TestAcceptance(t *testing.T) {
	pkgs := goList(t, "")
	seen := 0
	for _, p := range pkgs {
		if p.ImportPath != module+"/internal/tui" && p.ImportPath != module+"/internal/client" {
			continue
		}
		seen++
		bad := map[string]bool{}
		for _, d := range p.Deps {
			for _, f := range []string{"github.com/moby/...", "internal/httpapi", "internal/sandbox/docker/..."} {
				if match(f, d) && !bad[f] {
					bad[f] = true
					t.Errorf("%s depends on %s", p.ImportPath, d)
				}
			}
		}
	}
	if seen != 2 {
		t.Fatalf("found %d of internal/tui and internal/client in go list's output", seen)
	}
}

// TestForbiddenImportFails adds, through a go list overlay, one file to
// internal/tui that imports the Docker runtime, and to internal/httpapi one
// that imports the agent loop: the real pipeline (go list, then the rules)
// must report both, with the chains.
func TestForbiddenImportFails(t *testing.T) {
	root := moduleRoot(t)
	dir := t.TempDir()
	files := map[string]string{
		filepath.Join(root, "internal", "tui", "zz_forbidden.go"):     "package tui\n\nimport _ \"github.com/beige-dev/beige/internal/sandbox/docker\"\n",
		filepath.Join(root, "internal", "httpapi", "zz_forbidden.go"): "package httpapi\n\nimport _ \"github.com/beige-dev/beige/internal/agent\"\n",
	}
	replace := map[string]string{}
	i := 0
	for target, src := range files {
		i++
		f := filepath.Join(dir, fmt.Sprintf("f%d.go", i))
		if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		replace[target] = f
	}
	b, _ := json.Marshal(map[string]any{"Replace": replace})
	overlay := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlay, b, 0o600); err != nil {
		t.Fatal(err)
	}
	vs, _ := check(goList(t, overlay), rules)
	want := map[[2]string]bool{ // package, forbid pattern
		{module + "/internal/tui", "internal/sandbox/docker/..."}: false,
		{module + "/internal/tui", "github.com/moby/..."}:         false,
		{module + "/internal/httpapi", "internal/agent/..."}:      false,
	}
	for _, v := range vs {
		k := [2]string{v.pkg, v.pattern}
		if _, ok := want[k]; ok {
			want[k] = true
			if len(v.chain) < 2 || v.chain[0] != v.pkg || v.chain[len(v.chain)-1] != v.dep || slices.Contains(v.chain, "?") {
				t.Errorf("bad import chain for %s -> %s: %v", v.pkg, v.dep, v.chain)
			}
		}
	}
	for k, found := range want {
		if !found {
			t.Errorf("the forbidden dependency of %s on %s was not reported", k[0], k[1])
		}
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Skipf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// TestCheck is a table test of the checker on made-up packages: a
// forbidden edge, direct or through another package, is reported with its
// chain; allowed and unrelated ones are not; a rule that matches nothing
// is reported.
func TestCheck(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	pkgs := []pkg{
		{ImportPath: m("internal/tui"), Imports: []string{m("internal/client")}, Deps: []string{m("internal/client"), m("internal/httpapi"), "fmt"}},
		{ImportPath: m("internal/client"), Imports: []string{m("internal/httpapi"), "fmt"}, Deps: []string{m("internal/httpapi"), "fmt"}},
		{ImportPath: m("internal/httpapi"), Imports: []string{"fmt"}, Deps: []string{"fmt"}},
		{ImportPath: m("internal/proto"), Imports: []string{"fmt"}, Deps: []string{"fmt"}},
		{ImportPath: m("internal/proto/llmproto"), Imports: []string{m("internal/llm")}, Deps: []string{m("internal/llm")}},
		{ImportPath: m("internal/llm"), Imports: []string{"net/http"}, Deps: []string{"net/http"}},
		{ImportPath: "fmt", Standard: true},
		{ImportPath: "net/http", Standard: true},
	}
	tests := []struct {
		name      string
		rule      rule
		want      []string // "pkg -> dep: chain"
		unmatched []string
	}{
		{"direct edge", rule{pkgs: []string{"internal/client"}, forbid: []string{"internal/httpapi"}},
			[]string{"internal/client -> internal/httpapi: internal/client internal/httpapi"}, nil},
		{"indirect edge", rule{pkgs: []string{"internal/tui/..."}, forbid: []string{"internal/httpapi/..."}},
			[]string{"internal/tui -> internal/httpapi: internal/tui internal/client internal/httpapi"}, nil},
		{"no edge", rule{pkgs: []string{"internal/httpapi"}, forbid: []string{"internal/tui/...", "internal/client/..."}}, nil, nil},
		{"allowed", rule{pkgs: []string{"internal/proto/llmproto"}, forbid: []string{module + "/..."}, allow: []string{"internal/llm"}}, nil, nil},
		{"module-wide forbid", rule{pkgs: []string{"internal/proto/..."}, forbid: []string{module + "/..."}},
			[]string{"internal/proto/llmproto -> internal/llm: internal/proto/llmproto internal/llm"}, nil},
		{"exact pattern does not match below", rule{pkgs: []string{"internal/proto"}, forbid: []string{"internal/llm"}}, nil, nil},
		{"std dep", rule{pkgs: []string{"internal/llm"}, forbid: []string{"net/..."}},
			[]string{"internal/llm -> net/http: internal/llm net/http"}, nil},
		{"unmatched rule", rule{pkgs: []string{"internal/gone/..."}, forbid: []string{"fmt"}}, nil, []string{"internal/gone/..."}},
	}
	short := func(s string) string { return strings.TrimPrefix(s, module+"/") }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs, unmatched := check(pkgs, []rule{tt.rule})
			var got []string
			for _, v := range vs {
				var c []string
				for _, p := range v.chain {
					c = append(c, short(p))
				}
				got = append(got, short(v.pkg)+" -> "+short(v.dep)+": "+strings.Join(c, " "))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("violations = %q, want %q", got, tt.want)
			}
			if !slices.Equal(unmatched, tt.unmatched) {
				t.Errorf("unmatched = %q, want %q", unmatched, tt.unmatched)
			}
		})
	}
}
