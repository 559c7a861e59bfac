package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/beige-dev/beige/internal/audit"
)

func (a *app) auditCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Check and read the audit log",
		Long: `The audit log is $BEIGE_HOME/logs/audit.jsonl and its rotated files
audit.jsonl.1 … audit.jsonl.N (the highest is the oldest). Each record carries a
seq and a hash chained to the record before; $BEIGE_HOME/data/audit-head holds
the newest one (docs/audit.md). These commands read the files as they are, and
work beside a running gateway.`,
	}
	cmd.AddCommand(a.auditVerifyCommand(), a.auditQueryCommand(), a.auditTailCommand())
	return cmd
}

func (a *app) auditVerifyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Check the audit log's hash chain, every file in order",
		Long: `Checks every record of the audit log, oldest file first: each must follow the
one before (seq + 1) and match its hash, and the newest must reach the head
($BEIGE_HOME/data/audit-head). Prints "OK: N records, first … last …" and exits 0,
or prints the first place where the chain breaks (file, line, and what: edited,
deleted, reordered, truncated, missing, head) and exits 1. Exits 2 when the log
cannot be read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := a.home()
			if err != nil {
				return err
			}
			cfg := a.loadClientConfig()
			retention := cfg != nil && cfg.Gateway.Audit.MaxFiles > 0
			rep, err := audit.Verify(h.AuditLog(), &audit.VerifyOptions{HeadPath: h.AuditHead(), Retention: retention})
			if err != nil {
				return exitf(ExitUsage, "verify the audit log: %v", err)
			}
			printVerify(a.streams.Out, rep, h.AuditHead())
			if rep.Break != nil {
				return &ExitError{Code: ExitFailure}
			}
			return nil
		},
	}
}

func printVerify(w io.Writer, rep *audit.Report, headPath string) {
	if b := rep.Break; b != nil {
		fmt.Fprintf(w, "BROKEN: %s\n", clean(b.String()))
		if rep.Records > 0 {
			fmt.Fprintf(w, "(%d records before it hold, seq %d to %d)\n", rep.Records, rep.First.Seq, rep.Last.Seq)
		}
		return
	}
	if rep.Records == 0 {
		fmt.Fprintln(w, "OK: 0 records")
	} else {
		fmt.Fprintf(w, "OK: %d records, first seq %d at %s (%s line %d), last seq %d at %s (%s line %d), hash %s\n",
			rep.Records, rep.First.Seq, clean(rep.First.Time), rep.First.File, rep.First.Line,
			rep.Last.Seq, clean(rep.Last.Time), rep.Last.File, rep.Last.Line, rep.Last.Hash)
	}
	for _, r := range rep.Repairs {
		fmt.Fprintf(w, "note: a crash left a torn record (%d bytes) at %s line %d; the gateway set it aside at its next start (repair record at %s line %d)\n",
			r.Bytes, r.File, r.Line, r.RepairFile, r.RepairLine)
	}
	if rep.Pruned > 0 {
		fmt.Fprintf(w, "note: the %d records before seq %d were deleted by the retention (gateway.audit.maxFiles)\n", rep.Pruned, rep.First.Seq)
	}
	if rep.Unchained > 0 {
		fmt.Fprintf(w, "note: %d lines from before the hash chain are not covered by it\n", rep.Unchained)
	}
	if rep.Head == nil && rep.Records > 0 {
		fmt.Fprintf(w, "warning: no audit head at %s: records cut off the end of the log cannot be detected\n", headPath)
	}
}

// auditFilter selects records for query and tail.
type auditFilter struct {
	agent, tool, decision, session, typ string
	since                               string
	after                               time.Time // from since
}

func (f *auditFilter) flags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.agent, "agent", "", "only records of this agent")
	fl.StringVar(&f.tool, "tool", "", `only this tool ("exec", "git", "egress", "<provider>/<model>", …)`)
	fl.StringVar(&f.decision, "decision", "", "only allowed or denied records")
	fl.StringVar(&f.session, "session", "", "only records of this session key")
	fl.StringVar(&f.typ, "type", "", "only this type: core_tool, tool, net, llm or audit")
	fl.StringVar(&f.since, "since", "", `only records at most this old ("90s", "10m", "1h", "2d") or from this time (RFC 3339)`)
}

// check validates the flags; now is the time --since counts back from.
func (f *auditFilter) check(now time.Time) error {
	if f.decision != "" && f.decision != audit.DecisionAllowed && f.decision != audit.DecisionDenied {
		return exitf(ExitUsage, "--decision: want allowed or denied, got %q", f.decision)
	}
	types := []string{audit.TypeCoreTool, audit.TypeTool, audit.TypeNet, audit.TypeLLM, audit.TypeAudit}
	if f.typ != "" && !slices.Contains(types, f.typ) {
		return exitf(ExitUsage, "--type: want one of %s, got %q", strings.Join(types, ", "), f.typ)
	}
	if f.since != "" {
		t, err := parseSince(f.since, now)
		if err != nil {
			return exitf(ExitUsage, "--since: %v", err)
		}
		f.after = t
	}
	return nil
}

// parseSince reads a Go duration, a number of days ("2d"), or an RFC 3339
// time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || n < 0 || n > 100000 {
			return time.Time{}, fmt.Errorf("want a duration (10m, 1h, 2d) or an RFC 3339 time, got %q", s)
		}
		return now.Add(-time.Duration(n * 24 * float64(time.Hour))), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("want a duration (10m, 1h, 2d) or an RFC 3339 time, got %q", s)
	}
	return now.Add(-d), nil
}

func (f *auditFilter) match(r *audit.Record) bool {
	return (f.agent == "" || r.Agent == f.agent) &&
		(f.tool == "" || r.Tool == f.tool) &&
		(f.decision == "" || r.Decision == f.decision) &&
		(f.session == "" || r.Session == f.session) &&
		(f.typ == "" || r.Type == f.typ) &&
		(f.after.IsZero() || !r.Time.Before(f.after))
}

// auditLine is one record read back, with the line as written.
type auditLine struct {
	rec  audit.Record
	seq  int64
	line []byte
	end  int64 // the offset after it in its file
}

// auditPrinter prints records as a table (a header first) or JSONL.
type auditPrinter struct {
	w      io.Writer
	json   bool
	header bool
}

func (p *auditPrinter) print(l auditLine) {
	if p.json {
		p.w.Write(append(l.line, '\n'))
		return
	}
	if !p.header {
		fmt.Fprintf(p.w, "%-23s %7s %-12s %-9s %-14s %-8s %-8s %7s %4s  %s\n", "TIME", "SEQ", "AGENT", "TYPE", "TOOL", "PHASE", "DECISION", "MS", "EXIT", "DETAIL")
		p.header = true
	}
	r := &l.rec
	seq := "-"
	if l.seq > 0 {
		seq = strconv.FormatInt(l.seq, 10)
	}
	ms, exit := "", ""
	if r.DurationMs != nil {
		ms = strconv.FormatInt(*r.DurationMs, 10)
	}
	if r.ExitCode != nil {
		exit = strconv.Itoa(*r.ExitCode)
	}
	var detail []string
	if r.Type == audit.TypeNet {
		detail = append(detail, strings.TrimSpace(r.Method+" "+r.Host+":"+strconv.Itoa(r.Port)))
		if r.Rule != "" {
			detail = append(detail, "rule "+r.Rule)
		}
	} else if len(r.Args) > 0 {
		detail = append(detail, string(r.Args))
	}
	if r.Session != "" {
		detail = append(detail, "session "+r.Session)
	}
	if r.Unattributed {
		detail = append(detail, "unattributed")
	}
	if r.Error != "" {
		detail = append(detail, "error: "+r.Error)
	}
	fmt.Fprintf(p.w, "%-23s %7s %-12s %-9s %-14s %-8s %-8s %7s %4s  %s\n",
		r.Time.UTC().Format("2006-01-02 15:04:05.000"), seq, cut(clean(r.Agent), 12), cut(clean(r.Type), 9), cut(clean(r.Tool), 14),
		cut(clean(r.Phase), 8), cut(clean(r.Decision), 8), ms, exit, cut(clean(strings.Join(detail, "; ")), 160))
}

// clean makes s safe to print on a terminal: control characters (escape
// sequences from a sandbox, say) and invalid UTF-8 are shown escaped.
func clean(s string) string {
	ok := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	q := strconv.QuoteToGraphic(s)
	return q[1 : len(q)-1]
}

func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// readAudit calls fn for each record of the snapshot, oldest first,
// skipping files last written before after and lines that are not records.
func readAudit(files []audit.LogFile, after time.Time, fn func(auditLine)) error {
	for i := range files {
		lf := &files[i]
		if !after.IsZero() {
			if st, err := os.Stat(lf.Path); err == nil && st.ModTime().Before(after.Add(-time.Second)) && lf.N > 0 {
				continue // every record in it is older
			}
		}
		err := lf.Lines(func(rl audit.RawLine) error {
			if l, ok := parseAuditLine(rl); ok {
				fn(l)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func parseAuditLine(rl audit.RawLine) (auditLine, bool) {
	if !rl.Newline {
		return auditLine{}, false // being written, or torn
	}
	var l auditLine
	if err := json.Unmarshal(rl.Bytes, &l.rec); err != nil {
		return l, false
	}
	if lk, err := audit.ParseLink(rl.Bytes); err == nil {
		l.seq = lk.Seq
	}
	l.line = append([]byte(nil), rl.Bytes...)
	l.end = rl.Offset + int64(len(rl.Bytes)) + 1
	return l, true
}

func (a *app) auditQueryCommand() *cobra.Command {
	var f auditFilter
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "query",
		Short: "Print the audit records that match the filters, oldest first",
		Long: `Prints the records of the audit log (every file, oldest first) that match all
