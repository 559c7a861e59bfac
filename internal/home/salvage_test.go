package home

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
)

func TestSalvageEntries(t *testing.T) {
	for _, tt := range []struct {
		in       string
		want     map[string]int
		complete bool
	}{
		{`{"a":1,"b":2}`, map[string]int{"a": 1, "b": 2}, true},
		{`{"a":1,"b":2,"c":`, map[string]int{"a": 1, "b": 2}, false}, // torn tail
		{`{"a":1,"b":"x","c":3}`, map[string]int{"a": 1}, false},     // stops at the first bad value
		{`[1,2]`, map[string]int{}, false},
		{``, map[string]int{}, false},
	} {
		got := map[string]int{}
		complete := SalvageEntries(json.NewDecoder(strings.NewReader(tt.in)), func(k string, v int) { got[k] = v })
		if !maps.Equal(got, tt.want) || complete != tt.complete {
			t.Errorf("%q: %v %v, want %v %v", tt.in, got, complete, tt.want, tt.complete)
		}
	}
}
