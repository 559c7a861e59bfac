package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func (a *app) gatewayLogs(ctx context.Context, follow bool, lines int) error {
	cfg := a.loadClientConfig()
	h, err := a.home()
	if err != nil {
		return err
	}
	path := logPathOf(cfg, h)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) && !follow {
		return exitf(ExitFailure, "no gateway log yet at %s (the gateway has not run)", path)
	}
	if !follow {
		tail(a.streams.Out, path, lines)
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return followFile(ctx, a.streams.Out, path, lines)
}

// tail writes the last n lines of path to w (all of it when n <= 0).
func tail(w io.Writer, path string, n int) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	w.Write(lastLines(data, n))
}

func lastLines(data []byte, n int) []byte {
	if n <= 0 {
		return data
	}
	end := len(data)
	if end > 0 && data[end-1] == '\n' {
		end--
	}
	i := end
	for k := 0; k < n; k++ {
		j := bytes.LastIndexByte(data[:i], '\n')
		if j < 0 {
			return data
		}
		i = j
	}
	return data[i+1:]
}

// followFile prints the last lines of path, then new lines as they come,
// reopening the file when it is rotated (a new inode, or a shorter file).
func followFile(ctx context.Context, w io.Writer, path string, lines int) error {
	var f *os.File
	var ino uint64
	var off int64
	open := func(fromEnd bool) {
		nf, err := os.Open(path)
		if err != nil {
			return
		}
		st, _ := nf.Stat()
		if f != nil {
			f.Close()
		}
		f, ino, off = nf, inode(st), 0
		if fromEnd {
			data, _ := io.ReadAll(nf)
			w.Write(lastLines(data, lines))
			off = int64(len(data))
		}
	}
	open(true)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for {
		if f != nil {
			r := bufio.NewReader(f)
			for {
				line, err := r.ReadBytes('\n')
				if len(line) > 0 && line[len(line)-1] == '\n' {
					w.Write(line)
					off += int64(len(line))
				} else if len(line) > 0 {
					f.Seek(off, io.SeekStart) // a partial line: read it again when whole
				}
				if err != nil {
					break
				}
			}
			if st, err := os.Stat(path); err == nil && (inode(st) != ino || st.Size() < off) {
				open(false)
				continue
			}
		} else {
			open(false)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func inode(st os.FileInfo) uint64 {
	if st == nil {
		return 0
	}
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Ino
	}
	return 0
}
