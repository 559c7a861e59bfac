package gateway

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/beige-dev/beige/internal/atomicfile"
	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/egress"
	"github.com/beige-dev/beige/internal/metrics"
)

// openEgress says what the agent's network mode gives up and, in the
// "proxy" mode, serves its egress proxy on $BEIGE_HOME/sockets/<agent>/
// egress.sock (mounted at /beige/egress.sock), before its sandbox starts.
func (a *agentRuntime) openEgress() error {
	s := a.cfg.Sandbox
	log := a.g.log.With("agent", a.name)
	switch s.Network {
	case "", config.NetworkProxy:
	case config.NetworkNone:
		return nil
	case config.NetworkBridge:
		log.Info(`sandbox.network "bridge" is the old name of "open"`)
		fallthrough
	case config.NetworkOpen:
		log.Warn(`sandbox.network "open": the sandbox reaches the internet, the other agents on Docker's bridge and the host's services on the bridge address, and its connections are not audited; the default "proxy" allows and audits each one`)
		return nil
	default:
		log.Warn("sandbox.network is a Docker network: the sandbox reaches whatever that network reaches, unaudited, like \"open\"", "network", s.Network)
		return nil
	}
	pol, err := egress.NewPolicy(s.Egress.Allow, s.Egress.Deny)
	if err != nil {
		return fmt.Errorf("sandbox.egress of agent %q: %w", a.name, err)
	}
	sock := filepath.Join(a.g.home.SocketDir(a.name), egress.SocketName)
	ln, err := egress.Listen(sock)
	if err != nil {
		return fmt.Errorf("egress socket of agent %q: %w", a.name, err)
	}
	// The in-sandbox forwarder runs as the container's root, which has no
	// DAC_OVERRIDE, and the gateway may not be root: the socket is open to
	// every uid. Only this agent's sandbox can reach it ($BEIGE_HOME/sockets
	// is 0700), and whoever connects gets this agent's policy and audit.
	if err := os.Chmod(sock, 0o666); err != nil {
		ln.Close()
		return fmt.Errorf("egress socket of agent %q: %w", a.name, err)
	}
	opts := a.g.egressOptions()
	if len(s.Egress.Credentials) > 0 {
		if err := a.g.egressCredentials(&opts, a.g.home.SocketDir(a.name), s.Egress.Credentials, fmt.Sprintf("sandbox.egress.credentials of agent %q", a.name)); err != nil {
			ln.Close()
			return err
		}
	}
	a.egress = egress.New(a.name, pol, &opts)
	go func() {
		if err := a.egress.Serve(ln); err != nil {
			log.Error("egress proxy stopped", "err", err)
		}
	}()
	return nil
}

func (a *agentRuntime) closeEgress() error {
	if a.egress == nil {
		return nil
	}
	if err := a.egress.Close(); err != nil {
		return fmt.Errorf("egress proxy of agent %q: %w", a.name, err)
	}
	return nil
}

// EgressCAFile is where a sandbox finds the egress CA's certificate: in
// its socket folder, mounted read-only at /beige.
const EgressCAFile = "egress-ca.pem"

// egressCAEnv are the variables that make the usual clients trust the CA
// file in addition to their bundle (NODE_EXTRA_CA_CERTS, DENO_CERT).
// The variables that replace a client's bundle (trust.Env: SSL_CERT_FILE,
// CURL_CA_BUNDLE, REQUESTS_CA_BUNDLE, GIT_SSL_CAINFO) name instead the
// bundle the in-sandbox helper writes at start, the image's roots and the
// CA (trust.BundlePath), never the CA alone, which would fail every host
// that is not intercepted.
var egressCAEnv = []string{"NODE_EXTRA_CA_CERTS", "DENO_CERT"}

// egressOptions are the options of an egress proxy of this gateway (an
// agent's or a plugin's): its audit log, approvals and metrics.
func (g *Gateway) egressOptions() egress.Options {
	opts := egress.Options{}
	if g.opts.Egress != nil {
		opts = *g.opts.Egress
	}
	opts.Audit, opts.Logger = g.audit, g.log.With("component", "egress")
	if g.approvals != nil {
		opts.Approver = g.approvals
	}
	m := g.metrics
	opts.OnConnection = func(agent string, allowed bool) {
		d := metrics.DecisionDeny
		if allowed {
			d = metrics.DecisionAllow
		}
		m.EgressConnection(agent, d)
	}
	return opts
}

// egressCredentials loads (or makes) the home's CA, puts its certificate
// (EgressCAFile) in dir, the proxy's socket folder, and gives the proxy the
// credentials to inject; what names the config key for errors.
func (g *Gateway) egressCredentials(opts *egress.Options, dir string, creds []config.EgressCredential, what string) error {
	g.caOnce.Do(func() { g.ca, g.caErr = egress.LoadOrCreateCA(g.home.EgressCADir()) })
	if g.caErr != nil {
		return fmt.Errorf("egress CA: %w", g.caErr)
	}
	if err := atomicfile.WriteIfChanged(filepath.Join(dir, EgressCAFile), g.ca.CertPEM(), 0o644); err != nil {
		return fmt.Errorf("egress CA certificate for %s: %w", what, err)
	}
	opts.CA = g.ca
	opts.Credentials = nil
	for _, c := range creds {
		host, err := egress.CredentialHost(c.Host)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		opts.Credentials = append(opts.Credentials, egress.Credential{Host: host, Header: c.Header, Value: c.Value})
	}
	return nil
}
