package install

import (
	"fmt"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// resolveVersion picks the version of a packument that want names: a
// dist-tag ("latest", "next"), an exact version, or an npm range ("^1.0.0",
// "~1.2", ">=1 <2", "1.x", "1 || 2", "1.0.0 - 1.2.0"). A range resolves to
// the highest satisfying version; prereleases are only considered when the
// range itself names one (Masterminds/semver's rule, close to npm's).
func resolveVersion(pkg, want string, tags map[string]string, versions []string) (string, error) {
	if want == "" {
		want = "latest"
	}
	if tagged, ok := tags[want]; ok {
		return tagged, nil
	}
	if slices.Contains(versions, want) {
		return want, nil
	}
	c, err := semver.NewConstraint(want)
	if err != nil {
		return "", fmt.Errorf("%s has no version or dist-tag %q%s", pkg, want, available(versions))
	}
	var best *semver.Version
	var bestRaw string
	for _, raw := range versions {
		v, err := semver.StrictNewVersion(raw)
		if err != nil || !c.Check(v) {
			continue
		}
		if best == nil || v.GreaterThan(best) {
			best, bestRaw = v, raw
		}
	}
	if best == nil {
		return "", fmt.Errorf("%s has no version matching %q%s", pkg, want, available(versions))
	}
	return bestRaw, nil
}

// available lists (up to 20 of) the newest versions for an error message.
func available(versions []string) string {
	var vs []*semver.Version
	for _, raw := range versions {
		if v, err := semver.StrictNewVersion(raw); err == nil {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return ""
	}
	slices.SortFunc(vs, func(a, b *semver.Version) int { return b.Compare(a) })
	if len(vs) > 20 {
		vs = vs[:20]
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = v.Original()
	}
	return "; available: " + strings.Join(s, ", ")
}
