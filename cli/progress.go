package cli

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/rsharvest/rsharvest/pipeline"
)

// startProgress shows the run's progress: two progress bars (packages,
// bytes) when stderr is a terminal, otherwise a log line every 10 seconds.
// The returned function stops the display and waits for it.
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
			a.showBars(ctx, c)
		}()
	} else {
		go func() {
			defer wg.Done()
			logProgress(ctx, c, log, 10*time.Second)
		}()
	}
	return func() { cancel(); wg.Wait() }
}

func (a *app) showBars(ctx context.Context, c *pipeline.Counts) {
	pkgs := progressbar.NewOptions64(-1,
		progressbar.OptionSetWriter(a.stderr),
		progressbar.OptionSetDescription("packages"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionSetRenderBlankState(true),
	)
	bytes := progressbar.NewOptions64(-1,
		progressbar.OptionSetWriter(a.stderr),
		progressbar.OptionSetDescription("payload "),
		progressbar.OptionShowBytes(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetRenderBlankState(true),
	)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	update := func() {
		if t := c.PackagesTotal.Load(); t > 0 && pkgs.GetMax64() != t {
			pkgs.ChangeMax64(t)
		}
		pkgs.Set64(c.PackagesDone.Load() + c.PackagesFailed.Load())
		bytes.Set64(c.BytesWritten.Load())
	}
	for {
		select {
		case <-ctx.Done():
			update()
			pkgs.Finish()
			bytes.Finish()
			a.stderr.Write([]byte("\n"))
			return
		case <-tick.C:
			update()
		}
	}
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
				"bytes_downloaded", c.BytesDownloaded.Load(), "bytes_written", c.BytesWritten.Load())
		}
	}
}
