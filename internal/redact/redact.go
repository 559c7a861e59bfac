// Package redact replaces configured secret values (provider API keys,
// gateway.authToken, secret-looking plugin config values) with
// "[redacted:<config path>]" wherever the gateway passes text on: tool
// output, audit records and log lines.
//
// Values shorter than MinLen bytes are not redacted: short strings ("true",
// "1234") would hit ordinary text far too often. A Redactor does one pass
// over the text (a strings.Replacer built once per config); a nil Redactor
// (no secret configured) costs nothing.
package redact

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"unicode/utf8"
)

// MinLen is the shortest secret value that is redacted, in bytes.
const MinLen = 8

// Secret is one configured secret: its config path (e.g.
// "llm.providers.anthropic.apiKey") and its value.
type Secret struct {
	Name  string
	Value string
}

// Redactor replaces secret values in text. The nil *Redactor is valid and
// changes nothing.
type Redactor struct {
	r     *strings.Replacer
	olds  []string // the values, raw and JSON-escaped, longest first
	names []string
}

// New returns a Redactor for secrets, or nil when none is MinLen bytes or
// longer. Where one value is a prefix of another the longer one wins. Each
// value is also matched in its JSON-escaped form, so that it is found inside
// encoded JSON (audit args).
func New(secrets []Secret) *Redactor {
	type pair struct{ old, new string }
	var pairs []pair
	seen := map[string]bool{}
	var names []string
	for _, s := range secrets {
		if len(s.Value) < MinLen || seen[s.Value] {
			continue
		}
		seen[s.Value] = true
		rep := "[redacted:" + safeName(s.Name) + "]"
		names = append(names, s.Name)
		pairs = append(pairs, pair{s.Value, rep})
		if esc := jsonEscape(s.Value); esc != s.Value && !seen[esc] {
			seen[esc] = true
			pairs = append(pairs, pair{esc, rep})
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	// strings.Replacer tries the olds in argument order at each position:
	// longest first, so that a secret is never half-replaced by a shorter
	// one that is its prefix.
	slices.SortStableFunc(pairs, func(a, b pair) int { return len(b.old) - len(a.old) })
	args := make([]string, 0, 2*len(pairs))
	olds := make([]string, 0, len(pairs))
	for _, p := range pairs {
		args = append(args, p.old, p.new)
		olds = append(olds, p.old)
	}
	slices.Sort(names)
	return &Redactor{r: strings.NewReplacer(args...), olds: olds, names: names}
}

// Names lists the config paths of the secrets r redacts, sorted.
func (r *Redactor) Names() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.names)
}

// String returns s with every secret value replaced.
func (r *Redactor) String(s string) string {
	if r == nil || s == "" || !r.any(s) {
		return s
	}
	return r.r.Replace(s)
}

// any reports whether s holds a secret. With more than one value the
// Replacer is a trie walked byte by byte (~400 MB/s); strings.Index per
// value is vectorised and an order of magnitude faster for the handful of
// secrets a config has, so the common case (no secret in the text) never
// pays for the trie or its copy.
func (r *Redactor) any(s string) bool {
	for _, o := range r.olds {
		if strings.Contains(s, o) {
			return true
		}
	}
	return false
}

// JSON returns raw with every secret value replaced, raw or JSON-escaped. In
// the contrived case that a secret spans JSON syntax and the result is no
// longer valid JSON, the whole value becomes the string "[redacted]".
func (r *Redactor) JSON(raw json.RawMessage) json.RawMessage {
	if r == nil || len(raw) == 0 {
		return raw
	}
	if !r.any(string(raw)) {
		return raw
	}
	out := r.r.Replace(string(raw))
	if out == string(raw) {
		return raw
	}
	if !json.Valid([]byte(out)) {
		return json.RawMessage(`"[redacted]"`)
	}
	return json.RawMessage(out)
}

// safeName keeps a name to characters that need no escaping in JSON or
// logs, so that a replacement can never change the syntax around it.
func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == '-':
		default:
			b[i] = '_'
		}
	}
	return string(b)
}

// jsonEscape is s as it appears between the quotes of a JSON string written
// by encoding/json (HTML characters escaped too).
func jsonEscape(s string) string {
	if !utf8.ValidString(s) {
		return s
	}
	b, err := json.Marshal(s)
	if err != nil || len(b) < 2 {
		return s
	}
	return string(b[1 : len(b)-1])
}

// Handler wraps h so that every log record's message and string attribute
// values (also in groups, and errors and Stringers, resolved first) are
// redacted. With a nil r it returns h itself.
func (r *Redactor) Handler(h slog.Handler) slog.Handler {
	if r == nil {
		return h
	}
	return &handler{h: h, r: r}
}

type handler struct {
	h slog.Handler
	r *Redactor
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.r.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = h.r.attr(a)
	}
	return &handler{h: h.h.WithAttrs(red), r: h.r}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{h: h.h.WithGroup(name), r: h.r}
}

func (r *Redactor) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]slog.Attr, len(g))
		for i, ga := range g {
			red[i] = r.attr(ga)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(red...)}
	case slog.KindAny:
		// Errors, Stringers and anything else are logged as text by the
		// handlers; redact that text (a config.Secret is a LogValuer and
		// already resolved to its mask).
		s := v.String()
		if red := r.String(s); red != s {
			return slog.String(a.Key, red)
		}
		return slog.Attr{Key: a.Key, Value: v}
	default:
		return slog.Attr{Key: a.Key, Value: v}
	}
}
