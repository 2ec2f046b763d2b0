package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
)

// Names of the re-sync rows.
const (
	RowResync       = "re-sync unchanged"
	RowResyncRange  = "re-sync unchanged, by Range"
	RowResyncCopies = "re-sync unchanged, manifest copies"
)

// resyncVariant is one way of re-syncing an unchanged dump.
type resyncVariant struct {
	name string
	// noCopies serves the dump without its manifest copies, so that a
	// re-sync must open the packages themselves.
	noCopies bool
	mod      func(*pipeline.Options)
}

var resyncVariants = []resyncVariant{
	{name: RowResync},
	{name: RowResyncRange, noCopies: true, mod: func(o *pipeline.Options) { o.DisablePackageSkip = true }},
	{name: RowResyncCopies, mod: func(o *pipeline.Options) { o.DisablePackageSkip, o.DisableRangeResync = true, true }},
}

// withoutCopies answers 404 to every package manifest copy, as a source
// that links none would.
func withoutCopies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".manifest.xml") {
			http.NotFound(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// resyncs re-syncs the unchanged dump into the mirror and state of a first
// run (p) once per variant, each measured against the first run's time.
func resyncs(ctx context.Context, opts Options, srvURL, copylessURL string, p RunParams, first Row, d Dump) ([]Row, error) {
	var rows []Row
	for _, v := range resyncVariants {
		p := p
		if v.noCopies {
			p.Source = copylessURL
		} else {
			p.Source = srvURL
		}
		mod := func(o *pipeline.Options) {
			// The copyless server serves the same source: its records are
			// the first run's.
			o.SourceKey = srvURL
			if v.mod != nil {
				v.mod(o)
			}
		}
		row, err := measureRun(ctx, opts, p, d, mod, func(rep *runreport.Report) error {
			if rep.Status != runreport.StatusOK || rep.Resources.Written != 0 || rep.Resources.Unchanged != int64(d.Resources) {
				return fmt.Errorf("status %s, %d written, %d of %d unchanged", rep.Status, rep.Resources.Written, rep.Resources.Unchanged, d.Resources)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("harness: %s: %w", v.name, err)
		}
		row.Name, row.Kind, row.Concurrency = v.name, KindResync, p.Concurrency
		row.Speedup = first.Seconds / row.Seconds
		rows = append(rows, row)
	}
	return rows, nil
}

// measureRun runs one baseline with the harness's pipeline options (mod
// applied) and measures it; check judges the report.
func measureRun(ctx context.Context, opts Options, p RunParams, d Dump, mod func(*pipeline.Options), check func(*runreport.Report) error) (Row, error) {
	po, closeSinks, err := opts.Pipeline(ctx, p)
	if err != nil {
		return Row{}, err
	}
	if mod != nil {
		mod(&po)
	}
	before := selfUsage()
	start := time.Now()
	rep, runErr := pipeline.Baseline(ctx, po)
	cerr := closeSinks(context.WithoutCancel(ctx))
	elapsed := time.Since(start)
	after := selfUsage()
	if err := errors.Join(runErr, cerr); err != nil {
		return Row{}, err
	}
	if err := check(rep); err != nil {
		return Row{}, err
	}
	return measured(elapsed, after.cpu-before.cpu, after.maxRSS, rep.Bytes.Downloaded, d), nil
}

// downloadOnly fetches every package of the dump, concurrency at a time,
// and throws the bytes away: the time the link alone needs.
func downloadOnly(ctx context.Context, url string, concurrency int, d Dump) (Row, error) {
	pkgs, err := packageFiles(d)
	if err != nil {
		return Row{}, err
	}
	client := &http.Client{}
	var total atomic.Int64
	before := selfUsage()
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for _, f := range pkgs {
		g.Go(func() error {
			n, err := getDiscard(gctx, client, url+"packages/"+filepath.Base(f))
			total.Add(n)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return Row{}, err
	}
	elapsed := time.Since(start)
	after := selfUsage()
	row := measured(elapsed, after.cpu-before.cpu, after.maxRSS, total.Load(), d)
	row.Concurrency = concurrency
	row.Note = fmt.Sprintf("GET of every package, %d at a time, bytes discarded: the time the link alone needs", concurrency)
	return row, nil
}

// getDiscard GETs url and discards the body, returning its length.
func getDiscard(ctx context.Context, client *http.Client, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.Copy(io.Discard, resp.Body)
}
