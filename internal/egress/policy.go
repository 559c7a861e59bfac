package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// A Rule is one entry of sandbox.egress.allow or .deny:
//
//	"*"                 every host (by name or public address), every port
//	"api.github.com"    that host, any port
//	"*.pypi.org"        every name under pypi.org (not pypi.org itself)
//	"registry.npmjs.org:443", "*.pypi.org:443", "*:443"   the same, one port
//	"10.1.2.3", "10.0.0.0/8", "[fd00::/8]:5432", "[::1]:8080"   addresses
//
// Name rules match the name the sandbox asked for; address rules match the
// addresses the gateway resolved it to (or an address asked for directly).
// Only an address rule in allow lets a connection reach a loopback,
// private, link-local or other special address, or the gateway host's own.
type Rule struct {
	text   string       // as written, for messages
	any    bool         // "*"
	name   string       // exact name, lower case, no trailing dot
	suffix string       // "*.x.org" -> ".x.org"
	prefix netip.Prefix // address rule, when valid
	port   int          // 0 = any port
}

// String returns the rule as written in the config.
func (r Rule) String() string { return r.text }

// isAddr reports whether r is an address rule.
func (r Rule) isAddr() bool { return r.prefix.IsValid() }

// ParseRule parses one rule; see Rule.
func ParseRule(s string) (Rule, error) {
	r := Rule{text: s}
	t := strings.TrimSpace(s)
	if t == "" {
		return r, errors.New("empty rule")
	}
	host, port := t, ""
	switch {
	case strings.HasPrefix(t, "["):
		end := strings.IndexByte(t, ']')
		if end < 0 {
			return r, fmt.Errorf("rule %q: missing ']'", s)
		}
		host, port = t[1:end], t[end+1:]
		if port != "" {
			if !strings.HasPrefix(port, ":") {
				return r, fmt.Errorf("rule %q: want [address]:port", s)
			}
			port = port[1:]
		}
	case strings.Count(t, ":") == 1:
		host, port, _ = strings.Cut(t, ":")
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return r, fmt.Errorf("rule %q: invalid port %q", s, port)
		}
		r.port = n
	}
	if host == "*" {
		r.any = true
		return r, nil
	}
	if strings.Contains(host, "/") {
		p, err := netip.ParsePrefix(host)
		if err != nil {
			return r, fmt.Errorf("rule %q: invalid address range: %w", s, err)
		}
		r.prefix = unmapPrefix(p.Masked())
		return r, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return r, fmt.Errorf("rule %q: addresses with a zone are not supported", s)
		}
		a = a.Unmap()
		r.prefix = netip.PrefixFrom(a, a.BitLen())
		return r, nil
	} else if strings.Count(host, ":") > 1 {
		return r, fmt.Errorf("rule %q: invalid address (write an IPv6 address with a port as [addr]:port)", s)
	}
	wild := strings.HasPrefix(host, "*.")
	if wild {
		host = host[2:]
	}
	name, ok := normalizeName(host)
	if !ok {
		return r, fmt.Errorf("rule %q: invalid host name", s)
	}
	if wild {
		r.suffix = "." + name
	} else {
		r.name = name
	}
	return r, nil
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// normalizeName lower-cases a DNS name and drops one trailing dot; it
// reports false for anything that is not letters, digits, '-', '_' and
// non-empty labels of at most 63 bytes (253 in all).
func normalizeName(s string) (string, bool) {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return "", false
	}
	b := []byte(s)
	label := 0
	for i, c := range b {
		switch {
		case c >= 'A' && c <= 'Z':
			b[i] = c + 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		case c == '.':
			if label == 0 {
				return "", false
			}
			label = -1
		default:
			return "", false
		}
		label++
		if label > 63 {
			return "", false
		}
	}
	if label == 0 {
		return "", false
	}
	return string(b), true
}

// matchName reports whether r matches the name (normalised) at port.
func (r Rule) matchName(name string, port int) bool {
	if r.port != 0 && r.port != port {
		return false
	}
	switch {
	case r.any:
		return true
	case r.name != "":
		return r.name == name
	case r.suffix != "":
		return strings.HasSuffix(name, r.suffix)
	}
	return false
}

// matchAddr reports whether r matches the address at port. "*" matches
// every address; whether a special address may be reached is decided by
// Policy.CheckAddr.
func (r Rule) matchAddr(a netip.Addr, port int) bool {
	if r.port != 0 && r.port != port {
		return false
	}
	if r.any {
		return true
	}
	return r.isAddr() && r.prefix.Contains(a)
}

// Policy is one agent's sandbox.egress: deny rules win over allow rules,
// and a destination no allow rule matches is denied.
type Policy struct {
	Allow []Rule
	Deny  []Rule
}

// AllowAll is the policy when sandbox.egress.allow is not given: every
// public destination, every connection audited.
var AllowAll = []string{"*"}

