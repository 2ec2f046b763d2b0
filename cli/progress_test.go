package cli

import (
	"bytes"
	"testing"

	"github.com/rsharvest/rsharvest/pipeline"
)

func TestCountsLine(t *testing.T) {
	tests := []struct {
		name string
		set  func(c *pipeline.Counts)
		want string
	}{
		{"nothing yet", func(*pipeline.Counts) {}, "written 0, unchanged 0, failed 0"},
		{"packages", func(c *pipeline.Counts) {
			c.PackagesTotal.Store(8)
			c.PackagesDone.Store(2)
			c.PackagesFailed.Store(1)
			c.Written.Store(120)
			c.Unchanged.Store(7)
			c.Failed.Store(3)
		}, "written 120, unchanged 7, failed 3; packages 3/8"},
		{"deletes", func(c *pipeline.Counts) { c.Written.Store(1); c.Deleted.Store(2) }, "written 1, unchanged 0, failed 0, deleted 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c pipeline.Counts
			tt.set(&c)
			if got := countsLine(&c); got != tt.want {
				t.Fatalf("countsLine = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestTerminalLogClearsTheLine: a log record written while the progress
// line is shown clears that line first, so the two never share a line.
func TestTerminalLogClearsTheLine(t *testing.T) {
	var out bytes.Buffer
	term := &terminal{w: &out}
	term.Write([]byte("before\n"))
	barWriter{term}.Write([]byte("\r 40% |████| written 1"))
	term.Write([]byte("level=WARN msg=retrying\n"))
	want := "before\n\r 40% |████| written 1\r\x1b[Klevel=WARN msg=retrying\n"
	if out.String() != want {
		t.Fatalf("terminal holds %q, want %q", out.String(), want)
	}
}
