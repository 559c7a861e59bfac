package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/beige-dev/beige/internal/egress/forwarder"
	"github.com/beige-dev/beige/internal/egress/trust"
	"github.com/beige-dev/beige/internal/proto"
	"github.com/beige-dev/beige/internal/sandbox/helper"
	"github.com/beige-dev/beige/internal/toolclient"
)

const usage = `usage: beige-sandbox idle|serve [--user UID:GID]|version
  idle     wait for SIGTERM or SIGINT (the sandbox's main process)
  serve    answer helper requests on stdin/stdout (started by the gateway,
           as root); --user: run commands and file operations as UID:GID
  version  print the helper protocol version
`

// run dispatches on the name the binary was called by, then on the first
// argument, and returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && filepath.Base(args[0]) == "tool-client" {
		return runToolClient(args[1:])
	}
	if len(args) < 2 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[1] {
	case "idle":
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		trust.Install(stderr)                             // the combined CA bundle, when the egress CA is mounted
		defer forwarder.StartFromEnv(os.Getenv, stderr)() // the egress forwarder, in the "proxy" network mode
		return idle(sig)
	case "serve":
		opts := helper.Options{Log: stderr}
		switch {
		case len(args) == 4 && args[2] == "--user":
			u, err := helper.ParseUser(args[3])
			if err != nil {
				fmt.Fprintf(stderr, "beige-sandbox serve: %v\n", err)
				return 2
			}
			opts.User = u
			if u.UID != 0 {
				if err := helper.DropGroups(); err != nil {
					fmt.Fprintf(stderr, "beige-sandbox serve: %v\n", err)
					return 1
				}
			}
		case len(args) != 2:
			fmt.Fprint(stderr, usage)
			return 2
		}
		trust.Install(stderr) // as idle does, in case a call comes before idle wrote it
		// Agent processes must not read, write or trace the helper through
		// /proc/<pid> (its stdin and stdout carry every session's calls).
		if err := helper.Harden(); err != nil {
			fmt.Fprintf(stderr, "beige-sandbox serve: %v\n", err)
			return 1
		}
		if err := helper.Serve(stdin, stdout, opts); err != nil {
			fmt.Fprintf(stderr, "beige-sandbox serve: %v\n", err)
			return 1
		}
		return 0
	case "version":
		fmt.Fprintf(stdout, "beige-sandbox helper protocol %s\n", proto.HelperVersion)
		return 0
	default:
		fmt.Fprint(stderr, usage)
		return 2
	}
}

// idle blocks until a signal (SIGTERM or SIGINT) arrives, then returns 0
// at once. (It is not PID 1: docker-init is, and forwards the signals.)
func idle(sig <-chan os.Signal) int {
	<-sig
	return 0
}

// runToolClient is the tool client run by the launchers in /tools/bin
// (`exec /beige/tool-client <tool> "$@"`): it sends the tool request to
// /beige/gateway.sock and prints the answer.
func runToolClient(args []string) int {
	return toolclient.Main(args, os.Getenv, os.Stdout, os.Stderr)
}
