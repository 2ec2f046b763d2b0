package fetch

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"120", 120 * time.Second, true},
		{" 5 ", 5 * time.Second, true},
		{"99999999999999999999999", time.Duration(math.MaxInt64), true},
		{"9223372037", time.Duration(math.MaxInt64), true},
		{"Sun, 01 Jun 2025 12:00:30 GMT", 30 * time.Second, true},
		{"Sunday, 01-Jun-25 12:01:00 GMT", time.Minute, true},
		{"Sun Jun  1 12:00:10 2025", 10 * time.Second, true},
		{"Sun, 01 Jun 2025 11:00:00 GMT", 0, true},
		{"", 0, false},
		{"-1", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"2025-06-01T12:00:30Z", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "120", "-1", " 7 ", "1e3", "99999999999999999999",
		"Fri, 31 Dec 1999 23:59:59 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "garbage"} {
		f.Add(s, int64(1_700_000_000))
	}
	f.Fuzz(func(t *testing.T, v string, unix int64) {
		now := time.Unix(unix, 0)
		d, ok := ParseRetryAfter(v, now)
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, negative", v, d)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false; want 0 when not ok", v, d)
		}
		if isDigits(strings.TrimSpace(v)) && !ok {
			t.Fatalf("ParseRetryAfter(%q) rejected delta-seconds", v)
		}
		if d2, ok2 := ParseRetryAfter(v, now); d2 != d || ok2 != ok {
			t.Fatalf("ParseRetryAfter(%q) is not deterministic", v)
		}
	})
}
