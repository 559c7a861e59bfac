package cli

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/spf13/cobra"

	gwclient "github.com/beige-dev/beige/internal/client"
	"github.com/beige-dev/beige/internal/logfile"
	"github.com/beige-dev/beige/internal/tui"
)

func (a *app) tuiCommand() *cobra.Command {
	var verbose bool
	cmd := &cobra.Command{
		Use:   "tui [agent]",
		Short: "Chat with an agent in the terminal, through the running gateway",
		Long: `Tui opens a chat with an agent of the running gateway (default: the first
agent of the config). It is a separate process that holds no API key: model
calls go through the gateway's /api/chat/stream and tool calls through
/api/agents/<agent>/exec, so the gateway applies its keys, hooks, fallback
models, policy and audit log. The agent loop itself runs here.

The gateway is -g when given, else gateway.host and gateway.port of the
config; gateway.authToken is sent when the config sets one.

Answers stream as they come and are rendered as markdown when complete; tool
calls are shown as they finish. Sessions are kept in $BEIGE_HOME/sessions/tui
(the default one is tui:<agent>:default).

Keys: Enter sends, Ctrl-J or Alt-Enter inserts a new line. Ctrl-C (or Esc) aborts the
running turn; a second Ctrl-C (or one when idle) quits; Ctrl-D quits.

Commands, handled here and never sent to the model:
  /new               start a fresh session
  /sessions          list this agent's terminal sessions
  /resume <n|id>     switch to a session
  /agent [name]      switch agent (without a name: list them)
  /model [n|id]      list the agent's models, or choose the one asked first
  /verbose on|off    announce each tool call above the UI before it runs
                     ("🔧 exec: ls -la"); /v on|off for short
  /help, /quit`,
		Example: `  beige tui
  beige tui assistant
  beige -g http://127.0.0.1:8080 tui assistant`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: a.completeAgentArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			var name string
			if len(args) == 1 {
				name = args[0]
			}
			return a.runTUI(cmd.Context(), name, verbose)
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "start with verbose mode on (/verbose on)")
	return cmd
}

func (a *app) runTUI(ctx context.Context, agentName string, verbose bool) error {
	h, err := a.home()
	if err != nil {
		return err
	}
	cfg := a.loadClientConfig()
	gw := a.client(cfg, nil)
	c := gwclient.New(gw.base, &gwclient.Options{Token: gw.token})

	// The terminal is the UI's: the log goes to a file.
	log := slog.New(slog.DiscardHandler)
	if lf, err := logfile.Open(filepath.Join(h.LogsDir(), "tui.log"), nil); err == nil {
		defer lf.Close()
		log = slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if ctx == nil {
		ctx = context.Background()
	}
	err = tui.Run(ctx, tui.Options{
		Client:      c,
		Agent:       agentName,
		SessionsDir: filepath.Join(h.SessionsDir(), tui.SessionsFolder),
		Verbose:     verbose,
		Logger:      log,
		// The UI, and what it prints above itself (answers, tool lines,
		// verbose notices), go to stderr, leaving stdout alone.
		Output: a.streams.Err,
	})
	if err != nil {
		return exitf(ExitFailure, "%v", err)
	}
	return nil
}
