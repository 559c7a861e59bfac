// Command beige is the Beige gateway, its command line and its terminal client.
package main

import (
	"os"

	"github.com/beige-dev/beige/internal/cli"
	// The plugin jail's init runs first: `beige __plugin-jail` is the
	// re-exec'd init of a confined plugin host and never reaches the
	// command line parser.
	_ "github.com/beige-dev/beige/internal/plugin/jail"
)

func main() { os.Exit(cli.Run(os.Args[1:])) }
