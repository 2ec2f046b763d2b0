// Package sink defines where verified resources go: the Sink interface, the
// Resource it receives, and a Registry that opens a sink from its
// command-line spec ("fs:DIR", …). Each sink lives in its own sub-package and
// must pass the conformance suite in sink/sinktest.
package sink

import (
	"context"
	"fmt"
	"io"
	"net/url"
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
	// ResourceSet is the Capability List of the resource's set, or "".
	ResourceSet string
	// Links are the resource's links the source published (describedby,
	// describes, alternate, …), for sinks that index them.
	Links []Link
	// Sets are the sets the resource belongs to (OAI-PMH setSpecs), for
	// sinks that index them.
	Sets []string
	// About are a record's about containers (OAI-PMH provenance, rights,
	// …), each a standalone XML document, for sinks that keep them.
	About []string
}

// Link is a link of a resource (an rs:ln).
type Link struct {
	Rel, Href, Type string
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

// Local is implemented by sinks that may keep their copies where only the
// machine writing them reads them (fs on a local disk). Local reports
// whether this one does: a harvest several machines may run, one after
// another (a registry in PostgreSQL), refuses such a sink, since each
// machine would hold a part of the mirror. A sink without it (s3, es,
// solr) is reachable from every machine.
type Local interface {
	Local() bool
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
		return nil, errclass.Fatalf("sink %q: want SCHEME:ARGUMENT, one of %s", Redact(spec), reg.schemes())
	}
	open, found := reg[scheme]
	if !found {
		return nil, errclass.Fatalf("sink %q: unknown kind %q, want one of %s", Redact(spec), scheme, reg.schemes())
	}
	s, err := open(ctx, arg)
	if err != nil {
		return nil, errclass.Fatalf("sink %q: %w", Redact(spec), err)
	}
	return s, nil
}

// Redact returns a sink spec without credentials — URL user info, query
// parameters whose names suggest secrets and what looks like user info in
// a parameter's value (USER:PASSWORD@HOST) are replaced by "…" — for
// messages, logs and the state store.
func Redact(spec string) string {
	scheme, rest, ok := strings.Cut(spec, ":")
	if !ok {
		return spec
	}
	u, err := url.Parse(rest)
	if err != nil {
		return scheme + ":…"
	}
	if strings.Contains(u.Opaque, "@") || strings.Contains(u.Path, "@") {
		// USER:PASSWORD@HOST without "//", or a password's "/" not
		// escaped: what the parser did not take for user info.
		if m := maskUserInfo(rest); m != rest {
			if i := strings.IndexAny(m, "?#"); i >= 0 {
				m = m[:i] + "?…"
			}
			return scheme + ":" + m
		}
	}
	if u.User != nil {
		u.User = url.User("…")
	}
	q := u.Query()
	changed := false
	for k, vs := range q {
		lk := strings.ToLower(k)
		if strings.Contains(lk, "secret") || strings.Contains(lk, "password") || strings.Contains(lk, "token") || strings.Contains(lk, "key") {
			q.Set(k, "…")
			changed = true
			continue
		}
		for i, v := range vs {
			// USER:PASSWORD@HOST given as a value (an endpoint).
			if at := strings.LastIndex(v, "@"); at > 0 && strings.Contains(v[:at], ":") {
				vs[i] = "…" + v[at:]
				changed = true
			}
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return scheme + ":" + u.String()
}

// maskUserInfo replaces with "…" what comes before the last "@" of a URL's
// authority and path ("//" to the query), or of a URL given without "//"
// (USER:PASSWORD@HOST/…) up to its path: user info, also a password with
// an unescaped "/" that a URL parser would take for a port and a path.
// Without a ":" before the "@" there is no password: a path with an "@"
// (a directory named so) is left as it is.
func maskUserInfo(s string) string {
	start, end := 0, 0
	if i := strings.Index(s, "//"); i >= 0 {
		start = i + 2
		end = start + strings.IndexAny(s[start:]+"?", "?#")
	} else {
		end = strings.IndexAny(s+"/", "/?#")
	}
	at := strings.LastIndex(s[start:end], "@")
	if at < 0 || !strings.Contains(s[start:start+at], ":") {
		return s
	}
	return s[:start] + "…" + s[start+at:]
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

// Batcher is implemented by sinks whose Put and Delete only queue the
// write (an index's bulk API, say): a nil error then means "queued", not
// "applied". Callers Flush before they record writes as done, and treat the
// failures it returns as failed writes.
type Batcher interface {
	// Flush sends everything queued and waits for the outcome. It returns
	// the writes that failed since the previous Flush, including those of
	// batches the sink sent on its own.
	Flush(ctx context.Context) []Failed
}

// Failed is a queued write that a Batcher could not apply.
type Failed struct {
	URI    string
	Delete bool
	// Err is classified: permanent when the server rejected the document,
	// retryable when retries ran out.
	Err error
}