// NewPolicy parses the rules of sandbox.egress. A nil allow means AllowAll;
// an empty, non-nil one allows nothing.
func NewPolicy(allow, deny []string) (*Policy, error) {
	if allow == nil {
		allow = AllowAll
	}
	p := &Policy{}
	var errs []error
	for i, s := range allow {
		r, err := ParseRule(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("allow[%d]: %w", i, err))
			continue
		}
		p.Allow = append(p.Allow, r)
	}
	for i, s := range deny {
		r, err := ParseRule(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("deny[%d]: %w", i, err))
			continue
		}
		p.Deny = append(p.Deny, r)
	}
	return p, errors.Join(errs...)
}

// Decision is the answer of the policy for one destination. Rule is the
// rule that decided ("" when no rule matched); Reason says why, for the
// 403 text and the audit record.
type Decision struct {
	Allowed bool
	Rule    string
	Reason  string
}

// Target is a destination as the sandbox asked for it: a normalised name
// or an address literal, and a port.
type Target struct {
	Name string     // lower case, no trailing dot; "" when Addr is set
	Addr netip.Addr // the literal address asked for, unmapped
	Port int
}

// String is host:port as the sandbox would write it.
func (t Target) String() string {
	if t.Addr.IsValid() {
		return netip.AddrPortFrom(t.Addr, uint16(t.Port)).String()
	}
	return t.Name + ":" + strconv.Itoa(t.Port)
}

// Host is the name or the address, without the port.
func (t Target) Host() string {
	if t.Addr.IsValid() {
		return t.Addr.String()
	}
	return t.Name
}

// Check decides on the destination as asked for, before any resolution:
// deny rules first, then allow rules. Name rules match names, address rules
// match address literals; "*" matches both. An allowed address literal, and
// every address a name resolves to, must still pass CheckAddr.
func (p *Policy) Check(t Target) Decision {
	match := func(r Rule) bool {
		if t.Addr.IsValid() {
			return r.matchAddr(t.Addr, t.Port)
		}
		return r.matchName(t.Name, t.Port)
	}
	for _, r := range p.Deny {
		if match(r) {
			return Decision{Rule: r.text, Reason: fmt.Sprintf("%s is denied by rule %q in sandbox.egress.deny", t, r.text)}
		}
	}
	for _, r := range p.Allow {
		if match(r) {
			return Decision{Allowed: true, Rule: r.text}
		}
	}
	return Decision{Reason: fmt.Sprintf("%s matches no rule of sandbox.egress.allow (%s)", t, p.allowList())}
}

func (p *Policy) allowList() string {
	if len(p.Allow) == 0 {
		return "the list is empty"
	}
	var b strings.Builder
	for i, r := range p.Allow {
		if i > 0 {
			b.WriteString(", ")
		}
		if i == 8 {
			fmt.Fprintf(&b, "and %d more", len(p.Allow)-i)
			break
		}
		b.WriteString(strconv.Quote(r.text))
	}
	return b.String()
}

// CheckAddr decides on one address the connection would go to (resolved
// from t.Name, or t.Addr itself): an address deny rule refuses it; a special
// address (see Special) needs an address rule in allow that contains it;
// any other address passes. local lists the gateway host's own addresses,
// which are treated as special.
func (p *Policy) CheckAddr(t Target, a netip.Addr, local []netip.Prefix) Decision {
	a = a.Unmap()
	for _, r := range p.Deny {
		if r.isAddr() && r.matchAddr(a, t.Port) {
			return Decision{Rule: r.text, Reason: fmt.Sprintf("%s (%s) is denied by rule %q in sandbox.egress.deny", t, a, r.text)}
		}
	}
	kind := Special(a, local)
	if kind == "" {
		return Decision{Allowed: true}
	}
	for _, r := range p.Allow {
		if r.isAddr() && r.matchAddr(a, t.Port) {
			return Decision{Allowed: true, Rule: r.text}
		}
	}
	via := ""
	if t.Name != "" {
		via = " resolves to " + a.String() + ","
	}
	return Decision{Rule: "special-address", Reason: fmt.Sprintf("%s%s %s, which is refused unless sandbox.egress.allow names it by address (e.g. %q)", t, via, kind, a.String())}
}

var specialPrefixes = []struct {
	p    netip.Prefix
	kind string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `a "this network" address`},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (CGNAT) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "a protocol-assignment address"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a NAT64 address"},
	{netip.MustParsePrefix("100::/64"), "a discard-only address"},
	{netip.MustParsePrefix("2001::/23"), "an IETF protocol address"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address"},
}

// Special says what kind of address a is when the proxy must not reach it
// by default ("a loopback address", "a private address", "the gateway
// host's own address", …), or "" for an ordinary public address.
func Special(a netip.Addr, local []netip.Prefix) string {
	a = a.Unmap()
	switch {
	case !a.IsValid():
		return "an invalid address"
	case a.Zone() != "":
		return "an address with a zone"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "a link-local address"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast(), a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "a multicast or broadcast address"
	case a.IsPrivate():
		return "a private address"
	}
	for _, p := range local {
		if p.Contains(a) {
			return "the gateway host's own address"
		}
	}
	for _, s := range specialPrefixes {
		if s.p.Contains(a) {
			return s.kind
		}
	}
	return ""
}
