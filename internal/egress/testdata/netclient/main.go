// Command netclient is what the egress tests run inside a sandbox:
//
//	netclient get <url> [ca.pem]        GET through HTTP(S)_PROXY; prints "<status> <body>" (no ca.pem: SSL_CERT_FILE)
//	netclient bench <url> <ca.pem> <n>  n GETs on one kept-alive client; prints the p50 in µs
//	netclient dial <host:port>          a direct TCP connection, ignoring the proxy
//	netclient dns <server:53> <name>    a DNS query straight to server
//	netclient listen <port>             answer "peer" to every connection (forever)
//	netclient myip -                    the first non-loopback IPv4 address
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Println("usage: netclient get|bench|dial|dns ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "get":
		err = get(os.Args[2], arg(3))
	case "bench":
		n, _ := strconv.Atoi(arg(4))
		err = bench(os.Args[2], arg(3), n)
	case "listen":
		var ln net.Listener
		ln, err = net.Listen("tcp", ":"+os.Args[2])
		for err == nil {
			var c net.Conn
			if c, err = ln.Accept(); err == nil {
				io.WriteString(c, "peer\n")
				c.Close()
			}
		}
	case "myip":
		addrs, _ := net.InterfaceAddrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
				fmt.Println(n.IP)
				break
			}
		}
	case "dial":
		var c net.Conn
		c, err = net.DialTimeout("tcp", os.Args[2], 3*time.Second)
		if err == nil {
			c.Close()
			fmt.Println("connected")
		}
	case "dns":
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", os.Args[2])
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		var addrs []string
		addrs, err = r.LookupHost(ctx, arg(3))
		if err == nil {
			fmt.Println("resolved", addrs)
		}
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}

func arg(i int) string {
	if i < len(os.Args) {
		return os.Args[i]
	}
	return ""
}

func client(ca string) (*http.Client, error) {
	// Without ca: the system roots, which SSL_CERT_FILE sets, and the
	// URL's host name.
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: &tls.Config{}}
	if ca != "" {
		tr.TLSClientConfig.ServerName = "example.com" // the httptest certificate

		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tr.TLSClientConfig.RootCAs = pool
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}, nil
}

func get(url, ca string) error {
	c, err := client(ca)
	if err != nil {
		return err
	}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d %s", resp.StatusCode, b)
	return nil
}

func bench(url, ca string, n int) error {
	c, err := client(ca)
	if err != nil {
		return err
	}
	var ds []time.Duration
	for i := range n + 5 {
		start := time.Now()
		resp, err := c.Get(url)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if i >= 5 { // the first ones open the connection and the tunnel
			ds = append(ds, time.Since(start))
		}
	}
	slices.Sort(ds)
	fmt.Println(ds[len(ds)/2].Microseconds())
	return nil
}
