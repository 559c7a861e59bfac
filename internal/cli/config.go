package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/beige-dev/beige/internal/plugin/nodehost"
	"os"

	"github.com/spf13/cobra"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/llm"
	_ "github.com/beige-dev/beige/internal/llm/providers" // the provider APIs
	"github.com/beige-dev/beige/internal/plugin"
	_ "github.com/beige-dev/beige/internal/plugin/builtin" // the built-in plugins
)

func (a *app) configCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Work with the config file",
	}
	validate := &cobra.Command{
		Use:   "validate",
		Short: "Check the config and print OK or every problem found",
		Long: `Validate loads the config (default $BEIGE_HOME/config.json5, or -c PATH),
resolves ${VAR} references from the environment, and checks it: the keys
and values, the plugin and skill folders, each plugin's config (merged with
its defaultConfig and each agent's pluginConfigs) against the configSchema of
its plugin.json, and that every provider's API is built into this binary.
gateway start checks the same. It prints OK and exits 0, or prints every
problem as file:line:col: path: message and exits 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			for _, w := range plugin.ConfigWarnings(cfg) {
				fmt.Fprintln(a.streams.Err, "warning: "+w)
			}
			fmt.Fprintln(a.streams.Out, "OK")
			return nil
		},
	}
	schema := &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of config.json5, for editors",
		Long: `Schema prints the JSON Schema (draft 2020-12) of config.json5, generated
from the types the loader decodes into. Editors that read "$schema" complete
and check the file with it; beige setup writes it to
$BEIGE_HOME/config.schema.json, which the template's "$schema" names. The
schema checks keys and shapes; beige config validate checks everything
(environment variables, plugin folders, provider names).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := config.JSONSchema()
			if err != nil {
				return exitf(ExitFailure, "%v", err)
			}
			_, err = a.streams.Out.Write(b)
			return err
		},
	}
	cmd.AddCommand(validate, schema)
	return cmd
}

// loadConfig loads the config the user chose; on failure it prints every
// problem and returns an exit error.
func (a *app) loadConfig() (*config.Config, error) {
	path, err := a.config()
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(path, loadOptions())
	if err != nil {
		var list config.ErrorList
		if errors.As(err, &list) {
			for _, e := range list {
				fmt.Fprintln(a.streams.Err, e.Error())
			}
			return nil, &ExitError{Code: ExitFailure}
		}
		return nil, exitf(ExitFailure, "%v", err)
	}
	return cfg, nil
}

// loadOptions tells the config loader what is built into this binary: the
// built-in plugins and the provider APIs.
func loadOptions() *config.LoadOptions {
	return &config.LoadOptions{
		Builtins: plugin.Builtins(), SupportedAPI: llm.HasAPI,
		CheckNode: func(node string) error {
			_, err := nodehost.FindNode(context.Background(), node)
			return err
		},
	}
}

// loadClientConfig loads the config for a command that talks to a running
// gateway: it needs only gateway.host, port, authToken and logFile, so a
// variable unset in this shell (an API key, say) reads as empty instead of
// failing. A config that still does not load gives nil and a warning; the
// defaults (and -g) are used then.
func (a *app) loadClientConfig() *config.Config {
	path, err := a.config()
	if err != nil {
		return nil
	}
	opts := loadOptions()
	opts.LookupEnv = func(k string) (string, bool) {
		v, _ := os.LookupEnv(k)
		return v, true
	}
	cfg, err := config.Load(path, opts)
	if err != nil {
		fmt.Fprintf(a.streams.Err, "beige: warning: %s does not load (run beige config validate); using the defaults\n", path)
		return nil
	}
	return cfg
}
