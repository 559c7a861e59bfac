package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// run runs the CLI with a fresh $BEIGE_HOME and returns its exit code and output.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(args, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	return code, out.String(), errOut.String()
}

func withHome(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "beige-home")
	t.Setenv("BEIGE_HOME", dir)
	return dir
}

func TestVersionAndHelp(t *testing.T) {
	withHome(t)
	if code, out, _ := run(t, "version"); code != 0 || !strings.HasPrefix(out, "beige ") {
		t.Errorf("version: %d %q", code, out)
	}
	for _, args := range [][]string{{"--help"}, {"gateway", "--help"}, {"gateway", "start", "--help"}, {"config", "validate", "--help"}, {"setup", "--help"}} {
		if code, out, _ := run(t, args...); code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("%v: %d %q", args, code, out)
		}
	}
	if code, out, _ := run(t, "completion", "bash"); code != 0 || !strings.Contains(out, "bash completion") {
		t.Errorf("completion: %d", code)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	withHome(t)
	for _, args := range [][]string{{"frobnicate"}, {"config", "validate", "--nope"}, {"setup", "extra"}} {
		if code, _, errOut := run(t, args...); code != ExitUsage || !strings.HasPrefix(errOut, "beige: ") {
			t.Errorf("%v: code %d, stderr %q", args, code, errOut)
		}
	}
}

func TestGatewayNotRunning(t *testing.T) {
	withHome(t)
	if code, out, _ := run(t, "gateway", "stop"); code != 0 || !strings.Contains(out, "not running") {
		t.Errorf("stop: %d %q", code, out)
	}
	if code, out, _ := run(t, "gateway", "status"); code != ExitNotRunning || !strings.Contains(out, "not running") {
		t.Errorf("status: %d %q", code, out)
	}
	if code, _, errOut := run(t, "gateway", "logs"); code != ExitFailure || !strings.Contains(errOut, "no gateway log yet") {
		t.Errorf("logs: %d %q", code, errOut)
	}
}

func TestLastLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{{"a\nb\nc\n", 2, "b\nc\n"}, {"a\nb\nc", 2, "b\nc"}, {"a\n", 5, "a\n"}, {"", 3, ""}, {"a\nb\n", 0, "a\nb\n"}} {
		if got := string(lastLines([]byte(tc.in), tc.n)); got != tc.want {
			t.Errorf("lastLines(%q, %d) = %q", tc.in, tc.n, got)
		}
	}
}

func TestSetupIsIdempotent(t *testing.T) {
	home := withHome(t)
	code, out, _ := run(t, "setup")
	if code != 0 || !strings.Contains(out, "created "+filepath.Join(home, "config.json5")) {
		t.Fatalf("setup: %d %q", code, out)
	}
	for _, d := range []string{"agents", "sockets", "logs", "data", "sessions"} {
		if _, err := os.Stat(filepath.Join(home, d)); err != nil {
			t.Error(err)
		}
	}
	if st, _ := os.Stat(filepath.Join(home, "sockets")); st.Mode().Perm() != 0o700 {
		t.Errorf("sockets mode %v", st.Mode().Perm())
	}
	cfg := filepath.Join(home, "config.json5")
	os.WriteFile(cfg, []byte("// mine\n{}"), 0o600)
	if code, out, _ := run(t, "setup"); code != 0 || !strings.Contains(out, "already set up") {
		t.Errorf("second setup: %d %q", code, out)
	}
	if b, _ := os.ReadFile(cfg); string(b) != "// mine\n{}" {
		t.Error("setup overwrote the config")
	}
}

func TestTemplateValidatesOnceKeyIsSet(t *testing.T) {
	home := withHome(t)
	run(t, "setup")
	t.Setenv("ANTHROPIC_API_KEY", "")
	os.Unsetenv("ANTHROPIC_API_KEY")
	code, _, errOut := run(t, "config", "validate")
	if code != ExitFailure || !strings.Contains(errOut, "ANTHROPIC_API_KEY is not set") || !strings.Contains(errOut, filepath.Join(home, "config.json5")+":") {
		t.Errorf("without key: %d %q", code, errOut)
	}
	t.Setenv("ANTHROPIC_API_KEY", "sk-test")
	if code, out, errOut := run(t, "config", "validate"); code != 0 || out != "OK\n" {
		t.Errorf("with key: %d %q %q", code, out, errOut)
	}
}

