// Package fetch is rsharvest's one HTTP client: it GETs capability documents,
// Resource Dump packages and resources, politely and robustly.
//
// Every request waits on a per-host token bucket, carries the configured
// User-Agent and extra headers, and is retried with exponential backoff and
// jitter on temporary failures (timeouts, connection errors, HTTP 408, 425,
// 429 and 5xx), honouring Retry-After. Bodies are streamed: an interrupted
// transfer (reset, unexpected EOF, stall) is resumed with a Range request
// guarded by If-Range, and a representation that changed under the transfer
// is reported as ErrChanged instead of splicing mismatched bytes.
//
// Every error is classified where it is born with package errclass:
// retryable (temporary), permanent (the item is wrong) or, for local write
// failures in Download, fatal. Context cancellation is returned as ctx.Err()
// itself, unclassified.
package fetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/time/rate"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/internal/retry"
)

// Defaults used by New for zero Options fields.
const (
	DefaultUserAgent      = "rsharvest/dev"
	DefaultRetries        = 5
	DefaultMaxResumes     = 32
	DefaultBackoffInitial = 500 * time.Millisecond
	DefaultBackoffMax     = 30 * time.Second
	DefaultMaxRetryAfter  = 120 * time.Second
	DefaultStallTimeout   = 30 * time.Second
	DefaultTimeout        = 60 * time.Second
	// DefaultRangePartMin is the default Options.RangePartMin.
	DefaultRangePartMin = 32 << 20
	// MaxRedirects is the number of redirects followed per request; one
	// more is a permanent error.
	MaxRedirects = 10
)

