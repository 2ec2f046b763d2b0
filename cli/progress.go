package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/rsharvest/rsharvest/pipeline"
)

// terminal is the standard error stream shared by the progress line and the
// log: one writer, one lock, so that a log record never lands in the middle
// of the line. While the line is shown, a log record first clears it; the
// next refresh draws it again below the record.
type terminal struct {
	mu      sync.Mutex
	w       io.Writer
	showing bool // a progress line is on the screen
}

// Write writes a log record (or any other text) on a line of its own.
func (t *terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.showing {
		if _, err := io.WriteString(t.w, "\r\x1b[K"); err != nil {
			return 0, err
		}
	}
	return t.w.Write(p)
}

// barWriter is the terminal as the progress bar sees it.
type barWriter struct{ t *terminal }

func (b barWriter) Write(p []byte) (int, error) {
	b.t.mu.Lock()
	defer b.t.mu.Unlock()
	b.t.showing = true
	return b.t.w.Write(p)
}

// term returns the app's shared standard error stream.
func (a *app) term() *terminal {
	if a.stderrTerm == nil {
		a.stderrTerm = &terminal{w: a.stderr}
	}
	return a.stderrTerm
}

// startProgress shows the run's progress: a progress line when stderr is a
// terminal (see showBar), otherwise a log line every 10 seconds. The
// returned function stops the display and waits for it.
func (a *app) startProgress(ctx context.Context, mode string, c *pipeline.Counts, log *slog.Logger) func() {
	if mode == "none" {
		return func() {}
	}
	bars := mode == "bars"
	if mode == "auto" {
		f, ok := a.stderr.(*os.File)
		bars = ok && term.IsTerminal(int(f.Fd()))
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	if bars {
		go func() {
			defer wg.Done()
			a.showBar(ctx, c)
		}()
	} else {
		go func() {
			defer wg.Done()
			logProgress(ctx, c, log, 10*time.Second)
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// showBar draws one progress line, refreshed five times a second: the
// package bytes received (or skipped as held) of the total the dump
// declares, with percentage, rate and time left when every package's
// length is declared (bytes and rate otherwise), and the resources
// written, unchanged and failed so far.
func (a *app) showBar(ctx context.Context, c *pipeline.Counts) {
	t := a.term()
	bar := progressbar.NewOptions64(-1,
		progressbar.OptionSetWriter(barWriter{t}),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionSetWidth(20),
		progressbar.OptionSetElapsedTime(false),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionThrottle(0),
	)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	update := func() {
		if total := c.PackageBytesTotal.Load(); c.PackagesUnsized.Load() == 0 && total > 0 && bar.GetMax64() != total {
			bar.ChangeMax64(total)
		}
		bar.Describe(countsLine(c))
		bar.Set64(c.PackageBytesDone.Load())
	}
	for {
		select {
		case <-ctx.Done():
			update()
			bar.Exit()
			t.mu.Lock()
			t.showing = false
			io.WriteString(t.w, "\n")
			t.mu.Unlock()
			return
		case <-tick.C:
			update()
		}
	}
}

// countsLine says what has become of the resources so far.
func countsLine(c *pipeline.Counts) string {
	s := fmt.Sprintf("written %d, unchanged %d, failed %d", c.Written.Load(), c.Unchanged.Load(), c.Failed.Load())
	if d := c.Deleted.Load(); d > 0 {
		s += fmt.Sprintf(", deleted %d", d)
	}
	if n := c.PackagesTotal.Load(); n > 0 {
		s += fmt.Sprintf("; packages %d/%d", c.PackagesDone.Load()+c.PackagesFailed.Load(), n)
	}
	return s
}

func logProgress(ctx context.Context, c *pipeline.Counts, log *slog.Logger, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			log.Info("progress",
				"packages_done", c.PackagesDone.Load(), "packages_failed", c.PackagesFailed.Load(), "packages_seen", c.PackagesTotal.Load(),
				"written", c.Written.Load(), "unchanged", c.Unchanged.Load(), "failed", c.Failed.Load(),
				"bytes_downloaded", c.BytesDownloaded.Load(), "bytes_written", c.BytesWritten.Load(),
				"package_bytes_done", c.PackageBytesDone.Load(), "package_bytes_total", c.PackageBytesTotal.Load())
		}
	}
}
