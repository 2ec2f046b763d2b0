package pipeline_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/pipeline"
)

// TestSourceErrorNested: a SourceError wrapping another (a walk that
// failed in discovery, wrapped again by the run) reads as the inner one:
// "source unreadable:" once, the source once.
func TestSourceErrorNested(t *testing.T) {
	const u = "http://example.org/"
	inner := &pipeline.SourceError{URL: u, Err: errors.New("no ResourceSync document found: GET " + u + ": HTTP 404 Not Found")}
	for _, err := range []error{inner, &pipeline.SourceError{URL: u, Err: inner}, &pipeline.SourceError{URL: u + ".well-known/resourcesync", Err: inner}} {
		got := err.Error()
		if want := "source unreadable: no ResourceSync document found: GET " + u + ": HTTP 404 Not Found"; got != want {
			t.Errorf("Error() = %q, want %q", got, want)
		}
		if strings.Count(got, "source unreadable") != 1 || strings.Count(got, u) != 1 {
			t.Errorf("Error() = %q repeats itself", got)
		}
	}
}