// Options configures a Client. The zero value is usable: every zero field
// takes the default named in its comment.
type Options struct {
	// UserAgent is sent on every request. Default DefaultUserAgent.
	UserAgent string
	// Header holds extra headers sent on every request to the origins
	// HeaderOrigins lists, redirects, retries and resumes included: a
	// request or a redirect to another origin carries none of them.
	// Authorization is also dropped when a redirect leaves the original
	// host (or downgrades https to http); the standard library
	// additionally drops Cookie and WWW-Authenticate on such redirects.
	// New copies the map.
	Header http.Header
	// HeaderOrigins are the origins (scheme://host[:port], see Origin)
	// Header is sent to: the source's, and those the operator names
	// (--header-origin). Nil sends Header to every origin, for callers
	// that fetch only what the user named.
	HeaderOrigins []string
	// Rate is the number of requests per second allowed per host (the
	// host[:port] of the URL). <= 0 means unlimited.
	Rate float64
	// Burst is the token bucket size. Default max(1, int(Rate)).
	Burst int
	// Bandwidth caps the body bytes received per second, all requests
	// together (--bwlimit); <= 0 means unlimited.
	Bandwidth float64
	// Retries is the number of consecutive failed attempts tolerated after
	// the first one before giving up. Zero means DefaultRetries; a
	// negative value means no retries at all. The counter restarts after an
	// attempt that delivered body bytes. Download also allows at most
	// Retries restarts after ErrChanged.
	Retries int
	// MaxResumes bounds how often one Body reconnects after an interrupted
	// transfer. Zero means DefaultMaxResumes; negative means never resume.
	MaxResumes int
	// BackoffInitial and BackoffMax shape the exponential backoff (with
	// jitter) between attempts. Defaults DefaultBackoffInitial and
	// DefaultBackoffMax.
	BackoffInitial, BackoffMax time.Duration
	// MaxRetryAfter caps an honoured Retry-After. Default
	// DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// EndOnLongRetryAfter: a Retry-After longer than MaxRetryAfter is not
	// waited for (capped) but ends the request at once with its temporary
	// error, so that a run ends partial, its checkpoint held, instead of
	// sleeping for an hour.
	EndOnLongRetryAfter bool
	// StallTimeout fails an attempt (retryably, so it is resumed) when a
	// body Read receives no bytes for this long. Time the caller spends
	// between Reads does not count. Default DefaultStallTimeout.
	StallTimeout time.Duration
	// LowSpeedLimit and LowSpeedTime cut a response whose body arrives
	// slower than LowSpeedLimit bytes a second for LowSpeedTime (curl's
	// --speed-limit and --speed-time): a temporary failure wrapping
	// ErrTooSlow, not resumed. Defaults DefaultLowSpeedLimit and
	// DefaultLowSpeedTime; a negative LowSpeedLimit turns the cutoff off.
	LowSpeedLimit int64
	LowSpeedTime  time.Duration
	// Timeout bounds connecting and receiving the response headers of one
	// attempt, redirects included. It does not bound the body. Default
	// DefaultTimeout.
	Timeout time.Duration
	// Transport performs the requests. Default: a clone of
	// http.DefaultTransport with MaxIdleConnsPerHost 16, which connects
	// through Addresses.
	Transport http.RoundTripper
	// Addresses, when not nil, is the address rule every connection of
	// the default Transport is checked against (see AddressPolicy): a
	// request to a host that resolves only to refused addresses fails
	// permanently, wrapping ErrAddressRefused, before any connection is
	// attempted. Nil: no rule (for callers that fetch only what the user
	// named).
	Addresses *AddressPolicy
	// Compute selects digests Download computes (and reports in
	// Result.Hashes) even when want does not ask for them.
	Compute fixity.Compute
	// Logger receives debug and info records about resumes and restarts,
	// and a warning for each retry when OnRetry is nil. Nil discards them.
	Logger *slog.Logger
	// OnRetry, when set, is told of every request that failed temporarily
	// and is about to be sent again (see Retry), instead of the log's
	// warning: a progress display can show at once what is being retried.
	// It is called on the requesting goroutine, before the wait, possibly
	// from several goroutines at once, and must return quickly.
	OnRetry func(Retry)
	// RangeParts, when above 1, makes Download fetch a representation of
	// at least 2*RangePartMin bytes as that many contiguous parts with
	// concurrent Range requests, when a probe shows the server honours
	// Range and gives a strong validator (see Download). 0 and 1 mean one
	// stream.
	RangeParts int
	// RangePartMin is the least size of a part (see RangeParts). Default
	// DefaultRangePartMin.
	RangePartMin int64
}

// Stats are cumulative counters of a Client.
type Stats struct {
	// Requests counts HTTP requests sent, redirect hops included.
	Requests int64
	// Retries counts attempts repeated after a failed attempt.
	Retries int64
	// Resumes counts interrupted transfers continued with a Range request.
	Resumes int64
	// Restarts counts transfers that began again from byte 0: the server
	// answered a resume with the whole representation (its prefix is
	// discarded), or Download started over after ErrChanged.
	Restarts int64
	// BytesDownloaded counts body bytes received, discarded ones included.
	BytesDownloaded int64
	// Throttled counts the waits the bandwidth limit imposed.
	Throttled int64
}

// Client is an HTTP client for documents, packages and resources. It is safe
// for concurrent use; create one per run and share it.
type Client struct {
	opts       Options
	retries    int
	maxResumes int
	hc         *http.Client
	log        *slog.Logger

	// sleep waits for d or until ctx is done; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
	// origins are Options.HeaderOrigins as Origin gives them; nil: all.
	origins map[string]bool
	// bw caps the body bytes per second (Options.Bandwidth), or nil.
	bw *rate.Limiter

	requests, retried, resumes, restarts, bytes, throttled atomic.Int64
}

