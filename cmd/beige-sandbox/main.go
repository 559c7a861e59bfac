// Command beige-sandbox is the small static binary mounted into every
// sandbox at /beige/beige-sandbox (and at /beige/tool-client). It is
//
//   - the container's main process (`idle`): it waits for SIGTERM or SIGINT;
//   - the gateway's helper (`serve`): it speaks the helper protocol on
//     stdin/stdout, see internal/proto/helper.go;
//   - the tool client, when invoked as `tool-client` (by the launchers in
//     /tools/bin).
//
// It must stay small: only the standard library, internal/proto and
// internal/sandbox/helper.
package main

import "os"

func main() { os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr)) }
