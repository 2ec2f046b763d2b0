package progress

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
)

// stats is what the display shows, read from a run's counters at one
// moment: the work (resources finished of the run's total) and the bytes.
type stats struct {
	// done is the resources finished, whatever the outcome; total the
	// run's resources (see resourceTotal), exact says it is known, not
	// estimated; 0 while nothing is planned.
	done, total int64
	exact       bool
	// received is the bytes received (packages as they arrive, or list
	// responses); verified the bytes inflated, checked and delivered.
	received, verified                  int64
	written, unchanged, failed, deleted int64
	packagesDone, packages              int64
	// eta is the time left at the recent rate of resources finished
	// (negative: unknown).
	eta time.Duration
}

// readStats reads c; rate is the recent rate of resources finished per
// second, from the caller's meter.
func readStats(c *pipeline.Counts, rate float64) stats {
	s := stats{
		done:         c.Done(),
		written:      c.Written.Load(),
		unchanged:    c.Unchanged.Load(),
		failed:       c.Failed.Load(),
		deleted:      c.Deleted.Load(),
		verified:     c.BytesWritten.Load(),
		packagesDone: c.PackagesDone.Load() + c.PackagesFailed.Load(),
		packages:     c.PackagesTotal.Load(),
		eta:          -1,
	}
	s.received = c.Received()
	s.total, s.exact = resourceTotal(c)
	if s.exact {
		s.done = min(s.done, s.total)
	}
	s.total = max(s.total, s.done)
	switch {
	case s.exact && s.done >= s.total:
		s.eta = 0
	case rate > 0 && s.total > 0:
		s.eta = time.Duration(float64(s.total-s.done) / rate * float64(time.Second))
	}
	return s
}

// resourceTotal is the run's resources: those planned, once every package
// and list is read (exact); before, when the packages' lengths are
// declared, those planned scaled by the share of the package bytes
// received (the entries of a package are planned as it arrives), else
// those planned so far.
func resourceTotal(c *pipeline.Counts) (n int64, exact bool) {
	planned := c.Planned.Load()
	if c.PlanRead.Load() {
		return planned, true
	}
	total, got := c.PackageBytesTotal.Load(), c.PackageBytesDone.Load()
	if total > 0 && got > 0 && c.PackagesUnsized.Load() == 0 && got < total {
		return max(planned, int64(float64(planned)*float64(total)/float64(got))), false
	}
	return planned, false
}

// String renders the state for a log line and the display's last line:
//
//	resources 3481 of 20000, 17%, ETA 28s; written 3481, unchanged 0, failed 0; received 651.0 MiB, verified 210.3 MiB; packages 1/4
//
// An estimated total is "~20000"; with none yet, "resources 0".
func (s stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "resources %d", s.done)
	if s.total > 0 {
		approx := "~"
		if s.exact {
			approx = ""
		}
		fmt.Fprintf(&b, " of %s%d, %d%%", approx, s.total, s.done*100/s.total)
		if s.eta >= 0 {
			fmt.Fprintf(&b, ", ETA %s", formatETA(s.eta))
		}
	}
	b.WriteString("; ")
	b.WriteString(s.counts())
	return b.String()
}

// live renders the live display's description, the time left (estimated
// while the total is: "~") and the counts:
//
//	ETA 28s; written 3481, unchanged 0, failed 0; received 651.0 MiB, verified 210.3 MiB; packages 1/4
func (s stats) live() string {
	eta := "-"
	if s.eta >= 0 {
		eta = formatETA(s.eta)
	}
	if !s.exact && eta != "-" {
		eta = "~" + eta
	}
	return "ETA " + eta + "; " + s.counts()
}

// counts renders the outcomes and bytes:
//
//	written 3481, unchanged 0, failed 0; received 651.0 MiB, verified 210.3 MiB; packages 1/4
func (s stats) counts() string {
	var b strings.Builder
	fmt.Fprintf(&b, "written %d, unchanged %d, failed %d", s.written, s.unchanged, s.failed)
	if s.deleted > 0 {
		fmt.Fprintf(&b, ", deleted %d", s.deleted)
	}
	fmt.Fprintf(&b, "; received %s, verified %s", formatBytes(s.received), formatBytes(s.verified))
	if s.packages > 0 {
		fmt.Fprintf(&b, "; packages %d/%d", s.packagesDone, s.packages)
	}
	return b.String()
}

