// Package progress is the live display of a run's progress
// (pipeline.Counts): on a terminal, a progress line redrawn in place with,
// under it, a status line naming what is being retried; elsewhere, a log
// line every 10 seconds. The display shares standard error with the log
// (Terminal), so that log records and the display never garble each other.
package progress

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/pipeline"
)

// Terminal is the standard error stream shared by the log and the live
// display (the progress line and, under it, a status line saying what is
// being retried): one writer, one lock. The display is redrawn in place at
// the bottom of the screen, each line cut to the terminal's width so that
// it never wraps; a log record first erases the display, then the display
// is drawn again below the record, in one write. So a record never lands
// in the middle of the line, and no line is left half overwritten. It is
// safe for concurrent use.
type Terminal struct {
	mu    sync.Mutex
	w     io.Writer
	width func() int // the terminal's columns; 0 when unknown (no cutting)
	lines []string   // the display, as last set
	shown int        // display lines on the screen; the cursor ends the last
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

// Write writes a log record (or any other text) on lines of its own, above
// the display.
func (t *Terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shown == 0 {
		return t.w.Write(p)
	}
	var b strings.Builder
	t.erase(&b)
	b.Write(p)
	if len(p) > 0 && p[len(p)-1] != '\n' {
		b.WriteByte('\n')
	}
	t.draw(&b)
	if _, err := io.WriteString(t.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Show replaces the display by lines.
func (t *Terminal) Show(lines ...string) { t.replace(lines, false) }

// End replaces the display by lines and leaves them on the screen as
// ordinary text: what follows is written below them.
func (t *Terminal) End(lines ...string) { t.replace(lines, true) }

// replace draws lines in place of the display; leave keeps them on the
// screen as ordinary text.
func (t *Terminal) replace(lines []string, leave bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	t.erase(&b)
	t.lines = lines
	t.draw(&b)
	if leave {
		if t.shown > 0 {
			b.WriteByte('\n')
		}
		t.lines, t.shown = nil, 0
	}
	io.WriteString(t.w, b.String())
}

// erase moves the cursor to the start of the display's first line and
// clears the screen from there down.
func (t *Terminal) erase(b *strings.Builder) {
	if t.shown == 0 {
		return
	}
	b.WriteByte('\r')
	if t.shown > 1 {
		fmt.Fprintf(b, "\x1b[%dA", t.shown-1)
	}
	b.WriteString("\x1b[J")
	t.shown = 0
}

// draw writes the display's lines, each cut to the width, leaving the
// cursor at the end of the last.
func (t *Terminal) draw(b *strings.Builder) {
	w := t.width()
	for i, l := range t.lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(fit(l, w))
	}
	t.shown = len(t.lines)
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
// display runs, a retry shows at once on its status line; otherwise it is
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

// showLive draws the live display five times a second, and at once when a
// retry is noted: the progress line (see stats.String) and, while a
// request is being retried, a status line under it (see retryLine). When
// ctx ends, the last progress line stays on the screen.
func (d *Display) showLive(ctx context.Context, c *pipeline.Counts, b *retryBoard) {
	t := d.term
	meter := rateMeter{window: 5 * time.Second}
	progress := func(now time.Time) string {
		return readStats(c, meter.add(now, doneBytes(c))).String()
	}
	redraw := func() {
		now := time.Now()
		lines := []string{progress(now)}
		if l := b.line(now, t.width()); l != "" {
			lines = append(lines, l)
		}
		t.Show(lines...)
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	redraw()
	for {
		select {
		case <-ctx.Done():
			t.End(progress(time.Now()))
			return
		case <-tick.C:
			redraw()
		case <-b.changed:
			redraw()
		}
	}
}

// logProgress logs the run's progress every so often, for a log file.
func logProgress(ctx context.Context, c *pipeline.Counts, log *slog.Logger, every time.Duration) {
	meter := rateMeter{window: every}
	meter.add(time.Now(), doneBytes(c))
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			log.Info("progress", "stats", readStats(c, meter.add(now, doneBytes(c))).String(),
				"packages_done", c.PackagesDone.Load(), "packages_failed", c.PackagesFailed.Load(), "packages_seen", c.PackagesTotal.Load(),
				"written", c.Written.Load(), "unchanged", c.Unchanged.Load(), "failed", c.Failed.Load(),
				"bytes_downloaded", c.BytesDownloaded.Load(), "bytes_written", c.BytesWritten.Load(),
				"package_bytes_done", c.PackageBytesDone.Load(), "package_bytes_total", c.PackageBytesTotal.Load())
		}
	}
}
