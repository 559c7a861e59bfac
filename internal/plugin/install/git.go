package install

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// DefaultGitHubURL is where github: sources are cloned from.
const DefaultGitHubURL = "https://github.com"

// gitSafety is given to git clone with -c: nothing of the clone, nor of
// the host's config for these keys, runs a program (hooks, fsmonitor,
// ext:: and fd:: transports) or follows submodules.
var gitSafety = []string{
	"core.fsmonitor=false",
	"core.hooksPath=/dev/null",
	"core.sshCommand=ssh -o BatchMode=yes",
	"submodule.recurse=false",
	"fetch.recurseSubmodules=false",
	"protocol.ext.allow=never",
	"protocol.fd.allow=never",
	"transfer.fsckObjects=true",
}

// cloneGitHub clones the repository (one commit deep, at Ref when given)
// into dst, a folder that does not exist yet.
func (in *Installer) cloneGitHub(ctx context.Context, s Source, dst string) error {
	git, err := exec.LookPath("git")
	if err != nil {
		return fmt.Errorf("github: sources need git, which is not installed")
	}
	base := strings.TrimSuffix(in.opts.GitHubURL, "/")
	u := base + "/" + s.Owner + "/" + s.Repo
	protocols := "https:http:ssh:git"
	fileAllow := "never"
	if strings.HasPrefix(base, "file://") {
		if !in.opts.AllowFileGit {
			return fmt.Errorf("the GitHub URL %s is a file:// URL, which is refused unless BEIGE_GITHUB_ALLOW_FILE=1 (for tests)", base)
		}
		protocols, fileAllow = "file", "always"
	} else if _, err := httpURL(base); err != nil {
		return fmt.Errorf("the GitHub URL: %w", err)
	}
	var args []string
	for _, c := range append(gitSafety, "protocol.file.allow="+fileAllow) {
		args = append(args, "-c", c)
	}
	args = append(args, "clone", "--depth=1", "--no-recurse-submodules", "--template=", "--quiet")
	if in.progress != nil && in.progress.TTY {
		args = append(args[:len(args)-1], "--progress")
	}
	if s.Ref != "" {
		args = append(args, "--branch="+s.Ref)
	}
	args = append(args, "--", u, dst)
	in.progress.Stepf("cloning %s", redact(u)+refSuffix(s.Ref))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, git, args...)
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ALLOW_PROTOCOL="+protocols,
		"GIT_PROTOCOL_FROM_USER=0",
		"GIT_LFS_SKIP_SMUDGE=1",
	)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if in.progress != nil && in.progress.TTY && in.progress.W != nil {
		cmd.Stderr = in.progress.W
	}
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errOut.String())
		if len(msg) > 2000 {
			msg = msg[len(msg)-2000:]
		}
		return fmt.Errorf("git clone %s%s: %v: %s", redact(u), refSuffix(s.Ref), err, msg)
	}
	return nil
}

func refSuffix(ref string) string {
	if ref == "" {
		return ""
	}
	return " at " + ref
}
