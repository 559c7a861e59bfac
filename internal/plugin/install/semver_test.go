package install

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestResolveVersionRanges(t *testing.T) {
	versions := []string{"0.1.0", "0.1.5", "0.2.0", "1.0.0", "1.2.0", "1.2.7", "1.3.0", "2.0.0-rc.1", "2.0.0", "2.1.0-beta.1", "3.0.0-alpha.1"}
	tags := map[string]string{"latest": "2.0.0", "next": "3.0.0-alpha.1"}
	for _, tc := range []struct{ want, got string }{
		{"", "2.0.0"},
		{"latest", "2.0.0"},
		{"next", "3.0.0-alpha.1"},
		{"1.2.0", "1.2.0"},
		{"^1.0.0", "1.3.0"},
		{"^0.1.0", "0.1.5"},
		{"~1.2", "1.2.7"},
		{">=1 <2", "1.3.0"},
		{"1.x", "1.3.0"},
		{"1.2.x", "1.2.7"},
		{"^2", "2.0.0"},
		{"0.1 || 1.2", "1.2.7"},
		{"1.0.0 - 1.2.0", "1.2.0"},
		{"*", "2.0.0"},
		{"^2.1.0-beta.0", "2.1.0-beta.1"},
		// npm's prerelease rule: only prereleases of the tuple the range names.
		{"^2.0.0-rc.0", "2.0.0"},         // not 2.1.0-beta.1 (Masterminds alone would take it)
		{">=2.0.0-rc.0 <2.1.0", "2.0.0"}, // not 2.1.0-beta.1... which is above anyway
		{">=2.0.0-rc.0 <=2.0.0-rc.1", "2.0.0-rc.1"},
		{">=1.0.0-0", "2.0.0"},                   // not 3.0.0-alpha.1 nor 2.1.0-beta.1
		{">=2.1.0-beta.0 || ^1", "2.1.0-beta.1"}, // the alternative that names it admits it
		{"^1 || >=2.1.0-alpha", "2.1.0-beta.1"},
		{"~3.0.0-alpha.0", "3.0.0-alpha.1"},
		{"2.0.0-rc.1 - 2.0.0", "2.0.0"},
	} {
		got, err := resolveVersion("p", tc.want, tags, versions)
		if err != nil || got != tc.got {
			t.Errorf("resolve %q = %q, %v; want %q", tc.want, got, err, tc.got)
		}
	}
	for _, bad := range []string{"4.0.0", "^5", "nosuchtag"} {
		_, err := resolveVersion("p", bad, tags, versions)
		if err == nil || !strings.Contains(err.Error(), "available: 3.0.0-alpha.1, 2.1.0-beta.1, 2.0.0") {
			t.Errorf("resolve %q: err %v; want the available versions listed", bad, err)
		}
	}
}

func TestParseSourceAcceptsRanges(t *testing.T) {
	for _, r := range []string{"^1.0.0", "~1.2", ">=1 <2", "1.x", "next", "1 || 2", "1.0.0 - 1.2.0"} {
		s, err := ParseSource("npm:@scope/pkg@"+r, "/w")
		if err != nil || s.Version != r || s.String() != "npm:@scope/pkg@"+r {
			t.Errorf("ParseSource range %q: %+v, %v", r, s, err)
		}
	}
}

func TestRegistryRefusalSaysHost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer srv.Close()
	in := New(Options{Home: t.TempDir(), Registry: srv.URL})
	_, err := in.Install(context.Background(), Source{Kind: KindNPM, Package: "@s/p"}, nil)
	host := strings.TrimPrefix(srv.URL, "http://")
	if err == nil || !strings.Contains(err.Error(), "registry at "+host+" refused access (401") {
		t.Fatalf("install from a 401 registry: %v; want a plain refusal naming %s", err, host)
	}
}
