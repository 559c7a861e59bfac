package sandbox

import (
	"github.com/beige-dev/beige/internal/egress/forwarder"
)

// Values of Spec.Network; any other value is the name of a Docker network
// the sandbox joins (as open as the bridge).
const (
	// NetworkProxy: the container has only loopback (NetworkMode "none");
	// the egress forwarder (`beige-sandbox idle`) listens on
	// EgressProxyAddr and relays to /beige/egress.sock, the gateway's egress
	// proxy, announced through the proxy variables of ProxyEnv.
	NetworkProxy = "proxy"
	// NetworkNone: loopback only, no proxy.
	NetworkNone = "none"
	// NetworkOpen: Docker's default bridge: the internet, the other
	// containers on the bridge and the host's services on its address.
	NetworkOpen = "open"
	// NetworkBridge is the old name of NetworkOpen.
	NetworkBridge = "bridge"
)

// EgressProxyAddr is where a "proxy" sandbox reaches the egress proxy.
const EgressProxyAddr = forwarder.DefaultAddr

// EgressSocketPath is the gateway's egress socket inside the sandbox
// (egress.sock in Spec.SocketDir).
const EgressSocketPath = forwarder.SocketPath

// ProxyEnv is the env of a "proxy" sandbox: the proxy variables (both
// cases, as tools read one or the other) and the forwarder's address.
func ProxyEnv() map[string]string {
	u := "http://" + EgressProxyAddr
	no := "localhost,127.0.0.1,::1"
	return map[string]string{
		"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u,
		"NO_PROXY": no, "no_proxy": no,
		forwarder.ListenEnv: EgressProxyAddr,
	}
}
