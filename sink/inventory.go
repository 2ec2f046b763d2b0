package sink

import (
	"context"
	"io"
)

// Inventory is implemented by sinks that can report what they hold: the
// conformance suite (sink/sinktest) reads a sink back through it, and so can
// an audit. Find it by type assertion on a Sink.
//
// An Inventory reports committed state only: a Put in progress, or one that
// failed, is never visible through it.
type Inventory interface {
	// Get opens the held body of uri; the caller must close it. When the
	// sink does not hold uri, the error satisfies
	// errors.Is(err, fs.ErrNotExist).
	Get(ctx context.Context, uri string) (io.ReadCloser, error)
	// Walk calls fn once with every held URI, exactly as it was given to
	// Put, in no particular order. An error from fn stops the walk and is
	// returned (wrapped with %w at most). Changes made while a walk runs may
	// or may not be reported.
	Walk(ctx context.Context, fn func(uri string) error) error
}
