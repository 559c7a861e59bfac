package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/egress"
	"github.com/beige-dev/beige/internal/egress/trust"
)

// PluginSocketsFolder is the folder of $BEIGE_HOME/sockets that holds the
// TypeScript/JavaScript plugins' egress sockets, one subfolder per plugin.
// An agent's socket folder is $BEIGE_HOME/sockets/<agent>, and an agent
// name starts with a letter or a digit (config.AgentNameRE): no agent's
// folder can be this one, nor be inside it.
const PluginSocketsFolder = "_plugins"

// PluginCABundleFile is, beside a plugin's egress socket when it has
// egress credentials, the gateway host's CA bundle followed by the egress
// CA: the jail binds it and names it by trust.Env (SSL_CERT_FILE, ...).
const PluginCABundleFile = "ca-bundle.pem"

// PluginEgressAgent is the agent field of a plugin's egress audit records
// (and the agent its approvals and metrics are counted for): "plugin:"
// and the plugin's name. No agent name contains ':' (config.AgentNameRE),
// so it is never an agent's.
func PluginEgressAgent(plugin string) string { return "plugin:" + plugin }

// safePluginFolder is a plugin name used as it is for its socket folder;
// any other name (a plugin name is a config key, anything) becomes a hash.
var safePluginFolder = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,39}$`)

// pluginSocketDir is the socket folder of the plugin's egress socket.
func (g *Gateway) pluginSocketDir(plugin string) string {
	dir := plugin
	if !safePluginFolder.MatchString(plugin) {
		sum := sha256.Sum256([]byte(plugin))
		dir = "_" + hex.EncodeToString(sum[:10]) // '_': no safe name looks like it
	}
	return filepath.Join(g.home.SocketsDir(), PluginSocketsFolder, dir)
}

// openPluginEgress serves the egress proxy of a TypeScript/JavaScript
// plugin (plugin.Options.EgressSocket): plugins.<p>.egress, by default
// every public destination on any port, never a loopback, private,
// link-local or other special address or one of the gateway host's own
// unless an address rule allows it (egress.Policy.CheckAddr), every
// connection audited as PluginEgressAgent(plugin). It returns the
// socket's host path; the proxy is closed by Shutdown.
func (g *Gateway) openPluginEgress(plugin string, pc *config.Plugin) (string, error) {
	e := pc.Egress
	pol, err := egress.NewPolicy(e.Allow, e.Deny)
	if err != nil {
		return "", fmt.Errorf("plugins.%s.egress: %w", plugin, err)
	}
	dir := g.pluginSocketDir(plugin)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", fmt.Errorf("egress socket folder of plugin %q: %w", plugin, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("egress socket folder of plugin %q: %w", plugin, err)
	}
	// egress.Listen checks that the folder is the gateway's and closed to
	// others (a folder left by an older gateway with a wider mode fails).
	sock := filepath.Join(dir, egress.SocketName)
	ln, err := egress.Listen(sock)
	if err != nil {
		return "", fmt.Errorf("egress socket of plugin %q: %w", plugin, err)
	}
	opts := g.egressOptions()
	bundle := filepath.Join(dir, PluginCABundleFile)
	if len(e.Credentials) > 0 {
		if err := g.egressCredentials(&opts, dir, e.Credentials, fmt.Sprintf("plugins.%s.egress.credentials", plugin)); err != nil {
			ln.Close()
			return "", err
		}
		// The plugin's children (allowChildProcess: curl, git, gh) trust
		// the CA through the variables that replace a client's bundle:
		// they name this one, the gateway host's roots and the CA.
		if _, err := trust.Write(filepath.Join(dir, EgressCAFile), bundle, trust.SystemBundles); err != nil {
			ln.Close()
			return "", fmt.Errorf("egress CA bundle of plugin %q: %w", plugin, err)
		}
	} else {
		// Without credentials nothing is intercepted: a CA or bundle left
		// from an earlier config would only widen what the host trusts.
		for _, f := range []string{bundle, filepath.Join(dir, EgressCAFile)} {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				ln.Close()
				return "", fmt.Errorf("egress CA of plugin %q: %w", plugin, err)
			}
		}
	}
	p := egress.New(PluginEgressAgent(plugin), pol, &opts)
	g.pluginEgressMu.Lock()
	g.pluginEgress = append(g.pluginEgress, p)
	g.pluginEgressMu.Unlock()
	log := g.log.With("plugin", plugin)
	go func() {
		if err := p.Serve(ln); err != nil {
			log.Error("egress proxy of the plugin stopped", "err", err)
		}
	}()
	return sock, nil
}

// closePluginEgress closes the plugins' egress proxies and their
// connections.
func (g *Gateway) closePluginEgress() error {
	g.pluginEgressMu.Lock()
	ps := g.pluginEgress
	g.pluginEgress = nil
	g.pluginEgressMu.Unlock()
	var errs []error
	for _, p := range ps {
		if err := p.Close(); err != nil {
			errs = append(errs, fmt.Errorf("egress proxy of a plugin: %w", err))
		}
	}
	return errors.Join(errs...)
}
