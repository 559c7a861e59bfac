// Command beige is the Beige gateway, its command line and its terminal client.
package main

import (
	"os"

	"github.com/beige-dev/beige/internal/cli"
)

func main() { os.Exit(cli.Run(os.Args[1:])) }
