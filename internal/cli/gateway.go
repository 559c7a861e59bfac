package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/beige-dev/beige/internal/gateway"
	"github.com/beige-dev/beige/internal/logfile"
)

func (a *app) gatewayCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Start, stop and watch the gateway",
	}
	var foreground bool
	var timeout float64
	var logLevel string
	start := &cobra.Command{
		Use:   "start",
		Short: "Start the gateway (in the background unless --foreground)",
		Long: `Start loads and checks the config, prepares every agent's sandbox (creating
or re-attaching to the beige-<agent> containers), and serves the HTTP API on
gateway.host:gateway.port.

With --foreground it runs until Ctrl-C or SIGTERM, which drains in-flight
calls (at most 10 s) and exits. The sandboxes are left running so that the
next start re-attaches to them at once; they are removed when their agent
is no longer in the config.`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{needsHome: "yes"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if !foreground {
				return errNotImplemented("gateway start without --foreground")
			}
			return a.runForeground(cmd.Context(), logLevel)
		},
	}
	start.Flags().BoolVarP(&foreground, "foreground", "F", false, "run in the foreground; Ctrl-C or SIGTERM stops it")
	start.Flags().Float64Var(&timeout, "timeout", 300, "seconds to wait for /api/health when starting in the background")
	start.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
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

// runForeground runs the gateway until SIGINT or SIGTERM.
func (a *app) runForeground(ctx context.Context, level string) error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return exitf(ExitUsage, "--log-level: %v", err)
	}
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	h, err := a.home()
	if err != nil {
		return err
	}
	logPath := cfg.Gateway.LogFile
	if logPath == "" {
		logPath = h.GatewayLog()
	}
	logFile, err := logfile.Open(logPath, &logfile.Options{MaxSizeBytes: cfg.Gateway.Log.MaxSizeBytes, MaxFiles: cfg.Gateway.Log.MaxFiles})
	if err != nil {
		return exitf(ExitFailure, "gateway log: %v", err)
	}
	defer logFile.Close()
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(a.streams.Err, logFile), &slog.HandlerOptions{Level: lvl}))
	logger.Info("starting gateway", "config", cfg.File, "home", h.Dir, "log", logPath, "pid", os.Getpid())

	if err := os.WriteFile(h.PIDFile(), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return exitf(ExitFailure, "write pid file: %v", err)
	}
	defer os.Remove(h.PIDFile())

	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := gateway.Run(ctx, gateway.Options{Home: h, Config: cfg, Logger: logger}); err != nil {
		logger.Error("gateway failed", "err", err)
		return exitf(ExitFailure, "%v", err)
	}
	fmt.Fprintln(a.streams.Err, "beige: gateway stopped")
	return nil
}
