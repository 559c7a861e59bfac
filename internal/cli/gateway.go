package cli

import (
	"github.com/spf13/cobra"
)

func (a *app) gatewayCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Start, stop and watch the gateway",
	}
	var foreground bool
	var timeout float64
	start := &cobra.Command{
		Use:         "start",
		Short:       "Start the gateway (in the background unless --foreground)",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{needsHome: "yes"},
		RunE: func(cmd *cobra.Command, args []string) error {
			return errNotImplemented("gateway start")
		},
	}
	start.Flags().BoolVarP(&foreground, "foreground", "F", false, "run in the foreground; Ctrl-C or SIGTERM stops it")
	start.Flags().Float64Var(&timeout, "timeout", 300, "seconds to wait for /api/health when starting in the background")
	var follow bool
	logs := &cobra.Command{
		Use:         "logs",
		Short:       "Print the gateway log",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{needsHome: "yes"},
		RunE: func(cmd *cobra.Command, args []string) error {
			return errNotImplemented("gateway logs")
		},
	}
	logs.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines")
	notYet := func(use, short string) *cobra.Command {
		return &cobra.Command{
			Use:         use,
			Short:       short,
			Args:        cobra.NoArgs,
			Annotations: map[string]string{needsHome: "yes"},
			RunE: func(cmd *cobra.Command, args []string) error {
				return errNotImplemented("gateway " + use)
			},
		}
	}
	cmd.AddCommand(start,
		notYet("stop", "Stop the background gateway (SIGTERM, then SIGKILL after a bounded wait)"),
		notYet("status", "Show whether the gateway runs: pid, uptime, agents, sandboxes"),
		notYet("restart", "Restart the gateway gracefully"),
		logs,
	)
	return cmd
}
