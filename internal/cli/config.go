package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/beige-dev/beige/internal/config"
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
resolves ${VAR} references from the environment, and checks it. It prints OK
and exits 0, or prints every problem as file:line:col: path: message and
exits 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := a.loadConfig(); err != nil {
				return err
			}
			fmt.Fprintln(a.streams.Out, "OK")
			return nil
		},
	}
	cmd.AddCommand(validate)
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
			if len(list) > 1 {
				fmt.Fprintf(a.streams.Err, "%d problems\n", len(list))
			}
			return nil, &ExitError{Code: ExitFailure}
		}
		return nil, exitf(ExitFailure, "%v", err)
	}
	return cfg, nil
}

// loadOptions tells the config loader what is built into this binary.
func loadOptions() *config.LoadOptions {
	return nil
}
