// Package progress is the live display of a run's progress
// (pipeline.Counts): on a terminal, a bar drawn by
// github.com/schollz/progressbar/v3 — the resources finished of the run's
// total and their rate, and a description with the time left at the
// recent rate, the outcomes and the bytes received and verified — with,
// under it, a detail
// row naming what is being retried; elsewhere, a log line every 10
// seconds. The display shares standard error with the log (Terminal), so
// that log records and the display never garble each other.
package progress

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/pipeline"
)

// Terminal is the standard error stream shared by the log and the live
// display: one writer, one lock. While a bar is shown, a log record first
// erases it (and its detail row), is written on lines of its own, and the
// bar is drawn again below it, so that a record never lands in the middle
// of the bar. It is safe for concurrent use.
type Terminal struct {
	mu    sync.Mutex
	w     io.Writer
	width func() int // the terminal's columns; 0 when unknown
	// bar is the live display while one is shown; detail its detail row
	// ("" for none).
	bar    *progressbar.ProgressBar
	detail string
}

// NewTerminal returns the terminal writing to w, measuring its width when
// w is a terminal.
func NewTerminal(w io.Writer) *Terminal {
	t := &Terminal{w: w, width: func() int { return 0 }}
	if f, ok := w.(*os.File); ok {
		t.width = func() int {
			cols, _, err := term.GetSize(int(f.Fd()))
			if err != nil {
				return 0
			}
			return cols
		}
	}
	return t
}

// erase is what clears the bar and its detail row: back to the start of
// the bar's line, and the screen cleared from there down.
const erase = "\r\x1b[J"

// Write writes a log record (or any other text) on lines of its own, above
// the display.
func (t *Terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bar == nil {
		return t.w.Write(p)
	}
	rec := erase + string(p)
	if len(p) > 0 && p[len(p)-1] != '\n' {
		rec += "\n"
	}
	if _, err := io.WriteString(t.w, rec); err != nil {
		return 0, err
	}
	t.redraw()
	return len(p), nil
}

// redraw draws the bar and its detail row again; t.mu is held.
func (t *Terminal) redraw() {
	_ = t.bar.RenderBlank()
	if t.detail != "" {
		_ = t.bar.AddDetail(t.detail)
	}
}

// Display shows runs' progress on a Terminal. Its zero value is not
// usable: make one with New. It is safe for concurrent use.
type Display struct {
	term *Terminal
	// isTerminal says whether the stream is a terminal (mode "auto").
	isTerminal bool
	// retries is the live display's board of requests being retried,
	// while it runs (see OnRetry).
	retries atomic.Pointer[retryBoard]
}

// New returns the display on stderr, the stream the log shares with it
// (see Writer).
func New(stderr io.Writer) *Display {
	d := &Display{term: NewTerminal(stderr)}
	if f, ok := stderr.(*os.File); ok {
		d.isTerminal = term.IsTerminal(int(f.Fd()))
	}
	return d
}

// Writer is the stream to write the log to: its records go above the
// display.
func (d *Display) Writer() io.Writer { return d.term }

// OnRetry returns the fetch client's Options.OnRetry: while the live
// display runs, a retry shows at once on its detail row; otherwise it is
// a warning in log.
func (d *Display) OnRetry(log *slog.Logger) func(fetch.Retry) {
	return func(r fetch.Retry) {
		if b := d.retries.Load(); b != nil {
			b.note(r, time.Now())
			return
		}
		log.Warn("retrying request", "url", r.URL, "reason", r.Reason(),
			"attempt", r.Attempt, "of", r.Attempts, "in", r.Wait.Round(time.Millisecond))
	}
}

// Start shows the progress of the run counting into c, in mode: "bars" a
// live display (see showLive), "log" a log line every 10 seconds, "auto"
// bars when the stream is a terminal and log lines otherwise, "none"
// nothing. The returned function stops the display and waits for it.
func (d *Display) Start(ctx context.Context, mode string, c *pipeline.Counts, log *slog.Logger) (stop func()) {
	if mode == "none" {
		return func() {}
	}
	live := mode == "bars" || (mode == "auto" && d.isTerminal)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	if live {
		b := newRetryBoard()
		d.retries.Store(b)
		go func() {
			defer wg.Done()
			d.showLive(ctx, c, b)
		}()
		return func() {
			d.retries.CompareAndSwap(b, nil) // retries from now on are logged
			cancel()
			wg.Wait()
		}
	}
	go func() {
		defer wg.Done()
		logProgress(ctx, c, log, 10*time.Second)
	}()
	return func() { cancel(); wg.Wait() }
}

// barWidth is the width of the bar itself, in columns.
const barWidth = 20

// showLive draws the live display five times a second, and at once when a
// retry is noted: the bar, and under it, while a request is being retried,
// a detail row (see retryLine). Every line is kept narrower than the
// terminal, so that it never wraps. When ctx ends, the bar gives way to a
// last line (stats.String) that stays on the screen.
func (d *Display) showLive(ctx context.Context, c *pipeline.Counts, b *retryBoard) {
	t := d.term
	bar := progressbar.NewOptions64(1,
		progressbar.OptionSetWriter(t.w),
		progressbar.OptionSetWidth(barWidth),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("resources"),
		// The time left is the description's: from the recent rate of
		// resources finished, and "-" while nothing moves.
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionSetElapsedTime(false),
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionSetMaxDetailRow(1),
		progressbar.OptionThrottle(0),
	)
	meter := rateMeter{window: 5 * time.Second}
	fixed := 0 // the columns of the bar's line but its description
	update := func() {
		now := time.Now()
		s := readStats(c, meter.add(now, c.Done()))
		width := t.width()
		desc := s.live()
		if width > 0 {
			room := width - 1 - cmp.Or(fixed, 80)
			if room < 8 {
				room = 1 // nothing
			}
			desc = fit(desc, room)
		}
		detail := b.line(now, width)
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.bar == nil {
			t.bar = bar
		}
		// The total stays above what is done: the bar ends when the run
		// does, not when its count meets a total still growing.
		bar.ChangeMax64(max(s.total, s.done+1, 1))
		_ = bar.Set64(s.done)
		bar.Describe(desc)
		fixed = utf8.RuneCountInString(bar.String()) - utf8.RuneCountInString(desc)
		if detail != t.detail {
			t.detail = detail
			_ = bar.AddDetail(detail) // "" clears the row
		}
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	update()
	for {
		select {
		case <-ctx.Done():
			t.mu.Lock()
			t.bar, t.detail = nil, ""
			_, _ = io.WriteString(t.w, erase+readStats(c, 0).String()+"\n")
			t.mu.Unlock()
			return
		case <-tick.C:
			update()
		case <-b.changed:
			update()
		}
	}
}

// logProgress logs the run's progress every so often, for a log file.
func logProgress(ctx context.Context, c *pipeline.Counts, log *slog.Logger, every time.Duration) {
	meter := rateMeter{window: 3 * every}
	meter.add(time.Now(), c.Done())
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			s := readStats(c, meter.add(now, c.Done()))
			log.Info("progress", "stats", s.String(),
				"resources_done", s.done, "resources_total", s.total, "total_exact", s.exact,
				"packages_done", c.PackagesDone.Load(), "packages_failed", c.PackagesFailed.Load(), "packages_seen", c.PackagesTotal.Load(),
				"written", c.Written.Load(), "unchanged", c.Unchanged.Load(), "failed", c.Failed.Load(),
				"bytes_received", s.received, "bytes_verified", s.verified,
				"package_bytes_done", c.PackageBytesDone.Load(), "package_bytes_total", c.PackageBytesTotal.Load())
		}
	}
}
