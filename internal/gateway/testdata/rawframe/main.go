// Command rawframe sends one raw frame (its second argument, plus a newline)
// to the unix socket named by its first argument and prints the answer. The
// tests run it inside a sandbox as a hand-written tool client.
package main

import (
	"bufio"
	"fmt"
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
	fmt.Fprintf(c, "%s\n", os.Args[2])
	line, _ := bufio.NewReader(c).ReadString('\n') // the answer is one line
	fmt.Print(line)
}
