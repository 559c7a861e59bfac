package memsandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/beige-dev/beige/internal/sandbox"
)

// Builtins are the commands Interpret knows.
var Builtins = []string{":", "cat", "cd", "echo", "env", "exit", "false", "ls", "mkdir", "printf", "pwd", "rm", "sleep", "true"}

// Interpret is the default ExecFunc: a tiny shell over the sandbox's
// in-memory files. It knows the Builtins, the operators ;, &&, || and
// newlines, redirections (>, >>, 2>, 2>&1, /dev/null), single and double
// quotes, backslashes, $VAR, ${VAR} and $?, and # comments. Anything else
// (pipes, &, subshells, $(...), another program) is refused with exit
// status 127 or 2 and a message that says so: it never runs a command on
// the host.
func Interpret(ctx context.Context, sb *Sandbox, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	var out bytes.Buffer
	cmds, err := parse(req.Command)
	if err != nil {
		fmt.Fprintf(&out, "memsandbox: %v (register an Exec handler for more)\n", err)
		return sandbox.ExecResult{Output: out.Bytes(), ExitCode: 2}, nil
	}
	in := &interp{ctx: ctx, sb: sb, env: req.Env, cwd: req.Dir, stdin: req.Stdin, out: &out}
	code := in.run(cmds)
	return sandbox.ExecResult{Output: out.Bytes(), ExitCode: code}, nil
}

// segment is a piece of a word: literal text, or a variable to expand.
type segment struct {
	text  string
	isVar bool
}

type word []segment

// redirect sends fd 1 or 2 of a command to a file (append: >>) or, with
// toFD, to where the other descriptor goes.
type redirect struct {
	fd     int
	target word
	append bool
	toFD   bool
}

// command is one simple command and the operator before it.
type command struct {
	op     string // "", ";", "&&", "||"
	words  []word
	redirs []redirect
}

