// Package cli is the beige command line: every command lives here and
// returns an error (or an exit code), so that main stays a few lines and
// commands can be tested.
package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/beige-dev/beige/internal/home"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitFailure = 1 // the command ran and failed (bad config, gateway error)
	ExitUsage   = 2 // bad usage, or a command that is not implemented yet
)

// Version is set at build time with -ldflags "-X github.com/beige-dev/beige/internal/cli.Version=v1.2.3".
var Version = "dev"

// ExitError carries an exit code with its message. A nil Err means the
// message was already printed.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

func exitf(code int, format string, args ...any) error {
	return &ExitError{Code: code, Err: fmt.Errorf(format, args...)}
}

// Streams are where a command reads and writes.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// Run runs the beige command line with args (without the program name)
// and returns the process exit code.
func Run(args []string) int {
	return Main(args, Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
}

// Main is Run with explicit streams, for tests.
func Main(args []string, s Streams) int {
	app := &app{streams: s}
	root := app.rootCommand()
	root.SetArgs(args)
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintf(s.Err, "beige: %v\n", ee.Err)
		}
		return ee.Code
	}
	// Errors from cobra itself (unknown command or flag) are usage errors.
	fmt.Fprintf(s.Err, "beige: %v\n", err)
	if isUsageError(err) {
		fmt.Fprintln(s.Err, "Run 'beige --help' for usage.")
		return ExitUsage
	}
	return ExitFailure
}

func isUsageError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument", "invalid argument", "accepts ", "requires at least", "requires at most"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// app holds what the global flags say.
type app struct {
	streams    Streams
	configPath string
	gatewayURL string
	// gatewayFlagSet is true when -g was given; otherwise commands that talk
	// to the gateway use the config's host and port.
	gatewayFlagSet bool
}

// noSetup marks the commands that do not run first-run setup: they only
// tell about beige itself (version), or are setup.
const noSetup = "beige/no-setup"

// runsSetup says whether cmd runs first-run setup first. The rule is one
// for all: every command does (the spec: "any first command runs setup"),
// but those marked noSetup and cobra's own help and completion commands.
func runsSetup(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Annotations[noSetup] != "" {
			return false
		}
		switch c.Name() {
		case "help", "completion", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
			return false
		}
	}
	return true
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "beige",
		Short: "Beige: a secure, sandboxed AI-agent gateway",
		Long: `Beige runs AI agents, each in its own Docker sandbox. One gateway process
talks to the LLM providers, enforces each agent's tool policy (deny by
default), writes an audit record of every tool call, and serves an HTTP API
on 127.0.0.1:7433.

Files live in $BEIGE_HOME (default ~/.beige); the config is
$BEIGE_HOME/config.json5 unless -c says otherwise.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			a.gatewayFlagSet = cmd.Flags().Changed("gateway")
			if !runsSetup(cmd) {
				return nil
			}
			return a.ensureHome()
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().StringVarP(&a.configPath, "config", "c", "", "config file (default $BEIGE_HOME/config.json5)")
	root.PersistentFlags().StringVarP(&a.gatewayURL, "gateway", "g", "http://127.0.0.1:7433", "gateway URL, for commands that talk to a running gateway")
	root.AddCommand(
		a.versionCommand(),
		a.setupCommand(),
		a.configCommand(),
		a.gatewayCommand(),
		a.sandboxCommand(),
		a.doctorCommand(),
		a.tuiCommand(),
		a.pluginsCommand(),
		a.auditCommand(),
	)
	a.registerCompletions(root)
	return root
}

func versionString() string {
	v := Version
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
		return fmt.Sprintf("beige %s, %s", v, bi.GoVersion)
	}
	return "beige " + v
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:         "version",
		Short:       "Print the version",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{noSetup: "yes"},
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(a.streams.Out, versionString())
			return nil
		},
	}
}

// home returns $BEIGE_HOME.
func (a *app) home() (home.Home, error) {
	h, err := home.Default()
	if err != nil {
		return h, exitf(ExitFailure, "%v", err)
	}
	return h, nil
}

// config returns the config path the user chose, or the default.
func (a *app) config() (string, error) {
	if a.configPath != "" {
		return a.configPath, nil
	}
	h, err := a.home()
	if err != nil {
		return "", err
	}
	return h.Config(), nil
}

// ensureHome runs first-run setup when $BEIGE_HOME has no config.json5
// yet (it does not exist, or is an empty folder), and says so on stderr.
// Setup writes the config, so this happens once, whatever the command and
// whether or not -c names another config.
func (a *app) ensureHome() error {
	h, err := a.home()
	if err != nil {
		return err
	}
	if _, err := os.Lstat(h.Config()); !errors.Is(err, fs.ErrNotExist) {
		return nil // there, or unreadable: the command says what is wrong
	}
	created, err := setupHome(h)
	if err != nil {
		return exitf(ExitFailure, "%v", err)
	}
	fmt.Fprintf(a.streams.Err, "beige: first run: set up %s (%d files and folders); edit %s to configure\n", h.Dir, len(created), h.Config())
	return nil
}