// New returns a Client configured by opts (see Options for the defaults).
func New(opts Options) *Client {
	if opts.UserAgent == "" {
		opts.UserAgent = DefaultUserAgent
	}
	opts.Header = opts.Header.Clone()
	if opts.Burst <= 0 {
		opts.Burst = max(1, int(opts.Rate))
	}
	if opts.BackoffInitial <= 0 {
		opts.BackoffInitial = DefaultBackoffInitial
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = DefaultBackoffMax
	}
	opts.BackoffMax = max(opts.BackoffMax, opts.BackoffInitial)
	if opts.MaxRetryAfter <= 0 {
		opts.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = DefaultStallTimeout
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.LowSpeedLimit == 0 {
		opts.LowSpeedLimit = DefaultLowSpeedLimit
	}
	if opts.LowSpeedTime <= 0 {
		opts.LowSpeedTime = DefaultLowSpeedTime
	}
	if opts.RangePartMin <= 0 {
		opts.RangePartMin = DefaultRangePartMin
	}
	if opts.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 16
		if opts.Addresses != nil {
			g := newGuard(*opts.Addresses)
			t.DialContext, t.Proxy = g.dial, g.proxy
		}
		opts.Transport = t
	}
	c := &Client{
		opts:       opts,
		retries:    budget(opts.Retries, DefaultRetries),
		maxResumes: budget(opts.MaxResumes, DefaultMaxResumes),
		log:        opts.Logger,
		sleep:      retry.Sleep,
		limiters:   make(map[string]*rate.Limiter),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if opts.Bandwidth > 0 {
		c.bw = rate.NewLimiter(rate.Limit(opts.Bandwidth), max(int(opts.Bandwidth/4), bandwidthBurst))
	}
	if opts.HeaderOrigins != nil {
		c.origins = map[string]bool{}
		for _, o := range opts.HeaderOrigins {
			if u, err := url.Parse(o); err == nil {
				c.origins[Origin(u)] = true
			}
		}
	}
	c.hc = &http.Client{Transport: opts.Transport, CheckRedirect: c.checkRedirect}
	return c
}

// bandwidthBurst is the least burst of the bandwidth limit: a read of a
// body takes at most this many bytes' worth at once.
const bandwidthBurst = 64 << 10

// throttle waits, when a bandwidth limit is set, until n more body bytes
// may have been received, or until ctx is done.
func (c *Client) throttle(ctx context.Context, n int) error {
	for c.bw != nil && n > 0 {
		k := min(n, c.bw.Burst())
		r := c.bw.ReserveN(time.Now(), k)
		if d := r.Delay(); d > 0 {
			c.throttled.Add(1)
			if err := c.sleep(ctx, d); err != nil {
				r.Cancel()
				return err
			}
		}
		n -= k
	}
	return nil
}

// budget maps a configured count to an effective one: 0 is the default,
// negative is none.
func budget(n, def int) int {
	switch {
	case n == 0:
		return def
	case n < 0:
		return 0
	}
	return n
}

// Stats returns the cumulative counters. It is safe for concurrent use.
func (c *Client) Stats() Stats {
	return Stats{
		Requests:        c.requests.Load(),
		Retries:         c.retried.Load(),
		Resumes:         c.resumes.Load(),
		Restarts:        c.restarts.Load(),
		BytesDownloaded: c.bytes.Load(),
		Throttled:       c.throttled.Load(),
	}
}

// Origin is u's origin as RFC 6454 names it: scheme://host:port, in lower
// case, with the scheme's default port when u names none.
func Origin(u *url.URL) string {
	return strings.ToLower(u.Scheme) + "://" + hostPort(u)
}

// headersFor reports whether the configured headers may go to u.
func (c *Client) headersFor(u *url.URL) bool {
	return c.origins == nil || c.origins[Origin(u)]
}

// setHeaders puts the configured headers on req: the extra ones only when
// it goes to one of their origins.
func (c *Client) setHeaders(req *http.Request) {
	if c.headersFor(req.URL) {
		for k, vs := range c.opts.Header {
			req.Header[k] = append([]string(nil), vs...)
		}
	}
	req.Header.Set("User-Agent", c.opts.UserAgent)
	// Ranges refer to the bytes on the wire: ask for them unencoded so the
	// transport does not decompress (and hide the length) behind our back.
	if req.Header.Get("Accept-Encoding") == "" {
		req.Header.Set("Accept-Encoding", "identity")
	}
}

// checkRedirect bounds redirects, keeps Authorization on the original host
// and the extra headers on their origins, asks no hop conditionally, and
// rate-limits every hop.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return errclass.Permanentf("stopped after %d redirects", MaxRedirects)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return errclass.Permanentf("redirected to a URL that is not http(s): %s", req.URL.Redacted())
	}
	allowed := c.headersFor(req.URL)
	for k, vs := range c.opts.Header {
		if allowed {
			req.Header[k] = append([]string(nil), vs...)
		} else {
			req.Header.Del(k)
		}
	}
	req.Header.Set("User-Agent", c.opts.UserAgent)
	// Where a redirect came from is not told: that URL's query may hold
	// a token the source gave, which another origin must not see.
	req.Header.Del("Referer")
	// A 304 answers for the URL asked alone: the copy held is of what
	// that URL gave, not of wherever it now leads, which may be another
	// representation not modified since.
	req.Header.Del("If-None-Match")
	req.Header.Del("If-Modified-Since")
	orig := via[0].URL
	for _, r := range append(via[1:], req) {
		if !strings.EqualFold(r.URL.Host, orig.Host) || (orig.Scheme == "https" && r.URL.Scheme != "https") {
			req.Header.Del("Authorization")
			break
		}
	}
	if err := c.wait(req.Context(), req.URL.Host); err != nil {
		return err
	}
	c.requests.Add(1)
	return nil
}

