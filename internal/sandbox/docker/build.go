package docker

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/moby/moby/client"
	"github.com/moby/moby/client/pkg/jsonmessage"
)

// BuildImage builds the Dockerfile in contextDir into an image tagged tag,
// through the engine API (the classic builder; no docker CLI). The whole
// folder is sent as the build context (.dockerignore is not applied).
// Progress is written to progress, which may be nil: as the docker CLI
// shows it (progress bars) when progress is a terminal, else as lines.
// Used by `beige sandbox build`.
func (d *Runtime) BuildImage(ctx context.Context, contextDir, tag string, progress io.Writer) error {
	if progress == nil {
		progress = io.Discard
	}
	if _, err := os.Stat(filepath.Join(contextDir, "Dockerfile")); err != nil {
		return fmt.Errorf("build image %q: %w", tag, err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarDir(pw, contextDir)) }()
	defer pr.Close()

	res, err := d.api.ImageBuild(ctx, pr, client.ImageBuildOptions{
		Tags:        []string{tag},
		Dockerfile:  "Dockerfile",
		Remove:      true,
		ForceRemove: true,
		NetworkMode: d.buildNet,
	})
	if err != nil {
		return fmt.Errorf("build image %q: %w", tag, err)
	}
	defer res.Body.Close()
	// moby's own display: progress bars on a terminal, plain lines
	// otherwise; it returns the error the stream reports.
	if err := jsonmessage.DisplayStream(res.Body, progress); err != nil {
		return fmt.Errorf("build image %q: %w", tag, err)
	}
	d.log.Info("sandbox image built", "tag", tag)
	return nil
}

// tarDir writes the files under dir to w as a tar stream.
func tarDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		var link string
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case info.Mode().IsDir(), info.Mode().IsRegular():
		default:
			return nil // sockets, devices, pipes: not context material
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
