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
	for _, f := range []*string{&r.Agent, &r.Session, &r.Model, &r.Channel, &r.Phase, &r.Type, &r.Tool, &r.Decision, &r.Target} {
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
