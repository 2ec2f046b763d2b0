package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/pipeline"
)

// terminal is the standard error stream shared by the log and the live
// display (the progress line and, under it, a status line saying what is
// being retried): one writer, one lock. The display is redrawn in place at
// the bottom of the screen, each line cut to the terminal's width so that
// it never wraps; a log record first erases the display, then the display
// is drawn again below the record, in one write. So a record never lands
// in the middle of the line, and no line is left half overwritten.
type terminal struct {
	mu    sync.Mutex
	w     io.Writer
	width func() int // the terminal's columns; 0 when unknown (no cutting)
	lines []string   // the display, as last set
	shown int        // display lines on the screen; the cursor ends the last
}

// newTerminal returns the terminal writing to w, measuring its width when
// w is a terminal.
func newTerminal(w io.Writer) *terminal {
	t := &terminal{w: w, width: func() int { return 0 }}
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
func (t *terminal) Write(p []byte) (int, error) {
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

// show replaces the display by lines.
func (t *terminal) show(lines ...string) { t.replace(lines, false) }

// end replaces the display by lines and leaves them on the screen as
// ordinary text: what follows is written below them.
func (t *terminal) end(lines ...string) { t.replace(lines, true) }

// replace draws lines in place of the display; leave keeps them on the
// screen as ordinary text.
func (t *terminal) replace(lines []string, leave bool) {
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
func (t *terminal) erase(b *strings.Builder) {
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
func (t *terminal) draw(b *strings.Builder) {
	w := t.width()
	for i, l := range t.lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(fit(l, w))
	}
	t.shown = len(t.lines)
}

// term returns the app's shared standard error stream.
func (a *app) term() *terminal {
	if a.stderrTerm == nil {
		a.stderrTerm = newTerminal(a.stderr)
	}
	return a.stderrTerm
}

// onRetry returns the fetch client's Options.OnRetry: while the live
// display runs, a retry shows at once on its status line; otherwise it is
// a warning in log.
func (a *app) onRetry(log *slog.Logger) func(fetch.Retry) {
	return func(r fetch.Retry) {
		if b := a.retries.Load(); b != nil {
			b.note(r, time.Now())
			return
		}
		log.Warn("retrying request", "url", r.URL, "reason", r.Reason(),
			"attempt", r.Attempt, "of", r.Attempts, "in", r.Wait.Round(time.Millisecond))
	}
}

// startProgress shows the run's progress: a live display when stderr is a
// terminal (see showLive), otherwise a log line every 10 seconds. The
// returned function stops the display and waits for it.
func (a *app) startProgress(ctx context.Context, mode string, c *pipeline.Counts, log *slog.Logger) func() {
	if mode == "none" {
		return func() {}
	}
	live := mode == "bars"
	if mode == "auto" {
		f, ok := a.stderr.(*os.File)
		live = ok && term.IsTerminal(int(f.Fd()))
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	if live {
		b := newRetryBoard()
		a.retries.Store(b)
		go func() {
			defer wg.Done()
			a.showLive(ctx, c, b)
		}()
		return func() {
			a.retries.CompareAndSwap(b, nil) // retries from now on are logged
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
func (a *app) showLive(ctx context.Context, c *pipeline.Counts, b *retryBoard) {
	t := a.term()
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
		t.show(lines...)
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	redraw()
	for {
		select {
		case <-ctx.Done():
			t.end(progress(time.Now()))
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