the filters given, as a table, or as the lines of the log (JSONL) with --json.`,
		Example: `  beige audit query --agent travel --decision denied --since 10m
  beige audit query --type net --since 2d --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(time.Now()); err != nil {
				return err
			}
			h, err := a.home()
			if err != nil {
				return err
			}
			snap, err := audit.OpenSnapshot(h.AuditLog())
			if err != nil {
				return exitf(ExitUsage, "read the audit log: %v", err)
			}
			defer snap.Close()
			p := &auditPrinter{w: a.streams.Out, json: asJSON}
			err = readAudit(snap.Files, f.after, func(l auditLine) {
				if f.match(&l.rec) {
					p.print(l)
				}
			})
			if err != nil {
				return exitf(ExitUsage, "read the audit log: %v", err)
			}
			return nil
		},
	}
	f.flags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the matching lines as written (JSONL)")
	return cmd
}

func (a *app) auditTailCommand() *cobra.Command {
	var f auditFilter
	var asJSON, follow bool
	var lines int
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print the newest audit records (and, with -f, new ones as they are written)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(time.Now()); err != nil {
				return err
			}
			if lines < 0 {
				return exitf(ExitUsage, "-n: want 0 or more, got %d", lines)
			}
			h, err := a.home()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			p := &auditPrinter{w: a.streams.Out, json: asJSON}
			if err := auditTail(ctx, h.AuditLog(), &f, lines, follow, p); err != nil {
				return exitf(ExitUsage, "read the audit log: %v", err)
			}
			return nil
		},
	}
	f.flags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the matching lines as written (JSONL)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new records as they are written, across rotation, until Ctrl-C")
	cmd.Flags().IntVarP(&lines, "lines", "n", 20, "how many of the newest matching records to print first")
	return cmd
}