// parse splits a command line into simple commands.
func parse(s string) ([]command, error) {
	var cmds []command
	cur := command{}
	var w word
	inWord := false
	var lit strings.Builder
	flushLit := func() {
		if lit.Len() > 0 {
			w = append(w, segment{text: lit.String()})
			lit.Reset()
		}
	}
	endWord := func() {
		flushLit()
		if inWord {
			cur.words = append(cur.words, w)
		}
		w, inWord = nil, false
	}
	// endCmd ends the command at an operator: ";", "&&", "||", or "\n"
	// and "" (the end), after which an empty command is no error.
	endCmd := func(op string) error {
		endWord()
		if len(cur.words) == 0 && len(cur.redirs) == 0 {
			switch {
			case op == "" && (cur.op == "&&" || cur.op == "||"):
				return fmt.Errorf("unsupported shell syntax: nothing after %q", cur.op)
			case op != "\n" && op != "":
				return fmt.Errorf("unsupported shell syntax: empty command before %q", op)
			}
			return nil // a blank line: cur.op carries over
		}
		if op == "\n" || op == "" {
			op = ";"
		}
		cmds = append(cmds, cur)
		cur = command{op: op}
		return nil
	}
	// readVar reads a variable name after '$' at s[i]; it returns the
	// segment and the index after it.
	readVar := func(i int) (segment, int, error) {
		switch {
		case i >= len(s):
			return segment{text: "$"}, i, nil
		case s[i] == '?':
			return segment{text: "?", isVar: true}, i + 1, nil
		case s[i] == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return segment{}, 0, errors.New("unsupported shell syntax: unterminated ${")
			}
			name := s[i+1 : i+end]
			if !validVarName(name) {
				return segment{}, 0, fmt.Errorf("unsupported shell syntax: ${%s}", name)
			}
			return segment{text: name, isVar: true}, i + end + 1, nil
		case s[i] == '(':
			return segment{}, 0, errors.New("unsupported shell syntax: $(...)")
		}
		j := i
		for j < len(s) && (s[j] == '_' || isAlnum(s[j])) {
			j++
		}
		if j == i || isDigit(s[i]) {
			return segment{text: "$"}, i, nil
		}
		return segment{text: s[i:j], isVar: true}, j, nil
	}
	// readRedir reads the target of a redirection starting at s[i].
	readTarget := func(i int) (word, int, error) {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		start := i
		for i < len(s) && !strings.ContainsRune(" \t\n;&|<>()'\"`$\\", rune(s[i])) {
			i++
		}
		if i == start {
			return nil, 0, errors.New("unsupported shell syntax: a redirection without a plain file name")
		}
		return word{{text: s[start:i]}}, i, nil
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			endWord()
			i++
		case c == '\n' || c == ';':
			if err := endCmd(string(c)); err != nil {
				return nil, err
			}
			i++
		case c == '&' && strings.HasPrefix(s[i:], "&&"), c == '|' && strings.HasPrefix(s[i:], "||"):
			if err := endCmd(s[i : i+2]); err != nil {
				return nil, err
			}
			i += 2
		case c == '#' && !inWord:
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '>' || (c == '2' && !inWord && strings.HasPrefix(s[i:], "2>")):
			fd := 1
			if c == '2' {
				fd, i = 2, i+1
			}
			endWord() // echo hi>x: the word ends at the '>'
			i++
			r := redirect{fd: fd}
			switch {
			case strings.HasPrefix(s[i:], ">"):
				r.append, i = true, i+1
			case fd == 2 && strings.HasPrefix(s[i:], "&1"):
				r.toFD, i = true, i+2
			}
			if !r.toFD {
				t, j, err := readTarget(i)
				if err != nil {
					return nil, err
				}
				r.target, i = t, j
			}
			cur.redirs = append(cur.redirs, r)
		case strings.ContainsRune("|&<()`", rune(c)):
			return nil, fmt.Errorf("unsupported shell syntax: %q", s[i:min(len(s), i+20)])
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("unsupported shell syntax: unterminated '")
			}
			lit.WriteString(s[i+1 : i+1+end])
			inWord = true
			i += end + 2
		case c == '"':
			inWord = true
			i++
			for {
				if i >= len(s) {
					return nil, errors.New(`unsupported shell syntax: unterminated "`)
				}
				d := s[i]
				if d == '"' {
					i++
					break
				}
				switch {
				case d == '\\' && i+1 < len(s) && strings.ContainsRune("\"\\$`\n", rune(s[i+1])):
					if s[i+1] != '\n' {
						lit.WriteByte(s[i+1])
					}
					i += 2
				case d == '`':
					return nil, errors.New("unsupported shell syntax: `...`")
				case d == '$':
					seg, j, err := readVar(i + 1)
					if err != nil {
						return nil, err
					}
					if seg.isVar {
						flushLit()
						w = append(w, seg)
					} else {
						lit.WriteString(seg.text)
					}
					i = j
				default:
					lit.WriteByte(d)
					i++
				}
			}
		case c == '\\':
			inWord = true
			if i+1 < len(s) {
				if s[i+1] != '\n' {
					lit.WriteByte(s[i+1])
				}
				i += 2
			} else {
				lit.WriteByte('\\')
				i++
			}
		case c == '$':
			seg, j, err := readVar(i + 1)
			if err != nil {
				return nil, err
			}
			inWord = true
			if seg.isVar {
				flushLit()
				w = append(w, seg)
			} else {
				lit.WriteString(seg.text)
			}
			i = j
		default:
			inWord = true
			lit.WriteByte(c)
			i++
		}
	}
	if err := endCmd(""); err != nil {
		return nil, err
	}
	return cmds, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlnum(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func validVarName(s string) bool {
	if s == "" || isDigit(s[0]) {
		return false
	}
	for i := range len(s) {
		if s[i] != '_' && !isAlnum(s[i]) {
			return false
		}
	}
	return true
}

// interp runs parsed commands.
type interp struct {
	ctx   context.Context
	sb    *Sandbox
	env   map[string]string
	cwd   string
	stdin []byte
	out   *bytes.Buffer
	last  int
}

// errExit ends the whole command line (exit, or the context's end).
type errExit struct{ code int }

func (e errExit) Error() string { return "exit " + strconv.Itoa(e.code) }

func (in *interp) run(cmds []command) int {
	for _, c := range cmds {
		if c.op == "&&" && in.last != 0 || c.op == "||" && in.last == 0 {
			continue
		}
		if in.ctx.Err() != nil {
			return 128 + 9
		}
		code, err := in.runOne(c)
		var ee errExit
		if errors.As(err, &ee) {
			return ee.code
		}
		in.last = code
	}
	return in.last
}

func (in *interp) expand(w word) string {
	var b strings.Builder
	for _, seg := range w {
		switch {
		case !seg.isVar:
			b.WriteString(seg.text)
		case seg.text == "?":
			b.WriteString(strconv.Itoa(in.last))
		default:
			b.WriteString(in.env[seg.text])
		}
	}
	return b.String()
}

func (in *interp) abs(p string) string {
	if !path.IsAbs(p) {
		p = path.Join(in.cwd, p)
	}
	return path.Clean(p)
}

// sink is where one of a command's descriptors writes.
type sink struct {
	discard bool
	file    string // "" = the command's output
	append  bool
}

func (in *interp) runOne(c command) (int, error) {
	args := make([]string, len(c.words))
	for i, w := range c.words {
		args[i] = in.expand(w)
	}
	fds := [3]sink{} // fds[1], fds[2]
	for _, r := range c.redirs {
		if r.toFD {
			fds[2] = fds[1]
			continue
		}
		t := in.expand(r.target)
		if t == "/dev/null" {
			fds[r.fd] = sink{discard: true}
		} else {
			fds[r.fd] = sink{file: in.abs(t), append: r.append}
		}
	}
	var stdout, stderr bytes.Buffer
	// Where stderr goes when it goes where stdout does: the same buffer.
	errw := &stderr
	if fds[2] == fds[1] {
		errw = &stdout
	}
	code, err := in.builtin(args, &stdout, errw)
	for fd, buf := range []*bytes.Buffer{1: &stdout, 2: &stderr} {
		if fd == 0 || fd == 2 && errw == &stdout {
			continue
		}
		s := fds[fd]
		switch {
		case s.discard:
		case s.file == "":
			in.out.Write(buf.Bytes())
		default:
			in.sb.mu.Lock()
			werr := in.sb.files.put(s.file, buf.Bytes(), true, false, s.append)
			in.sb.mu.Unlock()
			if werr != nil {
				fmt.Fprintf(in.out, "sh: can't create %s: %v\n", s.file, fsMessage(werr))
				code = 1
			}
		}
	}
	return code, err
}

// fsMessage is how sh words a file error.
func fsMessage(err error) string {
	switch {
	case errors.Is(err, sandbox.ErrIsDir):
		return "Is a directory"
	case errors.Is(err, sandbox.ErrNotExist):
		return "No such file or directory"
	case errors.Is(err, errPermission):
		return "Permission denied"
	case errors.Is(err, errNotEmpty):
		return "Directory not empty"
	case errors.Is(err, errNotDir):
		return "Not a directory"
	case errors.Is(err, errExists):
		return "File exists"
	}
	return err.Error()
}

func (in *interp) builtin(args []string, stdout, stderr *bytes.Buffer) (int, error) {
	if len(args) == 0 {
		return 0, nil
	}
	name, args := args[0], args[1:]
	switch name {
	case ":", "true":
		return 0, nil
	case "false":
		return 1, nil
	case "exit":
		code := in.last
		if len(args) > 0 {
			n, ok := atoiExit(args[0])
			if !ok {
				fmt.Fprintf(stderr, "sh: exit: Illegal number: %s\n", args[0])
				return 2, errExit{2}
			}
			code = n
		}
		return code, errExit{code}
	case "echo":
		nl := true
		if len(args) > 0 && args[0] == "-n" {
			nl, args = false, args[1:]
		}
		stdout.WriteString(strings.Join(args, " "))
		if nl {
			stdout.WriteByte('\n')
		}
		return 0, nil
	case "printf":
		if len(args) == 0 {
			fmt.Fprintln(stderr, "printf: usage: printf FORMAT [ARGUMENT]...")
			return 2, nil
		}
		stdout.WriteString(printf(args[0], args[1:]))
		return 0, nil
	case "pwd":
		fmt.Fprintln(stdout, in.cwd)
		return 0, nil
	case "cd":
		dir := in.env["HOME"]
		if len(args) > 0 {
			dir = args[0]
		}
		dir = in.abs(dir)
		in.sb.mu.Lock()
		n, err := in.sb.files.lookup(dir)
		in.sb.mu.Unlock()
		if err == nil && !n.dir {
			err = errNotDir
		}
		if err != nil {
			fmt.Fprintf(stderr, "sh: cd: can't cd to %s: %s\n", dir, fsMessage(err))
			return 2, nil
		}
		in.cwd = dir
		return 0, nil
	case "env":
		if len(args) > 0 {
			fmt.Fprintln(stderr, "memsandbox: env with arguments is not supported")
			return 2, nil
		}
		stdout.WriteString(quoteEnv(in.env))
		return 0, nil
	case "sleep":
		var total time.Duration
		for _, a := range args {
			f, err := strconv.ParseFloat(a, 64)
			if err != nil || f < 0 || f > 1e6 {
				fmt.Fprintf(stderr, "sleep: invalid number '%s'\n", a)
				return 1, nil
			}
			total += time.Duration(f * float64(time.Second))
		}
		t := time.NewTimer(total)
		defer t.Stop()
		select {
		case <-t.C:
			return 0, nil
		case <-in.ctx.Done():
			return 128 + 9, errExit{128 + 9}
		}
	case "cat":
		code := 0
		if len(args) == 0 {
			args = []string{"-"}
		}
		for _, a := range args {
			if a == "-" {
				stdout.Write(in.stdin)
				in.stdin = nil
				continue
			}
			in.sb.mu.Lock()
			data, _, err := in.sb.files.read(in.abs(a), -1)
			in.sb.mu.Unlock()
			if err != nil { // as busybox words it
				if errors.Is(err, sandbox.ErrIsDir) {
					fmt.Fprintf(stderr, "cat: read error: %s\n", fsMessage(err))
				} else {
					fmt.Fprintf(stderr, "cat: can't open '%s': %s\n", a, fsMessage(err))
				}
				code = 1
				continue
			}
			stdout.Write(data)
		}
		return code, nil
	case "ls":
		paths := slices.DeleteFunc(slices.Clone(args), func(a string) bool { return strings.HasPrefix(a, "-") && a != "-" })
		if len(paths) == 0 {
			paths = []string{"."}
		}
		code := 0
		for _, p := range paths {
			in.sb.mu.Lock()
			names, err := in.sb.files.list(in.abs(p))
			in.sb.mu.Unlock()
			if err != nil {
				fmt.Fprintf(stderr, "ls: %s: %s\n", p, fsMessage(err))
				code = 1
				continue
			}
			if len(paths) > 1 {
				fmt.Fprintf(stdout, "%s:\n", p)
			}
			for _, n := range names {
				fmt.Fprintln(stdout, n)
			}
		}
		return code, nil
	case "mkdir":
		parents := false
		code := 0
		for _, a := range args {
			if a == "-p" {
				parents = true
				continue
			}
			p := in.abs(a)
			in.sb.mu.Lock()
			var err error
			if _, lerr := in.sb.files.lookup(p); lerr == nil {
				if !parents {
					err = errExists
				}
			} else if _, perr := in.sb.files.lookup(path.Dir(p)); perr != nil && !parents {
				err = perr
			} else {
				err = in.sb.files.mkdirAll(p, true)
			}
			in.sb.mu.Unlock()
			if err != nil {
				fmt.Fprintf(stderr, "mkdir: can't create directory '%s': %s\n", a, fsMessage(err))
				code = 1
			}
		}
		return code, nil
	case "rm":
		recursive, force := false, false
		code := 0
		for _, a := range args {
			if strings.HasPrefix(a, "-") && len(a) > 1 {
				recursive = recursive || strings.ContainsAny(a, "rR")
				force = force || strings.Contains(a, "f")
				continue
			}
			in.sb.mu.Lock()
			err := in.sb.files.remove(in.abs(a), recursive)
			in.sb.mu.Unlock()
			if err != nil && !(force && errors.Is(err, sandbox.ErrNotExist)) {
				fmt.Fprintf(stderr, "rm: can't remove '%s': %s\n", a, fsMessage(err))
				code = 1
			}
		}
		return code, nil
	}
	fmt.Fprintf(stderr, "memsandbox: %s: command not found (the in-memory sandbox runs only %s; register an Exec handler for others)\n",
		name, strings.Join(Builtins, ", "))
	return 127, nil
}

// printf formats as printf(1) does for %s, %d, %% and the backslash
// escapes \n, \t, \r, \\, \a, \b, \f, \v and \NNN (octal).
func printf(format string, args []string) string {
	var b strings.Builder
	next := func() string {
		if len(args) == 0 {
			return ""
		}
		a := args[0]
		args = args[1:]
		return a
	}
	for i := 0; i < len(format); i++ {
		c := format[i]
		switch {
		case c == '\\' && i+1 < len(format):
			i++
			switch e := format[i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'v':
				b.WriteByte('\v')
			case '\\':
				b.WriteByte('\\')
			case '0', '1', '2', '3', '4', '5', '6', '7':
				n, j := 0, i
				for j < len(format) && j < i+3 && format[j] >= '0' && format[j] <= '7' {
					n = n*8 + int(format[j]-'0')
					j++
				}
				b.WriteByte(byte(n))
				i = j - 1
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		case c == '%' && i+1 < len(format):
			i++
			switch format[i] {
			case 's':
				b.WriteString(next())
			case 'd':
				n, _ := strconv.Atoi(next())
				b.WriteString(strconv.Itoa(n))
			case '%':
				b.WriteByte('%')
			default:
				b.WriteByte('%')
				b.WriteByte(format[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
