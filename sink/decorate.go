package sink

import (
	"context"
	"io"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/internal/retry"
)

// Retrier is implemented by sinks that retry their own requests' temporary
// failures (the es and solr sinks do, with backoff): WithRetry does not
// retry them again, so no failure is retried by two layers.
type Retrier interface {
	RetriesRequests() bool
}

// RetryPolicy is how WithRetry retries a sink's temporary failures.
type RetryPolicy struct {
	// Retries is how many times a failed call is repeated (0: never).
	Retries int
	// Backoff is the first wait; waits grow up to 20 times it.
	Backoff time.Duration
	// Notify, when set, is told of each retry of the call about uri.
	Notify func(uri string, rt retry.Retry)
}

// WithRetry returns s with the one retry layer a caller puts around a
// sink: a failure the sink does not classify is taken as temporary (a
// write that failed may work again), and a temporary failure of Put or
// Delete is repeated as p says — unless s retries its own requests
// (Retrier). Put is repeated only when its body can be read again from
// its start (an io.Seeker: it is sought to 0 first), and never when
// reading the body failed: the body's source retries its own reads, and
// bytes that did not match will not match again.
func WithRetry(s Sink, p RetryPolicy) Sink {
	if r, ok := s.(Retrier); ok && r.RetriesRequests() {
		p.Retries = 0
	}
	return &retrying{Sink: s, p: p}
}

// WithLimit returns s taking at most n calls of Put and Delete at once
// (n < 1: one); a call waiting for its turn ends with ctx.
func WithLimit(s Sink, n int) Sink {
	return &limited{Sink: s, sem: make(chan struct{}, max(n, 1))}
}

type retrying struct {
	Sink
	p RetryPolicy
}

var _ Sink = (*retrying)(nil)

func (r *retrying) Put(ctx context.Context, res *Resource, body io.Reader) error {
	seeker, rewinds := body.(io.Seeker)
	if !rewinds {
		return classify(r.Sink.Put(ctx, res, body)) // once: it cannot be read again
	}
	tb := &trackedBody{r: body}
	tries := 0
	return r.do(ctx, res.URI, func() error {
		if tries++; tries > 1 {
			if _, err := seeker.Seek(0, io.SeekStart); err != nil {
				return retry.Stop(err)
			}
		}
		tb.failed = false
		err := classify(r.Sink.Put(ctx, res, tb))
		if err != nil && tb.failed {
			return retry.Stop(err) // the body's failure, not the sink's
		}
		return err
	})
}

func (r *retrying) Delete(ctx context.Context, uri string) error {
	return r.do(ctx, uri, func() error { return classify(r.Sink.Delete(ctx, uri)) })
}

func (r *retrying) do(ctx context.Context, uri string, op func() error) error {
	p := retry.Policy{Retries: r.p.Retries, Initial: r.p.Backoff, Max: 20 * r.p.Backoff}
	if r.p.Notify != nil {
		p.Notify = func(rt retry.Retry) { r.p.Notify(uri, rt) }
	}
	return retry.Do(ctx, p, op)
}

// classify takes a sink's unclassified failure as temporary.
func classify(err error) error {
	if err != nil && errclass.Of(err) == errclass.Unclassified {
		return errclass.NewRetryable(err)
	}
	return err
}

// trackedBody notes whether a read of the body failed.
type trackedBody struct {
	r      io.Reader
	failed bool
}

func (t *trackedBody) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		t.failed = true
	}
	return n, err
}

type limited struct {
	Sink
	sem chan struct{}
}

var _ Sink = (*limited)(nil)

func (l *limited) Put(ctx context.Context, res *Resource, body io.Reader) error {
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer func() { <-l.sem }()
	return l.Sink.Put(ctx, res, body)
}

func (l *limited) Delete(ctx context.Context, uri string) error {
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer func() { <-l.sem }()
	return l.Sink.Delete(ctx, uri)
}

func (l *limited) acquire(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case l.sem <- struct{}{}:
		return nil
	}
}
