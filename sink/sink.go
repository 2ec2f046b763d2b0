// Package sink defines where verified resources go: the Sink interface, the
// Resource it receives, and a Registry that opens a sink from its
// command-line spec ("fs:DIR", …). Each sink lives in its own sub-package and
// must pass the conformance suite in sink/sinktest.
package sink

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
)

// Resource describes one resource being delivered: its identity (URI) and
// the metadata the source published for it.
type Resource struct {
	// URI is the resource's URI as given in the source's <loc>. It is the
	// resource's identity in every sink.
	URI string
	// Length is the body's length in bytes, or -1 when unknown.
	Length int64
	// Hashes are the body's digests as published (and verified).
	Hashes fixity.Hashes
	// Type is the media type, or "".
	Type string
	// Lastmod is the last modification time, or the zero time.
	Lastmod time.Time
}

// Sink is a destination for verified resources. Implementations must be
// safe for concurrent use by up to Concurrency() goroutines (see Limiter).
type Sink interface {
	// Put stores body as the current state of r.URI, replacing any earlier
	// state. It must read body until io.EOF and make the new state visible
	// only after that, atomically: if a Read returns any other error, or ctx
	// ends, Put must leave the previous state (or nothing) in place and
	// return an error. The body is verified by the caller as it is read; its
	// final Read reports a fixity mismatch as an error instead of io.EOF.
	Put(ctx context.Context, r *Resource, body io.Reader) error
	// Delete removes the resource with this URI. Deleting a URI the sink
	// does not hold is not an error.
	Delete(ctx context.Context, uri string) error
	// Close flushes and commits whatever the sink buffers and releases its
	// resources. No other method may be called after Close.
	Close(ctx context.Context) error
}

// Limiter is implemented by sinks that say how many writes they take in
// flight at once. Callers never run more concurrent Put/Delete calls than
// Concurrency returns. A sink without it is given the pipeline's default.
type Limiter interface {
	Concurrency() int
}

// Opener opens a sink from the part of its spec after "scheme:".
type Opener func(ctx context.Context, arg string) (Sink, error)

// Registry maps a spec scheme ("fs", "s3", …) to the function opening such a
// sink. Adding a sink is one sub-package plus one entry in the registry the
// command builds.
type Registry map[string]Opener

// Open opens the sink named by spec, "scheme:argument" (for URL-like
// schemes such as "s3://bucket", the argument is everything after "scheme:").
// An unknown scheme or an opener's failure is a fatal configuration error.
func (reg Registry) Open(ctx context.Context, spec string) (Sink, error) {
	scheme, arg, ok := strings.Cut(spec, ":")
	if !ok || scheme == "" {
		return nil, errclass.Fatalf("sink %q: want SCHEME:ARGUMENT, one of %s", spec, reg.schemes())
	}
	open, found := reg[scheme]
	if !found {
		return nil, errclass.Fatalf("sink %q: unknown kind %q, want one of %s", spec, scheme, reg.schemes())
	}
	s, err := open(ctx, arg)
	if err != nil {
		return nil, errclass.Fatalf("sink %q: %w", spec, err)
	}
	return s, nil
}

func (reg Registry) schemes() string {
	names := make([]string, 0, len(reg))
	for k := range reg {
		names = append(names, k+":")
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// String renders a resource for logs.
func (r *Resource) String() string { return fmt.Sprintf("%s (%d bytes)", r.URI, r.Length) }
