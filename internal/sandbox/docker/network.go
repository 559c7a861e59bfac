package docker

import (
	"github.com/beige-dev/beige/internal/sandbox"
)

// networkOf returns the engine's NetworkMode for spec.Network and the
// env the mode adds (which wins over Spec.Env).
func networkOf(spec sandbox.Spec) (mode string, env map[string]string) {
	switch spec.Network {
	case "", sandbox.NetworkProxy:
		return "none", sandbox.ProxyEnv()
	case sandbox.NetworkNone:
		return "none", nil
	case sandbox.NetworkOpen, sandbox.NetworkBridge:
		return "bridge", nil
	}
	return spec.Network, nil
}
