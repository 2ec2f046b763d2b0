package config

import "testing"

func TestSuggest(t *testing.T) {
	known := []string{"concurrency", "workers", "stall_timeout", "log_level", "headers", "capability_list_url"}
	tests := []struct{ key, want string }{
		{"concurency", "concurrency"},
		{"worker", "workers"},
		{"stall-timeout", "stall_timeout"},
		{"LOG_LEVEL", "log_level"},
		{"header", "headers"},
		{"log-levl", "log_level"},
		{"capability_list", ""},
		{"x", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Suggest(tt.key, known); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}
