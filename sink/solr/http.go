package solr

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/internal/retry"
)

// defaultResponseLimit bounds the answers to updates and pings.
const defaultResponseLimit = 1 << 20

// request is one request to a handler of the core.
type request struct {
	method      string
	handler     string // "update", "select", "admin/ping"
	query       url.Values
	contentType string
	body        []byte
	ops         int   // operations in an update, for the log
	limit       int64 // largest answer read; 0 means defaultResponseLimit
	// noConnRetry makes connection errors final (the ping at New: an
	// unreachable Solr is reported at once).
	noConnRetry bool
}

// StatusError is an HTTP answer from Solr with a status other than 2xx.
// It is wrapped in a retryable error for 5xx and 429, a fatal one for 401,
// 403, 404 and 405 (the core or the credentials are wrong), and a
// permanent one for other statuses (400: the request's content is bad).
type StatusError struct {
	Method string
	// URL is the handler's URL, without query and with any password
	// redacted.
	URL        string
	StatusCode int
	// Msg is Solr's error message ("error":{"msg":…}), when the answer had
	// one.
	Msg string
	// RetryAfter is the delay asked for with Retry-After (0 when absent).
	RetryAfter time.Duration
}

// Error names the request, the status and Solr's message.
func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s %s: HTTP %d %s", e.Method, e.URL, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// classifyStatus wraps a StatusError in its class.
func classifyStatus(e *StatusError) error {
	switch c := e.StatusCode; {
	case c == http.StatusUnauthorized, c == http.StatusForbidden, c == http.StatusNotFound, c == http.StatusMethodNotAllowed:
		return errclass.NewFatal(e)
	case c == http.StatusTooManyRequests, c >= 500:
		return errclass.NewRetryable(e)
	case c >= 400:
		return errclass.NewPermanent(e)
	}
	return errclass.NewFatal(e)
}

// retryStatus reports whether a status is worth another attempt.
func retryStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// do sends req, and again after temporary failures (connection errors and
// the statuses of retryStatus), up to Options.Retries times with
// exponential backoff. It returns the answer's body.
func (s *Solr) do(ctx context.Context, req request) ([]byte, error) {
	var data []byte
	err := retry.Do(ctx, retry.Policy{
		Retries:   s.opts.Retries,
		Initial:   s.opts.BackoffInitial,
		Max:       s.opts.BackoffMax,
		Retryable: func(err error) bool { return shouldRetry(err, req) },
		Floor: func(err error) time.Duration {
			var se *StatusError
			if errors.As(err, &se) {
				return min(se.RetryAfter, s.opts.BackoffMax)
			}
			return 0
		},
		Notify: func(r retry.Retry) {
			s.log.Warn("retrying a request", "handler", req.handler, "attempt", r.Attempt-1, "wait", r.Wait, "err", r.Err)
		},
	}, func() (err error) {
		data, err = s.roundTrip(ctx, req)
		return err
	})
	if err != nil && err == ctx.Err() {
		// A wait was cut short.
		return nil, errclass.Retryablef("solr %s: %s: %w", s.name, req.handler, err)
	}
	return data, err
}

func shouldRetry(err error, req request) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return retryStatus(se.StatusCode)
	}
	return !req.noConnRetry && errclass.IsRetryable(err)
}

// roundTrip sends req once. Errors are classified: a connection error or
// an ended ctx is retryable, an answer that is not Solr's JSON fatal.
func (s *Solr) roundTrip(ctx context.Context, req request) ([]byte, error) {
	u := s.base.JoinPath(req.handler)
	u.RawQuery = req.query.Encode()
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u.String(), body)
	if err != nil {
		return nil, errclass.Fatalf("solr %s: %s: %w", s.name, req.handler, err)
	}
	for k, v := range s.opts.Header {
		hr.Header[k] = slices.Clone(v)
	}
	if req.contentType != "" {
		hr.Header.Set("Content-Type", req.contentType)
	}
	hr.Header.Set("Accept", "application/json")
	if hr.Header.Get("User-Agent") == "" {
		hr.Header.Set("User-Agent", "rsharvest")
	}

	start := time.Now()
	resp, err := s.client.Do(hr)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, errclass.Retryablef("solr %s: %s: %w", s.name, req.handler, cerr)
		}
		return nil, errclass.Retryablef("solr %s: %s: %w", s.name, req.handler, err)
	}
	defer resp.Body.Close()
	limit := req.limit
	if limit <= 0 {
		limit = defaultResponseLimit
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	s.log.Debug("request", "method", req.method, "handler", req.handler, "status", resp.StatusCode,
		"operations", req.ops, "bytes", len(req.body), "elapsed", time.Since(start))
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, errclass.Retryablef("solr %s: %s: %w", s.name, req.handler, cerr)
		}
		return nil, errclass.Retryablef("solr %s: %s: reading the answer: %w", s.name, req.handler, err)
	}
	tooLarge := int64(len(data)) > limit
	if resp.StatusCode/100 != 2 {
		return nil, classifyStatus(s.statusError(req, resp, data))
	}
	if tooLarge {
		return nil, errclass.Permanentf("solr %s: %s: the answer is larger than %d bytes", s.name, req.handler, limit)
	}
	var hdr struct {
		ResponseHeader *struct {
			Status int `json:"status"`
		} `json:"responseHeader"`
	}
	if err := json.Unmarshal(data, &hdr); err != nil || hdr.ResponseHeader == nil {
		return nil, errclass.Fatalf("solr %s: %s: the answer is not Solr's JSON (is the URL a Solr core?): %s", s.name, req.handler, snippet(data))
	}
	if st := hdr.ResponseHeader.Status; st != 0 {
		return nil, errclass.Retryablef("solr %s: %s: responseHeader.status %d", s.name, req.handler, st)
	}
	return data, nil
}

// statusError builds the StatusError of a non-2xx answer.
func (s *Solr) statusError(req request, resp *http.Response, data []byte) *StatusError {
	e := &StatusError{Method: req.method, URL: s.name + "/" + req.handler, StatusCode: resp.StatusCode}
	var body struct {
		Error struct {
			Msg string `json:"msg"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error.Msg != "" {
		e.Msg = snippet([]byte(body.Error.Msg))
	}
	if v := resp.Header.Get("Retry-After"); v != "" {
		if secs, err := strconv.Atoi(v); err == nil && secs > 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		} else if t, err := http.ParseTime(v); err == nil {
			e.RetryAfter = max(0, time.Until(t))
		}
	}
	return e
}

// snippet cuts an answer for a message.
func snippet(b []byte) string {
	const shown = 300
	if len(b) > shown {
		return strconv.Quote(string(b[:shown])) + "…"
	}
	return strconv.Quote(string(b))
}

// ping checks that the core answers, at New.
func (s *Solr) ping(ctx context.Context) error {
	data, err := s.do(ctx, request{
		method: http.MethodGet, handler: "admin/ping",
		query: url.Values{"wt": {"json"}}, noConnRetry: true,
	})
	var se *StatusError
	switch {
	case errors.As(err, &se) && se.StatusCode == http.StatusNotFound:
		return errclass.Fatalf("solr sink %s: no such core: %w", s.name, err)
	case err != nil:
		return errclass.Fatalf("solr sink %s: ping: %w", s.name, err)
	}
	var answer struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(data, &answer); err != nil || answer.Status != "OK" {
		return errclass.Fatalf("solr sink %s: ping: status %q, want \"OK\"", s.name, answer.Status)
	}
	return nil
}
