package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/beige-dev/beige/internal/sandbox"
)

// BusyboxPath is where the host's static busybox is expected (Debian's
// busybox-static package).
const BusyboxPath = "/bin/busybox"

// BusyboxApplets are linked to busybox in a busybox image.
var BusyboxApplets = []string{
	"sh", "ash", "ls", "cat", "echo", "printf", "sleep", "ps", "env", "kill", "mkdir", "rm",
	"rmdir", "head", "tail", "wc", "dirname", "basename", "timeout", "id", "true", "false",
	"grep", "sed", "tr", "touch", "chmod", "chown", "pwd", "find", "seq", "yes", "dd", "cp",
	"mv", "ln", "stat", "test", "[", "sort", "uniq", "cut", "xargs", "awk", "pidof", "pgrep",
	"pkill", "date", "uname", "hostname", "whoami", "which", "nproc", "mount", "cmp", "md5sum",
	"sha256sum", "tee", "readlink", "realpath", "expr", "nohup", "setsid", "od", "hexdump",
	"diff", "wget", "nc", "ping", "mknod", "chroot", "du", "df",
}

// ErrNoBusybox means there is no static busybox on the host to make an image from.
var ErrNoBusybox = errors.New("sandbox: no static busybox (install Debian's busybox-static)")

// BusyboxRootFS returns the tar of a minimal root file system: the host's
// static busybox at bin/busybox with links for BusyboxApplets, /tmp,
// /workspace and an /etc/passwd with root and beige (1000, the default
// agent user when the gateway is root, home HomePath). It needs no registry, so it is
// how tests (and offline machines) get an image.
func BusyboxRootFS(busybox string) ([]byte, error) {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoBusybox, err)
	}
	f, err := elf.NewFile(bytes.NewReader(bb))
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not an ELF binary: %v", ErrNoBusybox, busybox, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("%w: %s is dynamically linked", ErrNoBusybox, busybox)
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	dir := func(name string, mode int64) {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: now})
	}
	file := func(name string, mode int64, data []byte) {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: now})
		tw.Write(data)
	}
	for _, d := range []string{"bin", "etc", "root", "proc", "sys", "dev", "usr", "usr/bin", "usr/local", "usr/local/bin", "workspace", "var"} {
		dir(d, 0o755)
	}
	dir("tmp", 0o1777)
	file("bin/busybox", 0o755, bb)
	have := busyboxApplets(busybox)
	for _, a := range BusyboxApplets {
		if have != nil && !have[a] {
			continue
		}
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777, ModTime: now})
	}
	file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nbeige:x:1000:1000:beige:"+sandbox.HomePath+":/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"))
	file("etc/group", 0o644, []byte("root:x:0:\nbeige:x:1000:\nnogroup:x:65534:\n"))
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// busyboxApplets returns the applets the host's busybox has, or nil if it
// cannot tell.
func busyboxApplets(busybox string) map[string]bool {
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil
	}
	have := make(map[string]bool)
	for _, a := range strings.Fields(string(out)) {
		have[a] = true
	}
	return have
}

type imageImporter interface {
	ImageImport(ctx context.Context, source client.ImageImportSource, ref string, options client.ImageImportOptions) (client.ImageImportResult, error)
}

// ImportImage makes image tag from the root file system tar rootfs, with
// ImageImport: no registry is needed.
func ImportImage(ctx context.Context, c imageImporter, rootfs []byte, tag, message string) error {
	res, err := c.ImageImport(ctx, client.ImageImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"}, tag,
		client.ImageImportOptions{Message: message, Changes: []string{`CMD ["/bin/sh"]`}})
	if err != nil {
		return fmt.Errorf("import %s: %w", tag, err)
	}
	defer res.Close()
	dec := json.NewDecoder(res)
	for {
		var m struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("import %s: %w", tag, err)
		}
		if m.Error != "" {
			return fmt.Errorf("import %s: %s", tag, m.Error)
		}
	}
}

// ImportBusybox makes image tag from the host's static busybox: a minimal
// sandbox image for machines that cannot reach a registry. Every import is
// a new image; the one that had the tag before is removed, unless a
// container uses it or another tag names it (the removal is not forced),
// instead of staying behind as a dangling <none> image.
func (d *Runtime) ImportBusybox(ctx context.Context, tag string) error {
	rootfs, err := BusyboxRootFS(BusyboxPath)
	if err != nil {
		return err
	}
	old, oldErr := d.api.ImageInspect(ctx, tag)
	if err := ImportImage(ctx, d.api, rootfs, tag, "beige minimal sandbox (busybox)"); err != nil {
		return err
	}
	if oldErr != nil || old.ID == "" {
		return nil
	}
	if now, err := d.api.ImageInspect(ctx, tag); err == nil && now.ID != old.ID {
		if _, err := d.api.ImageRemove(ctx, old.ID, client.ImageRemoveOptions{}); err != nil {
			d.log.Debug("the image the import replaced stays", "image", old.ID, "err", err)
		}
	}
	return nil
}
