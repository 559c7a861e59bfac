package config

import (
	"fmt"
	"strings"
)

// interpolate replaces ${VAR} and ${VAR:-default} in s. A "$" that does not
// start "${" is kept as it is. An unset variable without a default is an
// error that names it; "${VAR:-}" means "empty when unset". As in the shell,
// the default also applies when VAR is set but empty.
func interpolate(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		rest := s[i+2:]
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return "", fmt.Errorf("unterminated ${ in %q (write ${NAME})", s)
		}
		ref := rest[:end]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !validVarName(name) {
			return "", fmt.Errorf("invalid variable reference ${%s} (names are letters, digits and _, not starting with a digit)", ref)
		}
		val, ok := lookup(name)
		switch {
		case hasDef && (!ok || val == ""):
			val = def
		case !ok:
			return "", fmt.Errorf("environment variable %s is not set (set it, or write ${%s:-default})", name, name)
		}
		b.WriteString(val)
		s = rest[end+1:]
	}
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
