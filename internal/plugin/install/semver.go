package install

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// resolveVersion picks the version of a packument that want names: a
// dist-tag ("latest", "next"), an exact version, or an npm range ("^1.0.0",
// "~1.2", ">=1 <2", "1.x", "1 || 2", "1.0.0 - 1.2.0"). A range resolves to
// the highest satisfying version; a prerelease only when the range names a
// prerelease of the same major.minor.patch (npm's rule, see satisfies).
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
	if _, err := semver.NewConstraint(want); err != nil {
		return "", fmt.Errorf("%s has no version or dist-tag %q%s", pkg, want, available(versions))
	}
	sets, err := rangeSets(want)
	if err != nil {
		return "", fmt.Errorf("%s has no version or dist-tag %q%s", pkg, want, available(versions))
	}
	var best *semver.Version
	var bestRaw string
	for _, raw := range versions {
		v, err := semver.StrictNewVersion(raw)
		if err != nil || !satisfies(sets, v) {
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

// rangeSet is one ||-alternative of a range and the major.minor.patch of
// the prereleases its comparators name.
type rangeSet struct {
	c    *semver.Constraints
	pres []string
}

var prereleaseRef = regexp.MustCompile(`v?(\d+)\.(\d+)\.(\d+)-[0-9A-Za-z.-]+`)

func rangeSets(r string) ([]rangeSet, error) {
	var sets []rangeSet
	for _, alt := range strings.Split(r, "||") {
		c, err := semver.NewConstraint(alt)
		if err != nil {
			return nil, err
		}
		var pres []string
		for _, m := range prereleaseRef.FindAllStringSubmatch(alt, -1) {
			pres = append(pres, m[1]+"."+m[2]+"."+m[3])
		}
		sets = append(sets, rangeSet{c, pres})
	}
	return sets, nil
}

// satisfies is npm's rule on top of Masterminds': a version satisfies a
// range when one ||-alternative admits it, and a prerelease only when that
// alternative names a prerelease of the same major.minor.patch
// (^1.2.3-beta.1 takes 1.2.3-beta.2, never 1.3.0-alpha).
func satisfies(sets []rangeSet, v *semver.Version) bool {
	tuple := fmt.Sprintf("%d.%d.%d", v.Major(), v.Minor(), v.Patch())
	for _, s := range sets {
		if !s.c.Check(v) {
			continue
		}
		if v.Prerelease() == "" || slices.Contains(s.pres, tuple) {
			return true
		}
	}
	return false
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