// limiter returns the token bucket of host, creating it on first use.
func (c *Client) limiter(host string) *rate.Limiter {
	host = strings.ToLower(host)
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.limiters[host]
	if !ok {
		l = rate.NewLimiter(rate.Limit(c.opts.Rate), c.opts.Burst)
		c.limiters[host] = l
	}
	return l
}

// wait blocks until host's bucket allows a request. It returns ctx.Err()
// when ctx ends first, and an error wrapping context.DeadlineExceeded when
// the wait would outlast ctx's deadline.
func (c *Client) wait(ctx context.Context, host string) error {
	if c.opts.Rate <= 0 {
		return ctx.Err()
	}
	if err := c.limiter(host).Wait(ctx); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("%w: waiting for the rate limit of %s would pass the deadline", context.DeadlineExceeded, host)
	}
	return nil
}

// policy is the retry policy of the requests for rawURL: Options.Retries
// retries of temporary failures (not of ErrChanged or ErrNoRange, which
// their callers handle), waits growing from BackoffInitial to BackoffMax
// or the server's Retry-After (capped at MaxRetryAfter) when that is
// longer, each retry counted and reported (see retrying).
func (c *Client) policy(rawURL string) retry.Policy {
	return retry.Policy{
		Retries: c.retries,
		Initial: c.opts.BackoffInitial,
		Max:     c.opts.BackoffMax,
		Retryable: func(err error) bool {
			var se *StatusError
			if c.opts.EndOnLongRetryAfter && errors.As(err, &se) && se.RetryAfter > c.opts.MaxRetryAfter {
				return false
			}
			return errclass.IsRetryable(err) && !errors.Is(err, ErrChanged) && !errors.Is(err, ErrNoRange)
		},
		Floor: func(err error) time.Duration {
			var se *StatusError
			if errors.As(err, &se) && se.RetryAfter > 0 {
				return min(se.RetryAfter, c.opts.MaxRetryAfter)
			}
			return 0
		},
		Notify: func(r retry.Retry) {
			c.retried.Add(1)
			c.retrying(rawURL, r.Attempt-1, r.Wait, r.Err)
		},
		GiveUp: func(attempts int, err error) error {
			return errclass.Retryablef("giving up after %d attempts: %w", attempts, err)
		},
		Sleep: c.sleep,
	}
}

