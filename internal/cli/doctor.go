package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/beige-dev/beige/internal/audit"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/beige-dev/beige/internal/config"
	"github.com/beige-dev/beige/internal/doctor"
	"github.com/beige-dev/beige/internal/gateway"
	"github.com/beige-dev/beige/internal/home"
	"github.com/beige-dev/beige/internal/llm"
	"github.com/beige-dev/beige/internal/plugin/jail"
	"github.com/beige-dev/beige/internal/sandbox/docker"
)

// ExitDoctorFailed is what doctor exits with when it could not run its
// checks (as opposed to 1: it ran and found errors).
const ExitDoctorFailed = 2

// doctorDeps are what doctor's checks reach outside: tests replace them.
type doctorDeps struct {
	engine        func() (doctor.Engine, func(), error) // nil engine: not checked
	helper        func(home.Home) (string, error)
	lookPath      func(string) (string, error)
	providerCheck func(ctx context.Context, name string, p *config.Provider, cfg *config.Config) error
	diskFree      func(string) (uint64, error)
	jailProbe     func() error // nil: not checked
}

var defaultDoctorDeps = doctorDeps{
	engine: func() (doctor.Engine, func(), error) {
		d, err := docker.New(docker.Options{})
		if err != nil {
			return nil, nil, err
		}
		return d, func() { d.Close() }, nil
	},
	helper:        gateway.FindHelperBinary,
	lookPath:      exec.LookPath,
	providerCheck: checkProviderKey,
	jailProbe:     jail.Probe,
}

