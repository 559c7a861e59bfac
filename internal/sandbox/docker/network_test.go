package docker

import (
	"slices"
	"strings"
	"testing"

	"github.com/beige-dev/beige/internal/sandbox"
)

// TestNetworkModes: what each sandbox.network value gives the engine.
// "proxy" (the default) and "none" leave the container only loopback; only
// "proxy" announces the egress proxy; "open", its old name "bridge" and a
// custom network name join that network.
func TestNetworkModes(t *testing.T) {
	tests := []struct {
		network, mode string
		proxy         bool
	}{
		{"", "none", true},
		{"proxy", "none", true},
		{"none", "none", false},
		{"open", "bridge", false},
		{"bridge", "bridge", false},
		{"my-net", "my-net", false},
	}
	for _, tt := range tests {
		spec := sandbox.Spec{Agent: "a", Image: "i", Network: tt.network, HelperBinary: "/h/beige-sandbox",
			Env: map[string]string{"HTTP_PROXY": "http://evil:1", "TZ": "UTC"}}
		cfg, host := containerConfig(spec, nil)
		if string(host.NetworkMode) != tt.mode {
			t.Errorf("network %q: NetworkMode = %q, want %q", tt.network, host.NetworkMode, tt.mode)
		}
		env := strings.Join(cfg.Env, " ")
		hasProxy := slices.Contains(cfg.Env, "HTTP_PROXY=http://127.0.0.1:3128") && slices.Contains(cfg.Env, "https_proxy=http://127.0.0.1:3128") &&
			slices.Contains(cfg.Env, "NO_PROXY=localhost,127.0.0.1,::1") && slices.Contains(cfg.Env, "BEIGE_EGRESS_LISTEN=127.0.0.1:3128")
		if hasProxy != tt.proxy {
			t.Errorf("network %q: env %q, want the proxy's variables: %v", tt.network, env, tt.proxy)
		}
		if tt.proxy && strings.Contains(env, "evil") {
			t.Errorf("network %q: extraEnv overrides the proxy: %q", tt.network, env)
		}
	}
	if ConfigHash(sandbox.Spec{Agent: "a", Image: "i"}, "", "", "") != ConfigHash(sandbox.Spec{Agent: "a", Image: "i", Network: "proxy"}, "", "", "") {
		t.Error("the default network hashes unlike \"proxy\"")
	}
}
