package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/beige-dev/beige/internal/sandbox/docker"
	"github.com/beige-dev/beige/sandboximage"
)

// DefaultImage is the tag `beige sandbox build` gives the default image.
const DefaultImage = "beige-sandbox:latest"

func (a *app) sandboxCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Build the default sandbox image",
	}
	var tag, dir string
	var busybox bool
	build := &cobra.Command{
		Use:   "build",
		Short: "Build the default sandbox image (Deno, Node.js, curl, jq; no git, no secrets)",
		Long: `Build builds the default sandbox image through the Docker engine (DOCKER_HOST
is honoured) and prints the build's progress. The Dockerfile is built into
beige (it is sandboximage/Dockerfile in the source); --dir builds another folder.

The build pulls its base images (debian:bookworm-slim, denoland/deno), so
the engine must reach a registry. On a machine that cannot, --busybox makes
a minimal image from the host's static busybox (Debian's busybox-static)
instead: a shell and the core utilities, enough to try Beige out.

Sandboxes whose image changed are recreated at the next gateway start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			d, err := docker.New(docker.Options{})
			if err != nil {
				return exitf(ExitFailure, "connect to the Docker engine: %v", err)
			}
			defer d.Close()
			if err := d.Ping(ctx); err != nil {
				return exitf(ExitFailure, "the Docker engine does not answer (is dockerd running? DOCKER_HOST=%q): %v", os.Getenv("DOCKER_HOST"), err)
			}
			if busybox {
				fmt.Fprintf(a.streams.Err, "making %s from %s\n", tag, docker.BusyboxPath)
				if err := d.ImportBusybox(ctx, tag); err != nil {
					if errors.Is(err, docker.ErrNoBusybox) {
						return exitf(ExitFailure, "%v (apt-get install busybox-static)", err)
					}
					return exitf(ExitFailure, "%v", err)
				}
				fmt.Fprintf(a.streams.Out, "built %s (minimal busybox image)\n", tag)
				return nil
			}
			if dir == "" {
				tmp, err := os.MkdirTemp("", "beige-sandbox-build-")
				if err != nil {
					return exitf(ExitFailure, "%v", err)
				}
				defer os.RemoveAll(tmp)
				if err := os.WriteFile(filepath.Join(tmp, "Dockerfile"), sandboximage.Dockerfile, 0o644); err != nil {
					return exitf(ExitFailure, "%v", err)
				}
				dir = tmp
			}
			fmt.Fprintf(a.streams.Err, "building %s\n", tag)
			if err := d.BuildImage(ctx, dir, tag, a.streams.Err); err != nil {
				return exitf(ExitFailure, "%v\nif the engine cannot reach a registry, try: beige sandbox build --busybox", err)
			}
			fmt.Fprintf(a.streams.Out, "built %s\n", tag)
			return nil
		},
	}
	build.Flags().StringVarP(&tag, "tag", "t", DefaultImage, "image tag")
	build.Flags().StringVar(&dir, "dir", "", "build this folder's Dockerfile instead of the built-in one")
	build.Flags().BoolVar(&busybox, "busybox", false, "make a minimal image from the host's busybox-static, without a registry")
	cmd.AddCommand(build)
	return cmd
}