// formatBytes renders n bytes in IEC units: "512 B", "1.50 KiB",
// "412.3 MiB" (two decimals below 10, one above).
func formatBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v < 10 {
		return fmt.Sprintf("%.2f %s", v, units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// formatETA renders a time left: "0s", "7s", "3m05s", "2h03m", "-" when
// beyond a hundred days.
func formatETA(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d > 100*24*time.Hour:
		return "-"
	}
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// rateMeter measures the recent rate of a growing count over a sliding
// window, so that the rate (and the ETA) follows the link as it is now
// rather than the run's average.
type rateMeter struct {
	window  time.Duration
	samples []sample
}

type sample struct {
	at time.Time
	n  int64
}

// add records the count n at time at and returns the rate, in units per
// second, over the last window (or as much of it as has been seen; 0
// before two samples).
func (m *rateMeter) add(at time.Time, n int64) float64 {
	if k := len(m.samples); k > 0 && n < m.samples[k-1].n {
		m.samples = m.samples[:0] // the count went back: start again
	}
	m.samples = append(m.samples, sample{at, n})
	// Keep one sample at or before the window's start, so that the rate
	// spans the whole window even when samples are sparser than it.
	for len(m.samples) > 2 && !m.samples[1].at.After(at.Add(-m.window)) {
		m.samples = m.samples[1:]
	}
	first, last := m.samples[0], m.samples[len(m.samples)-1]
	span := last.at.Sub(first.at).Seconds()
	if span <= 0 {
		return 0
	}
	return float64(last.n-first.n) / span
}

// retryGrace is how long a retry stays on the display after the attempt it
// announced was due: long enough to read, and to see the next failure
// replace it.
const retryGrace = 5 * time.Second

// retryBoard holds the requests being retried, for the display's status
// line. It is safe for concurrent use.
type retryBoard struct {
	mu      sync.Mutex
	pending map[string]pendingRetry // by URL
	// changed is signalled (without blocking) when a retry is noted, so
	// that the display shows it at once.
	changed chan struct{}
}

type pendingRetry struct {
	r         fetch.Retry
	at, until time.Time
}

func newRetryBoard() *retryBoard {
	return &retryBoard{pending: map[string]pendingRetry{}, changed: make(chan struct{}, 1)}
}

// note records r, told at time now.
func (b *retryBoard) note(r fetch.Retry, now time.Time) {
	b.mu.Lock()
	b.pending[r.URL] = pendingRetry{r: r, at: now, until: now.Add(r.Wait + retryGrace)}
	b.mu.Unlock()
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

// line returns the status line at time now: the latest retry still
// pending, and how many others are; "" when none is.
func (b *retryBoard) line(now time.Time, width int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var latest *pendingRetry
	for u, p := range b.pending {
		if now.After(p.until) {
			delete(b.pending, u)
			continue
		}
		if latest == nil || p.at.After(latest.at) || (p.at.Equal(latest.at) && p.r.URL < latest.r.URL) {
			latest = &p
		}
	}
	if latest == nil {
		return ""
	}
	return retryLine(latest.r, len(b.pending)-1, width)
}

// retryLine says what is being retried, naming the URL once:
//
//	retrying http://127.0.0.1:9/cl.xml: dial tcp 127.0.0.1:9: connect: connection refused (attempt 2 of 6, next in 1.2s)
//
// others counts further requests being retried. When the line is wider
// than width columns (width > 0), the middle of the URL gives way first.
func retryLine(r fetch.Retry, others, width int) string {
	tail := fmt.Sprintf(": %s (attempt %d of %d, next in %s)", runreport.Printable(r.Reason()), r.Attempt, r.Attempts, formatWait(r.Wait))
	if others > 0 {
		tail += fmt.Sprintf("; %d more retrying", others)
	}
	const head = "retrying "
	u := runreport.Printable(r.URL)
	if width <= 0 {
		return head + u + tail
	}
	room := width - 1 - utf8.RuneCountInString(head+tail)
	line := head + shortenURL(u, max(room, 24)) + tail
	if rs := []rune(line); len(rs) > width-1 {
		// A long reason: the row is cut, never wider than the terminal.
		line = string(rs[:max(width-2, 0)]) + "…"
	}
	return line
}

// shortenURL shortens u to at most n runes by replacing part of its path
// with "…", keeping its scheme and host and the end of its path:
// "http://127.0.0.1:9/…/capabilitylist.xml".
func shortenURL(u string, n int) string {
	r := []rune(u)
	if len(r) <= n {
		return u
	}
	front := 0
	if i := strings.Index(u, "://"); i >= 0 {
		if j := strings.IndexByte(u[i+3:], '/'); j >= 0 {
			front = utf8.RuneCountInString(u[:i+3+j+1])
		}
	}
	if front == 0 || n-front-1 < 8 {
		return shortenMiddle(u, n)
	}
	return string(r[:front]) + "…" + string(r[len(r)-(n-front-1):])
}

// formatWait renders a wait to a tenth of a second ("600ms", "1.2s"), or
// to the second from a minute on.
func formatWait(d time.Duration) string {
	if d >= time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// shortenMiddle shortens s to at most n runes by replacing its middle with
// "…", keeping its beginning (a URL's scheme and host) and its end.
func shortenMiddle(s string, n int) string {
	r := []rune(s)
	if len(r) <= n || n < 3 {
		return s
	}
	keep := n - 1
	front := keep / 2
	return string(r[:front]) + "…" + string(r[len(r)-(keep-front):])
}

// fit cuts s to fewer than width columns (width > 0), ending it with "…",
// so that a line redrawn in place never wraps. It counts runes: the
// display's text is ASCII but for URLs and "…".
func fit(s string, width int) string {
	if width <= 0 || utf8.RuneCountInString(s) < width {
		return s
	}
	r := []rune(s)
	if width < 2 {
		return ""
	}
	return string(r[:width-2]) + "…"
}
