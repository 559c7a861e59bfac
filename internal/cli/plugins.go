package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/beige-dev/beige/internal/plugin/nodehost"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/beige-dev/beige/internal/plugin"
	"github.com/beige-dev/beige/internal/plugin/install"
)

func (a *app) pluginsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugins",
		Short: "Install, list, update and remove plugins",
		Long: `Plugins installs plugins into $BEIGE_HOME/plugins/<name>/ and records each as
plugins.<name> (path, _source, and the plugin's defaultConfig) in the config,
edited in place: its comments and formatting stay as they are.

Sources:
  npm:@scope/pkg[@version]              an npm package (version: exact, or a dist-tag)
  github:owner/repo[/sub/path][#ref]    a GitHub repository (git clone --depth 1), at a branch or tag
  ./path, ../path, /path                a local folder (copied)

Every plugin.json in the source is a plugin. npm packages come from the
registry npm users configure: $BEIGE_HOME/.npmrc and ~/.npmrc
(npm_config_userconfig; $BEIGE_HOME's wins) with registry=,
@scope:registry= and //host[:port]/path/:_authToken=${TOKEN}, and
npm_config_registry over both; default https://registry.npmjs.org/. A token
is sent only to URLs under the host and path it is configured for (not to a
tarball or redirect on another host) and never printed. The tarball must
match the registry's integrity (sha512). A plugin with npm dependencies gets them with
"npm install --omit=dev --ignore-scripts --legacy-peer-deps" (peer
dependencies, the host package, are not installed), given the same
registries and tokens in a private temporary userconfig: lifecycle scripts of
the package and its dependencies are never run. github: sources are cloned
with git from BEIGE_GITHUB_URL (default https://github.com), without hooks
or submodules; a file:// URL there is refused unless BEIGE_GITHUB_ALLOW_FILE=1
(for tests).`,
	}
	var force bool
	installCmd := &cobra.Command{
		Use:   "install <source>",
		Short: "Install every plugin of a source (--force reinstalls)",
		Long: `Install fetches the source, installs every plugin (plugin.json) in it into
$BEIGE_HOME/plugins/<name>/ with its npm dependencies (never running install
scripts), and adds plugins.<name> to the config. A package whose plugins
live in subfolders (the toolkit's plugins/<p>/, which import ../_shared/) is
kept whole in $BEIGE_HOME/packages/<package>@<version>/ and each of its
plugins is the symlink $BEIGE_HOME/plugins/<name> into it, as the original
installs packages; a plugin at the source's root is copied to plugins/<name>/.
A plugin installed already is refused unless --force is given; with --force
its folder or link is replaced and its config entry gets the new path and
_source, but its config (keys, tokens) is never touched.

Source forms:
  npm:@scope/pkg              the registry's "latest" dist-tag
  npm:@scope/pkg@1.2.3        an exact version
  npm:@scope/pkg@^1.2.0       an npm range (~1.2, >=1 <2, 1.x, 1 || 2,
                              1.0.0 - 1.2.0): the highest satisfying version;
                              prereleases only if the range names one
  npm:@scope/pkg@next         a dist-tag
  github:owner/repo[/sub/path][#ref]
  ./local/path, ../path or /abs/path

The config's _source keeps what you typed, so "beige plugins update" follows
the range; "beige plugins list" shows the installed version.

Examples:
  beige plugins install npm:@scope/pkg@^1.0.0
  beige plugins install github:owner/repo/plugins/git#v1.2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cwd, _ := os.Getwd()
			src, err := install.ParseSource(args[0], cwd)
			if err != nil {
				return exitf(ExitUsage, "%v", err)
			}
			in, err := a.installer(cmd.Context(), force)
			if err != nil {
				return err
			}
			out, err := in.Install(cmd.Context(), src, nil)
			if err != nil {
				return exitf(ExitFailure, "install %s: %v", args[0], err)
			}
			a.reportInstalled(out, "installed")
			cfg, _ := a.config()
			fmt.Fprintf(a.streams.Out, "Next: fill in their config in %s (API keys), add their tools to an agent's tools, and restart the gateway.\n", cfg)
			return nil
		},
	}
	installCmd.Flags().BoolVar(&force, "force", false, "replace plugins installed already (their config is kept)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the plugins of the config and of $BEIGE_HOME/plugins",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := a.installer(cmd.Context(), false)
			if err != nil {
				return err
			}
			entries, err := in.List()
			if err != nil {
				return exitf(ExitFailure, "%v", err)
			}
			if len(entries) == 0 {
				fmt.Fprintln(a.streams.Out, "no plugins")
				return nil
			}
			tw := tabwriter.NewWriter(a.streams.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tVERSION\tSOURCE\tPATH\tSTATUS")
			for _, e := range entries {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Name, dash(e.Version), dash(e.Source), dash(e.Path), status(e))
			}
			return tw.Flush()
		},
	}

	remove := &cobra.Command{
		Use:               "remove <name>",
		Short:             "Delete an installed plugin's folder (or link) and its config entry",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completePluginArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := install.ValidName(args[0]); err != nil {
				return exitf(ExitUsage, "%v", err)
			}
			in, err := a.installer(cmd.Context(), false)
			if err != nil {
				return err
			}
			if err := in.Remove(args[0]); err != nil {
				return exitf(ExitFailure, "remove %s: %v", args[0], err)
			}
			fmt.Fprintf(a.streams.Out, "removed %s\n", args[0])
			return nil
		},
	}

	update := &cobra.Command{
		Use:   "update [name]",
		Short: "Fetch plugins again from their _source (all, or one)",
		Long: `Update installs plugins again from the _source their config entry records,
keeping each entry's config. Without a name it updates every plugin with a
_source (those of one source are fetched once). Each update of a package
gets a new folder in $BEIGE_HOME/packages/ and only the updated plugins'
links move to it: updating one plugin of a package never changes the code
the package's other plugins run. A package folder nothing points into any
more is deleted.`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: a.completePluginArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if err := install.ValidName(args[0]); err != nil {
					return exitf(ExitUsage, "%v", err)
				}
			}
			in, err := a.installer(cmd.Context(), true)
			if err != nil {
				return err
			}
			bySource, without, err := in.Sources(args)
			if err != nil {
				return exitf(ExitFailure, "%v", err)
			}
			for _, n := range without {
				fmt.Fprintf(a.streams.Out, "skipped %s: no _source in the config (not installed by beige plugins install)\n", n)
			}
			sources := make([]string, 0, len(bySource))
			for s := range bySource {
				sources = append(sources, s)
			}
			sort.Strings(sources)
			failed := false
			for _, s := range sources {
				src, err := install.ParseSource(s, "/")
				if err == nil {
					var out []install.Installed
					if out, err = in.Install(cmd.Context(), src, bySource[s]); err == nil {
						a.reportInstalled(out, "updated")
						continue
					}
				}
				fmt.Fprintf(a.streams.Err, "beige: update from %s: %v\n", s, err)
				failed = true
			}
			if failed {
				return &ExitError{Code: ExitFailure}
			}
			if len(sources) == 0 && len(without) == 0 {
				fmt.Fprintln(a.streams.Out, "no plugins to update")
			}
			return nil
		},
	}
	cmd.AddCommand(installCmd, list, remove, update)
	return cmd
}

// installer builds the installer from $BEIGE_HOME, the config path and the
// environment: npm's registry, BEIGE_GITHUB_URL (default
// https://github.com) and BEIGE_GITHUB_ALLOW_FILE=1 (file:// URLs, for tests).
func (a *app) installer(ctx context.Context, force bool) (*install.Installer, error) {
	h, err := a.home()
	if err != nil {
		return nil, err
	}
	cfg, err := a.config()
	if err != nil {
		return nil, err
	}
	npmrc, err := install.LoadNPMConfig(h.Dir, os.Getenv)
	if err != nil {
		return nil, err
	}
	return install.New(install.Options{
		Home:         h.Dir,
		Config:       cfg,
		Force:        force,
		NPMRC:        npmrc,
		GitHubURL:    os.Getenv("BEIGE_GITHUB_URL"),
		AllowFileGit: os.Getenv("BEIGE_GITHUB_ALLOW_FILE") == "1",
		Progress:     &install.Progress{W: a.streams.Err, TTY: isTerminal(a.streams.Err)},
	}), nil
}

// reportInstalled prints what was installed and what the gateway does with
// the plugins today.
func (a *app) reportInstalled(out []install.Installed, verb string) {
	builtins := plugin.Builtins()
	var builtin, typescript []string
	for _, p := range out {
		v := p.Version
		if v == "" {
			v = "(no version)"
		}
		fmt.Fprintf(a.streams.Out, "%s %s %s in %s\n", verb, p.Name, v, p.Dir)
		switch _, ok := builtins[p.Name]; {
		case p.HasRun:
		case ok:
			builtin = append(builtin, p.Name)
		default:
			typescript = append(typescript, p.Name)
		}
	}
	if len(builtin) > 0 {
		fmt.Fprintf(a.streams.Out, "note: %s: served by beige's built-in plugin of that name (the package's code is not run)\n", strings.Join(builtin, ", "))
	}
	if len(typescript) > 0 {
		fmt.Fprintf(a.streams.Out, "note: %s: TypeScript/JavaScript plugins, run by the gateway in a confined Node.js process: they need Node.js %d or later (node in PATH, $%s, or plugins.<name>.node)\n", strings.Join(typescript, ", "), nodehost.MinNodeMajor, nodehost.NodeEnv)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func status(e install.Entry) string {
	switch {
	case !e.InConfig:
		return "not in config"
	case e.Path == "":
		return "enabled (built in)"
	}
	if _, err := os.Stat(e.Path); errors.Is(err, os.ErrNotExist) {
		return "enabled, folder missing"
	}
	return "enabled"
}

// isTerminal says whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