// auditTail prints the last n records that match f, then, with follow,
// new ones until ctx ends: it polls the current file every 200 ms, and when
// the file is rotated reads the old one to its end before going on with
// the new one.
func auditTail(ctx context.Context, path string, f *auditFilter, n int, follow bool, p *auditPrinter) error {
	snap, err := audit.OpenSnapshot(path)
	if err != nil {
		return err
	}
	defer snap.Close()
	// The newest files first, until n records are found. -f goes on from
	// the end of the last whole line read in the current file.
	var last []auditLine
	var end int64
	for i := len(snap.Files) - 1; i >= 0 && (len(last) < n || i == len(snap.Files)-1); i-- {
		var in []auditLine
		current := snap.Files[i].N == 0
		if err := readAudit(snap.Files[i:i+1], f.after, func(l auditLine) {
			if current {
				end = l.end
			}
			if f.match(&l.rec) {
				in = append(in, l)
			}
		}); err != nil {
			return err
		}
		last = append(in, last...)
	}
	if len(last) > n {
		last = last[len(last)-n:]
	}
	for _, l := range last {
		p.print(l)
	}
	if !follow {
		return nil
	}
	var cur audit.Cursor // the zero Cursor: the current file from its start
	if k := len(snap.Files); k > 0 && snap.Files[k-1].N == 0 {
		// The file just read, even if a rotation has renamed it since.
		if cur, err = snap.Files[k-1].CursorAt(end); err != nil {
			return err
		}
	}
	for {
		cur, err = audit.ReadNew(path, cur, 0, func(rl audit.RawLine) error {
			if l, ok := parseAuditLine(rl); ok && f.match(&l.rec) {
				p.print(l)
			}
			return nil
		})
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}
