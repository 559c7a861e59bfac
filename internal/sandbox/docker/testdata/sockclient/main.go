// Command sockclient connects to the unix socket named by its argument and
// prints what it reads; the tests run it inside a sandbox.
package main

import (
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	c, err := net.Dial("unix", os.Args[1])
	if err != nil {
		fmt.Println("dial:", err)
		os.Exit(1)
	}
	defer c.Close()
	data, _ := io.ReadAll(c)
	fmt.Printf("%s\n", data)
}