func TestLazySetup(t *testing.T) {
	home := withHome(t)
	code, _, errOut := run(t, "gateway", "status")
	if code != ExitNotRunning || !strings.Contains(errOut, "first run") {
		t.Errorf("%d %q", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(home, "config.json5")); err != nil {
		t.Error("first command did not run setup:", err)
	}
}

// TestFirstRunSetupIsOneRule: on a fresh $BEIGE_HOME (missing, or an
// empty folder) every command runs setup first and says so on stderr, once;
// version, help and completion touch nothing.
func TestFirstRunSetupIsOneRule(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "k")
	for _, args := range [][]string{
		{"config", "validate"},
		{"config", "validate", "-c", filepath.Join(t.TempDir(), "other.json5")},
		{"gateway", "status"},
		{"gateway", "stop"},
		{"gateway", "logs"},
		{"-g", "http://127.0.0.1:1", "tui"},
	} {
		for _, empty := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/empty=%v", strings.Join(args, " "), empty), func(t *testing.T) {
				home := withHome(t)
				if empty {
					os.Mkdir(home, 0o700)
				}
				_, _, errOut := run(t, args...)
				if n := strings.Count(errOut, "first run: set up "+home); n != 1 {
					t.Errorf("said %d times that it ran setup: %q", n, errOut)
				}
				if _, err := os.Stat(filepath.Join(home, "config.json5")); err != nil {
					t.Errorf("no setup: %v", err)
				}
				if _, _, errOut := run(t, args...); strings.Contains(errOut, "first run") {
					t.Errorf("setup ran again: %q", errOut)
				}
			})
		}
	}
	for _, args := range [][]string{{"version"}, {"help"}, {"--help"}, {"completion", "bash"}, {"gateway", "status", "--help"}} {
		home := withHome(t)
		if _, _, errOut := run(t, args...); errOut != "" {
			t.Errorf("%v: stderr %q", args, errOut)
		}
		if _, err := os.Stat(home); !os.IsNotExist(err) {
			t.Errorf("%v made %s", args, home)
		}
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	withHome(t)
	run(t, "setup") // so that stderr holds only the problems
	dir := t.TempDir()
	p := filepath.Join(dir, "c.json5")
	os.WriteFile(p, []byte(`{
  llm: { providers: { anthropic: { apiKey: "k" } } },
  agents: { a: { model: { provider: "antropic", modle: "x" }, sandbox: { image: 1 } } },
}`), 0o600)
	code, out, errOut := run(t, "config", "validate", "-c", p)
	if code != ExitFailure || out != "" {
		t.Fatalf("%d %q", code, out)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 3 {
		t.Fatalf("stderr:\n%s", errOut)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, p+":3:") {
			t.Errorf("line %q lacks file:line:col", l)
		}
	}
	for _, bad := range []string{filepath.Join(dir, "missing.json5"), dir} {
		code, _, errOut := run(t, "config", "validate", "-c", bad)
		if code != ExitFailure || strings.Count(errOut, "\n") != 1 || strings.Contains(errOut, "goroutine") {
			t.Errorf("%s: %d %q", bad, code, errOut)
		}
	}
}

// TestConfigSchema: `beige config schema` prints the config's JSON Schema,
// setup writes the same beside the config, and the template points at it.
func TestConfigSchema(t *testing.T) {
	home := withHome(t)
	code, out, errOut := run(t, "config", "schema")
	if code != 0 || !strings.Contains(out, `"$schema": "https://json-schema.org/draft/2020-12/schema"`) || !strings.Contains(out, `"sandbox"`) {
		t.Fatalf("config schema: %d %q %q", code, out[:min(len(out), 200)], errOut)
	}
	if code, _, errOut := run(t, "setup"); code != 0 {
		t.Fatalf("setup: %d %q", code, errOut)
	}
	b, err := os.ReadFile(filepath.Join(home, "config.schema.json"))
	if err != nil || string(b) != out {
		t.Errorf("setup's config.schema.json differs from config schema's output (%v)", err)
	}
	cfg, _ := os.ReadFile(filepath.Join(home, "config.json5"))
	if !strings.Contains(string(cfg), `$schema: "./config.schema.json"`) {
		t.Error("the template does not point at config.schema.json")
	}
}