// ErrChanged is wrapped (in a retryable error) when the representation
// changed during a transfer: a resume found a different validator, length
// or Content-Range. Bytes already returned are stale; the caller must start
// over (Download does).
var ErrChanged = errors.New("representation changed during transfer")

// StatusError reports an HTTP response with an unusable status. It is
// wrapped in a retryable error for 408, 425, 429, 5xx and a 422 with
// Retry-After, in a permanent one otherwise.
type StatusError struct {
	// URL is the URL that answered (after redirects).
	URL string
	// StatusCode is the HTTP status code.
	StatusCode int
	// RetryAfter is the delay the server asked for with Retry-After, as
	// sent (0 when absent or invalid); the client waits at most
	// Options.MaxRetryAfter.
	RetryAfter time.Duration
}

// Error names the URL and status.
func (e *StatusError) Error() string {
	s := fmt.Sprintf("GET %s: HTTP %d %s", e.URL, e.StatusCode, http.StatusText(e.StatusCode))
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (Retry-After %v)", e.RetryAfter)
	}
	return s
}

var _ error = (*StatusError)(nil)

// retryableStatus reports whether a request answered with code may succeed
// later.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return code >= 500 && code <= 599
}

// statusError builds the classified error for an unusable response. A
// 422 that says when to come back (Retry-After), as some OAI-PMH servers
// answer a harvester going too fast, is temporary too.
func statusError(resp *http.Response, now time.Time) error {
	se := &StatusError{URL: resp.Request.URL.String(), StatusCode: resp.StatusCode}
	if retryableStatus(resp.StatusCode) || (resp.StatusCode == http.StatusUnprocessableEntity && resp.Header.Get("Retry-After") != "") {
		if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
			se.RetryAfter = d
		}
		return errclass.NewRetryable(se)
	}
	return errclass.NewPermanent(se)
}

// isCertError reports whether err is a TLS certificate verification
// failure, which retrying will not fix.
// ErrUnreachable is wrapped, in a permanent error, by the error of a
// request whose host cannot be reached at all: the connection refused, or
// a name the DNS says does not exist. No retry within a run mends that (a
// temporary DNS failure is retried), and no other URL of the host is
// worth trying.
var ErrUnreachable = errors.New("the host cannot be reached")

// isUnreachable reports whether err is one ErrUnreachable stands for.
func isUnreachable(err error) bool {
	var de *net.DNSError
	return errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &de) && de.IsNotFound)
}

func isCertError(err error) bool {
	var cve *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &cve) || errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci)
}

// Bandwidth is a cap of the bytes received a second (--bwlimit); 0 is no
// cap. It reads and writes itself as ParseBandwidth reads one.
type Bandwidth float64

// UnmarshalText reads b as ParseBandwidth does.
func (bw *Bandwidth) UnmarshalText(b []byte) error {
	v, err := ParseBandwidth(string(b))
	if err != nil {
		return err
	}
	*bw = Bandwidth(v)
	return nil
}

// String is bw in bytes a second ("" for no cap).
func (bw *Bandwidth) String() string {
	if *bw == 0 {
		return ""
	}
	return strconv.FormatFloat(float64(*bw), 'f', -1, 64)
}

// ParseBandwidth reads a bandwidth as --bwlimit takes it: bytes per second,
// with an optional unit — k, M, G (powers of 1024, as rclone reads them;
// KiB, MiB, GiB too) or kB, MB, GB (powers of 1000) — and an optional
// "/s" ("10M", "500k", "2.5MB/s"). "" and "0" are no limit (0).
func ParseBandwidth(s string) (float64, error) {
	t := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	if t == "" {
		return 0, nil
	}
	mult := 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
		{"k", 1 << 10}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},
	} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || v < 0 || math.IsInf(v*mult, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("bandwidth %q: want bytes per second, such as 10M or 2.5MB/s", s)
	}
	return v * mult, nil
}