func (a *app) doctorCommand() *cobra.Command {
	var asJSON, online, noEngine bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the installation and the config; print findings with their fixes",
		Long: `Doctor checks the installation and the config and prints what it finds, worst
first, each with its fix: the Docker engine (reachable, its version and API)
and each agent's sandbox image; the beige-sandbox binary; Node.js when a
plugin needs it; whether this machine can make the namespace jail that
TypeScript/JavaScript plugins run in (and what is missing when it cannot),
and a plugin run without it (confine: false); an API bound beyond loopback without gateway.authToken; a
secret written into the config instead of ${VAR}; $BEIGE_HOME, its sockets
or the config open to other users; an agent with network "open", user root,
no CPU, memory or process limit, or extraMounts of sensitive host paths
(/, the Docker socket, ~/.ssh, ~/.aws, $BEIGE_HOME...) or writable outside its
workspace; a broken audit chain; the disk space left for $BEIGE_HOME.

--online also asks each provider whether it accepts its key (a one-token
request to the first model configured for it: it may cost a token).

It exits 0 when nothing is worse than a warning, 1 when there are errors,
and 2 when doctor itself could not run. --json prints the findings as a JSON
array of {severity, id, message, fix}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return a.doctor(ctx, defaultDoctorDeps, asJSON, online, noEngine)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the findings as JSON")
	cmd.Flags().BoolVar(&online, "online", false, "also check each provider's key with the provider")
	cmd.Flags().BoolVar(&noEngine, "no-engine", false, "do not check the Docker engine and the images")
	return cmd
}

func (a *app) doctor(ctx context.Context, deps doctorDeps, asJSON, online, noEngine bool) error {
	h, err := a.home()
	if err != nil {
		return &ExitError{Code: ExitDoctorFailed, Err: err}
	}
	path, err := a.config()
	if err != nil {
		return &ExitError{Code: ExitDoctorFailed, Err: err}
	}
	lo := loadOptions()
	o := doctor.Options{Home: h, LookPath: deps.lookPath, DiskFree: deps.diskFree, Builtins: lo.Builtins, CheckNode: lo.CheckNode, JailProbe: deps.jailProbe}
	o.Config, o.ConfigErr = config.Load(path, lo)
	o.AuditVerify = func(string) (doctor.AuditReport, error) {
		retention := o.Config != nil && o.Config.Gateway.Audit.MaxFiles > 0
		rep, err := audit.Verify(h.AuditLog(), &audit.VerifyOptions{HeadPath: h.AuditHead(), Retention: retention})
		if err != nil {
			return doctor.AuditReport{}, err
		}
		out := doctor.AuditReport{Records: rep.Records, Head: rep.Last.Seq}
		if rep.Break != nil {
			out.Broken = rep.Break.String()
		}
		return out, nil
	}
	if o.ConfigErr != nil {
		o.Config = nil
		var list config.ErrorList
		if errors.As(o.ConfigErr, &list) {
			msgs := make([]string, len(list))
			for i, e := range list {
				msgs[i] = e.Error()
			}
			o.ConfigErr = errors.New(strings.Join(msgs, "; "))
		}
	}
	if deps.helper != nil {
		o.HelperBinary = func() (string, error) { return deps.helper(h) }
	}
	if !noEngine && deps.engine != nil {
		e, closeFn, err := deps.engine()
		if err != nil {
			return &ExitError{Code: ExitDoctorFailed, Err: fmt.Errorf("doctor: %w", err)}
		}
		if closeFn != nil {
			defer closeFn()
		}
		o.Engine = e
	}
	if online && deps.providerCheck != nil && o.Config != nil {
		cfg := o.Config
		o.ProviderCheck = func(ctx context.Context, name string, p *config.Provider) error {
			return deps.providerCheck(ctx, name, p, cfg)
		}
	}
	ectx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	findings := doctor.Run(ectx, o)
	if asJSON {
		if findings == nil {
			findings = []doctor.Finding{}
		}
		enc := json.NewEncoder(a.streams.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(findings); err != nil {
			return &ExitError{Code: ExitDoctorFailed, Err: err}
		}
	} else {
		printFindings(a.streams.Out, findings)
	}
	if doctor.Worst(findings) == doctor.Error {
		return &ExitError{Code: ExitFailure}
	}
	return nil
}

func printFindings(w interface{ Write([]byte) (int, error) }, fs []doctor.Finding) {
	counts := map[doctor.Severity]int{}
	for _, f := range fs {
		counts[f.Severity]++
		fmt.Fprintf(w, "%-7s %s: %s\n", f.Severity, f.ID, f.Message)
		if f.Fix != "" {
			fmt.Fprintf(w, "        fix: %s\n", f.Fix)
		}
	}
	fmt.Fprintf(w, "%d errors, %d warnings\n", counts[doctor.Error], counts[doctor.Warning])
}

// checkProviderKey sends a one-token request to the first model configured
// for provider name and tells whether the provider refused the key.
func checkProviderKey(ctx context.Context, name string, p *config.Provider, cfg *config.Config) error {
	model := ""
	for _, an := range cfg.AgentOrder {
		ag := cfg.Agents[an]
		for _, m := range append([]config.ModelRef{ag.Model}, ag.FallbackModels...) {
			if m.Provider == name && model == "" {
				model = m.Model
			}
		}
	}
	if model == "" {
		if len(p.Models) == 0 {
			return errors.New("no agent uses it: not checked")
		}
		model = p.Models[0].ID
	}
	client, err := llm.NewProvider(llm.ProviderConfig{Name: name, APIKey: p.APIKey.Reveal(), BaseURL: p.BaseURL, API: p.API})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req := llm.Request{
		Model:   llm.NewCatalogue().Lookup(name, p.API, model, p.BaseURL),
		Context: llm.Context{Messages: []llm.Message{llm.UserText("ping")}},
		Options: llm.Options{MaxTokens: 1},
	}
	_, err = client.Stream(ctx, req, func(llm.Event) {})
	var ae *llm.APIError
	if errors.As(err, &ae) && (ae.StatusCode == http.StatusUnauthorized || ae.StatusCode == http.StatusForbidden) {
		return fmt.Errorf("%w (HTTP %d: %s)", doctor.ErrKeyRejected, ae.StatusCode, ae.Message)
	}
	return err
}
