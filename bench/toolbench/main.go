// Command toolbench runs inside a sandbox: it runs a command N times and
// prints the p50, p90 and p99 of its wall time in microseconds, as JSON. The
// benchmark uses it to time plugin tool calls from where the agent makes them.
//
//	toolbench N command [args...]
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"time"
)

func main() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: toolbench N command [args...]")
		os.Exit(2)
	}
	var ds []time.Duration
	for range n {
		t0 := time.Now()
		out, err := exec.Command(os.Args[2], os.Args[3:]...).CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) { // a failing tool is still timed
			fmt.Fprintf(os.Stderr, "%s: %v: %s\n", os.Args[2], err, out)
			os.Exit(1)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	p := func(q float64) int64 { return ds[min(len(ds)-1, int(q*float64(len(ds))))].Microseconds() }
	json.NewEncoder(os.Stdout).Encode(map[string]int64{"n": int64(n), "p50": p(.5), "p90": p(.9), "p99": p(.99)})
}
