package sandbox

import "testing"

func TestParseMemory(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"", 0, true},
		{"0", 0, true},
		{"1048576", 1 << 20, true},
		{"512b", 512, true},
		{"1k", 1 << 10, true},
		{"1K", 1 << 10, true},
		{"64m", 64 << 20, true},
		{"64mb", 64 << 20, true},
		{"64MiB", 64 << 20, true},
		{"2g", 2 << 30, true},
		{"3G", 3 << 30, true},
		{"1.5g", 3 << 29, true},
		{"1t", 1 << 40, true},
		{" 2g ", 2 << 30, true},
		{"-1", 0, false},
		{"-1g", 0, false},
		{"g", 0, false},
		{"2x", 0, false},
		{"0x10", 0, false},
		{"1e3", 0, false},
		{"abc", 0, false},
		{"+5", 0, false},
		{"99999999999999999999", 0, false},
		{"9999999999t", 0, false},
		{"NaN", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseMemory(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
