package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// Bounds of a record. Every field can come from outside (a tool's args and
// error, a plugin tool's name, a session key from the sandbox's env), so Log
// cuts each to its bound: one line stays a few KB however large a call, and
// no agent can fill the log with a few huge calls. A record whose args were
// cut carries their true size (ArgsBytes) and SHA-256 (ArgsSha256); any cut
// sets Truncated.
const (
	MaxArgsBytes      = 4 << 10 // the args as written, about
	MaxArgStringBytes = 1 << 10 // each string inside the args
	MaxErrorBytes     = 1 << 10
	MaxNameBytes      = 256 // agent, session, model, channel, tool and the enum fields
)

// ellipsis marks a cut string.
const ellipsis = "…"

// bound cuts r's fields to their bounds. The fast path, every field within
// bounds, only compares lengths.
func (r *Record) bound() error {
	for _, f := range []*string{&r.Agent, &r.Session, &r.Model, &r.Channel, &r.Phase, &r.Type, &r.Tool, &r.Decision, &r.Target, &r.ApprovedBy, &r.Approval} {
		if len(*f) > MaxNameBytes {
			*f = cut(*f, MaxNameBytes)
			r.Truncated = true
		}
	}
	if len(r.Error) > MaxErrorBytes {
		r.Error = cut(r.Error, MaxErrorBytes)
		r.Truncated = true
	}
	if len(r.Args) > MaxArgsBytes {
		args, err := boundArgs(r.Args)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(r.Args)
		r.ArgsBytes, r.ArgsSha256 = int64(len(r.Args)), hex.EncodeToString(sum[:])
		r.Args, r.Truncated = args, true
	}
	return nil
}

// cut returns s cut to at most n bytes (n > len(ellipsis)) on a rune
// boundary, ending in an ellipsis.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len(ellipsis)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + ellipsis
}

// boundArgs re-encodes args of any size with the same shape, cut to about
// MaxArgsBytes: each string to MaxArgStringBytes, and the elements and
// members past the budget dropped. It is the slow path of oversized args.
func boundArgs(args json.RawMessage) (json.RawMessage, error) {
	if b, ok := boundStringArray(args); ok {
		return b, nil
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	budget := MaxArgsBytes
	b := appendBounded(nil, v, &budget)
	return b, nil
}

// appendBounded appends v as JSON, spending its encoded size from budget;
// containers stop taking elements once the budget is spent.
func appendBounded(b []byte, v any, budget *int) []byte {
	start := len(b)
	switch x := v.(type) {
	case string:
		b = appendString(b, cut(x, min(MaxArgStringBytes, max(*budget, 8))))
	case json.Number:
		if len(x) > 64 {
			b = appendString(b, cut(string(x), 64)) // a 1 MB number is no number
		} else {
			b = append(b, x...)
		}
	case bool:
		if x {
			b = append(b, "true"...)
		} else {
			b = append(b, "false"...)
		}
	case nil:
		b = append(b, "null"...)
	case []any:
		b = append(b, '[')
		*budget -= 2
		for i, e := range x {
			if *budget <= 0 {
				break
			}
			if i > 0 {
				b = append(b, ',')
				*budget--
			}
			b = appendBounded(b, e, budget)
		}
		return append(b, ']')
	case map[string]any:
		b = append(b, '{')
		*budget -= 2
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if *budget <= 0 {
				break
			}
			if i > 0 {
				b = append(b, ',')
				*budget--
			}
			n := len(b)
			b = appendString(b, cut(k, MaxNameBytes))
			b = append(b, ':')
			*budget -= len(b) - n
			b = appendBounded(b, x[k], budget)
		}
		return append(b, '}')
	}
	*budget -= len(b) - start
	return b
}

// boundStringArray is boundArgs for the usual shape of big args, a JSON
// array of strings (StringArgs): it finds the strings' ends with
// bytes.IndexByte and decodes only what it keeps, so that a call with a
// megabyte of args costs little more than reading it. ok is false when args
// is not such an array; the part after the budget is not looked at.
func boundStringArray(args []byte) (out []byte, ok bool) {
	i := skipSpace(args, 0)
	if i >= len(args) || args[i] != '[' {
		return nil, false
	}
	out = append(make([]byte, 0, MaxArgsBytes+64), '[')
	budget := MaxArgsBytes - 2
	for n := 0; ; n++ {
		i = skipSpace(args, i+1)
		if i >= len(args) {
			return nil, false
		}
		if args[i] == ']' && n == 0 {
			return append(out, ']'), true
		}
		if args[i] != '"' {
			return nil, false
		}
		end := stringEnd(args, i)
		if end < 0 {
			return nil, false
		}
		s, more, ok := unquotePrefix(args[i:end+1], MaxArgStringBytes)
		if !ok {
			return nil, false
		}
		if n > 0 {
			out = append(out, ',')
			budget--
		}
		before := len(out)
		out = appendString(out, mark(s, min(MaxArgStringBytes, max(budget, 8)), more))
		budget -= len(out) - before
		i = skipSpace(args, end+1)
		switch {
		case i < len(args) && args[i] == ']':
			return append(out, ']'), true
		case i < len(args) && args[i] == ',':
			if budget <= 0 {
				return append(out, ']'), true // the rest is not kept
			}
		default:
			return nil, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index of the quote that closes the JSON string
// starting at b[start], or -1.
func stringEnd(b []byte, start int) int {
	for i := start + 1; i < len(b); {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return -1
		}
		q := i + j
		bs := 0 // backslashes right before the quote
		for k := q - 1; k > start && b[k] == '\\'; k-- {
			bs++
		}
		if bs%2 == 0 {
			return q
		}
		i = q + 1
	}
	return -1
}

// unquotePrefix decodes the JSON string tok (quotes included), or, when it
// is longer than max bytes, about its first max bytes (more is then true):
// the prefix is cut back until it decodes, so not inside an escape, and not
// inside a rune.
func unquotePrefix(tok []byte, max int) (s string, more, ok bool) {
	if len(tok) <= max+2 {
		if json.Unmarshal(tok, &s) != nil {
			return "", false, false
		}
		return s, false, true
	}
	for n := max + 1; n > max-12; n-- {
		if !utf8.RuneStart(tok[n]) {
			continue // not inside a rune
		}
		if json.Unmarshal(append(slices.Clip(tok[:n]), '"'), &s) == nil {
			return s, true, true
		}
	}
	return "", false, false
}

// mark returns s cut to at most n bytes, ending in an ellipsis when it was
// cut or when more (s is itself a prefix) is set.
func mark(s string, n int, more bool) string {
	if len(s) <= n && !more {
		return s
	}
	if len(s)+len(ellipsis) <= n {
		return s + ellipsis
	}
	return cut(s+ellipsis, n) // cut ends it in an ellipsis
}
