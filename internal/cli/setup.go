package cli

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/beige-dev/beige/internal/atomicfile"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/plugin"
)

func (a *app) setupCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "setup",
		Short: "Create $BEIGE_HOME with a commented config (safe to run again)",
		Long: `Setup creates the $BEIGE_HOME layout (default ~/.beige): config.json5 from a
commented template, and the agents/, sockets/ (mode 0700), logs/, data/,
sessions/ and tools/ folders. It never overwrites an existing config, so it
is safe to run again. Every other command (but version, help and
completion) runs it first when $BEIGE_HOME has no config.json5 yet, and
says so. It also writes config.schema.json (the JSON Schema of the config,
which the template's $schema points at, for editors) and the built-in
plugins' documentation; both belong to this version of beige and are
refreshed on every setup.`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{noSetup: "yes"},
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := a.home()
			if err != nil {
				return err
			}
			created, err := setupHome(h)
			if err != nil {
				return exitf(ExitFailure, "%v", err)
			}
			for _, c := range created {
				fmt.Fprintf(a.streams.Out, "created %s\n", c)
			}
			if len(created) == 0 {
				fmt.Fprintf(a.streams.Out, "%s is already set up\n", h.Dir)
			}
			fmt.Fprintf(a.streams.Out, "config: %s\n", h.Config())
			return nil
		},
	}
}

// setupHome creates the $BEIGE_HOME layout and writes the built-in plugins'
// documentation to $BEIGE_HOME/tools and the config's JSON Schema to
// $BEIGE_HOME/config.schema.json (both refreshed on every setup, since they
// belong to this version of beige).
func setupHome(h home.Home) ([]string, error) {
	created, err := h.Setup()
	if err != nil {
		return created, err
	}
	if err := plugin.WriteDocs(h.ToolsDir()); err != nil {
		return created, fmt.Errorf("setup: %w", err)
	}
	schema, err := config.JSONSchema()
	if err != nil {
		return created, fmt.Errorf("setup: %w", err)
	}
	if err := atomicfile.WriteIfChanged(filepath.Join(h.Dir, config.SchemaFile), schema, 0o644); err != nil {
		return created, fmt.Errorf("setup: write %s: %w", config.SchemaFile, err)
	}
	return created, nil
}
