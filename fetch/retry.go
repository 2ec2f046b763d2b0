package fetch

import (
	"strings"
	"time"
)

// Retry describes a request that failed temporarily and is about to be
// sent again: what Options.OnRetry is told, before the wait.
type Retry struct {
	// URL is the URL requested.
	URL string
	// Attempt is the number of the attempt about to be made, counting the
	// first request: 2 for the first retry.
	Attempt int
	// Attempts is the most attempts made before giving up
	// (Options.Retries + 1).
	Attempts int
	// Wait is how long the client waits before that attempt: the backoff,
	// or the server's Retry-After when that is longer.
	Wait time.Duration
	// Err is why the last attempt failed, as classified by the client. Its
	// message names the URL; Reason does not.
	Err error
}

// Reason says why the last attempt failed without naming the URL again:
// Err's message without the "GET <URL>: " it begins with (a request the
// server redirected keeps the "(at <hop>)" that names where it failed).
func (r Retry) Reason() string {
	if r.Err == nil {
		return ""
	}
	msg := r.Err.Error()
	rest, ok := strings.CutPrefix(msg, "GET "+r.URL)
	if !ok || (rest != "" && rest[0] != ':' && rest[0] != ' ') {
		return msg
	}
	if rest = strings.TrimLeft(rest, ": "); rest == "" {
		return msg
	}
	return rest
}

// retrying reports that the request for rawURL failed for the fails-th
// time in a row with err and is sent again after wait: to Options.OnRetry
// when set (and as a debug record), otherwise as a warning in the log, so
// that a person watching sees at once what is being retried rather than a
// silent wait.
func (c *Client) retrying(rawURL string, fails int, wait time.Duration, err error) {
	r := Retry{URL: rawURL, Attempt: fails + 1, Attempts: c.retries + 1, Wait: wait, Err: err}
	if c.opts.OnRetry == nil {
		c.log.Warn("retrying request", "url", r.URL, "reason", r.Reason(),
			"attempt", r.Attempt, "of", r.Attempts, "in", r.Wait.Round(time.Millisecond))
		return
	}
	c.log.Debug("retrying request", "url", r.URL, "reason", r.Reason(),
		"attempt", r.Attempt, "of", r.Attempts, "in", r.Wait.Round(time.Millisecond))
	c.opts.OnRetry(r)
}
