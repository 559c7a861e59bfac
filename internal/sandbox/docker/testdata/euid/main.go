// Command euid prints its effective uid. The tests make a setuid copy of it
// in a workspace and check who can run it, and as whom.
package main

import (
	"fmt"
	"os"
)

func main() { fmt.Println(os.Geteuid()) }
