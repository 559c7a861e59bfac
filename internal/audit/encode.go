package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// tsLayout is RFC 3339 with milliseconds; with a UTC time it ends in "Z".
const tsLayout = "2006-01-02T15:04:05.000Z07:00"

// MarshalJSON encodes r the way it is written to the log.
func (r Record) MarshalJSON() ([]byte, error) {
	return r.appendJSON(make([]byte, 0, 256))
}

// appendJSON appends r as one JSON object, without reflection. Optional
// fields are left out when empty, as their omitempty tags say.
func (r Record) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"ts":"`...)
	b = r.Time.UTC().AppendFormat(b, tsLayout)
	b = append(b, '"')
	b = appendField(b, "agent", r.Agent, true)
	b = appendField(b, "session", r.Session, false)
	b = appendField(b, "model", r.Model, false)
	b = appendField(b, "channel", r.Channel, false)
	b = appendField(b, "phase", r.Phase, true)
	b = appendField(b, "type", r.Type, true)
	b = appendField(b, "tool", r.Tool, true)
	if len(r.Args) > 0 {
		b = append(b, `,"args":`...)
		// Compact both checks the JSON and removes any newline from it.
		buf := bytes.NewBuffer(b)
		if err := json.Compact(buf, r.Args); err != nil {
			return nil, fmt.Errorf("audit: args of %s: %w", r.Tool, err)
		}
		b = buf.Bytes()
	}
	if r.ArgsBytes != 0 {
		b = append(b, `,"argsBytes":`...)
		b = strconv.AppendInt(b, r.ArgsBytes, 10)
	}
	b = appendField(b, "argsSha256", r.ArgsSha256, false)
	if r.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	b = appendField(b, "decision", r.Decision, false)
	b = appendField(b, "target", r.Target, false)
	if r.DurationMs != nil {
		b = append(b, `,"durationMs":`...)
		b = strconv.AppendInt(b, *r.DurationMs, 10)
	}
	if r.ExitCode != nil {
		b = append(b, `,"exitCode":`...)
		b = strconv.AppendInt(b, int64(*r.ExitCode), 10)
	}
	if r.OutputBytes != nil {
		b = append(b, `,"outputBytes":`...)
		b = strconv.AppendInt(b, *r.OutputBytes, 10)
	}
	b = appendField(b, "error", r.Error, false)
	if r.Unattributed {
		b = append(b, `,"unattributed":true`...)
	}
	b = appendField(b, "host", r.Host, false)
	if r.Port != 0 {
		b = append(b, `,"port":`...)
		b = strconv.AppendInt(b, int64(r.Port), 10)
	}
	b = appendField(b, "method", r.Method, false)
	b = appendField(b, "rule", r.Rule, false)
	if r.BytesUp != nil {
		b = append(b, `,"bytesUp":`...)
		b = strconv.AppendInt(b, *r.BytesUp, 10)
	}
	if r.BytesDown != nil {
		b = append(b, `,"bytesDown":`...)
		b = strconv.AppendInt(b, *r.BytesDown, 10)
	}
	b = appendField(b, "injected", r.Injected, false)
	b = appendField(b, "approvedBy", r.ApprovedBy, false)
	b = appendField(b, "approval", r.Approval, false)
	return append(b, '}'), nil
}

func appendField(b []byte, key, val string, always bool) []byte {
	if val == "" && !always {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendString(b, val)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Control characters, U+2028 and
// U+2029 are escaped, and invalid UTF-8 becomes U+FFFD, as encoding/json does
// (without its HTML escaping, which a log has no use for).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
