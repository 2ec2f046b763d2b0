// Package harness measures rsharvest's baseline pipeline against a
// generated Source served on loopback, next to reference points over the
// same packages from the same server in the same run: the same job written
// plainly in Python (one process per package), the naive
// curl/unzip/md5sum/sha256sum pipeline, the necessary-work limit (all
// cores only receiving, inflating, hashing and writing), the download
// alone, and other rsharvest builds (Options.Compare). It writes the
// figures as a text table, JSON and an SVG chart.
package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/source/resourcesync"
	"github.com/rsharvest/rsharvest/state"
	"github.com/rsharvest/rsharvest/unzip"
)

// RunParams are what one pipeline run needs from the harness.
type RunParams struct {
	// Source is the loopback server's URL.
	Source string
	// SinkDir is a fresh, empty directory for the fs sink.
	SinkDir string
	// StatePath is a fresh state store file.
	StatePath string
	// SpoolDir is where packages are spooled while unpacked.
	SpoolDir string
	// Concurrency is the number of packages in flight.
	Concurrency int
	// VerifyAll checks every digest an entry lists (--verify all), not
	// only its strongest (pipeline.Options.VerifyAll).
	VerifyAll bool
}

// OptionsFunc builds the pipeline's options for one run, and a function
// closing its sinks and its state store.
type OptionsFunc func(ctx context.Context, p RunParams) (pipeline.Options, func(context.Context) error, error)

// Options configures a benchmark.
type Options struct {
	// Gen describes the dump; Dir and Logger are ignored (the dump lives
	// in the cache, see CacheDir).
	Gen bench.GenOptions
	// CacheDir holds generated dumps, one directory per GenOptions (named
	// after a hash of them), reused by later runs. Required.
	CacheDir string
	// WorkDir is where mirrors, state stores and spooled packages go; each
	// run's files are removed when it ends. Required.
	WorkDir string
	// Concurrency lists the package concurrencies to run the pipeline at;
	// empty means {4}.
	Concurrency []int
	// Link throttles the server's response bodies to this many bytes per
	// second, all requests together; 0 means unlimited.
	Link float64
	// ConnLink throttles each response body on its own to this many bytes
	// per second (within Link); 0 means unlimited.
	ConnLink float64
	// Latency delays every response by this long.
	Latency time.Duration
	// Refs runs the reference points.
	Refs bool
	// Compare lists other rsharvest binaries (an older build, a build
	// without libdeflate) whose baseline command is run against the same
	// server, at the last of Concurrency, each as a row of its own.
	Compare []string
	// Resync re-syncs the unchanged dump after the last pipeline run, in
	// each way a re-sync can skip work (see the Row* names).
	Resync bool
	// VerifyAll adds the job as it is with --verify all, every digest an
	// entry lists checked: the pipeline at the last of Concurrency and,
	// with Refs, the necessary-work limit and the Python job doing the
	// same checks, each a row of its own (Row.VerifyAll) whose ratios are
	// between them. The other rows check, as rsharvest does by default,
	// each entry's strongest digest.
	VerifyAll bool
	// Stages runs the pipeline (at the last of Concurrency) and, with
	// Refs, the necessary-work limit once more each under the CPU
	// profiler, for their CPU by stage (Result.Stages).
	Stages bool
	// Pipeline builds each run's pipeline options; nil means DefaultOptions.
	Pipeline OptionsFunc
	// Logger receives progress at info level; nil discards.
	Logger *slog.Logger
}

// Row kinds.
const (
	KindRun       = "run"
	KindReference = "reference"
	KindResync    = "resync"
	// KindCompare is another build's run (Options.Compare).
	KindCompare = "compare"
)

// Row is one measured run or reference point.
type Row struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Concurrency is a run's package concurrency (0 for references).
	Concurrency int `json:"concurrency,omitempty"`
	// Resources is the size of a sweep row's dump (0 otherwise).
	Resources  int     `json:"resources,omitempty"`
	Seconds    float64 `json:"seconds"`
	MBps       float64 `json:"mb_per_s"`
	ResPerSec  float64 `json:"resources_per_s"`
	CPUSeconds float64 `json:"cpu_seconds"`
	// PeakRSSMB is the peak resident set size: for in-process rows the
	// maximum over the whole process so far (getrusage RUSAGE_SELF), for
	// external commands the largest of their processes.
	PeakRSSMB    float64 `json:"peak_rss_mb"`
	DownloadedMB float64 `json:"downloaded_mb"`
	// CPUPerGB is CPUSeconds per GB (1e9 bytes) of payload (0 for
	// re-sync rows, which process almost none).
	CPUPerGB float64 `json:"cpu_s_per_gb,omitempty"`
	// Ratio is MBps over the necessary-work limit's (0 when not
	// measured).
	Ratio float64 `json:"ratio_to_limit"`
	// VsPython and VsNaive are, for a run, the Python job's and the naive
	// pipeline's time over the run's: how many times faster it is (0 when
	// not measured).
	VsPython float64 `json:"times_faster_than_python,omitempty"`
	VsNaive  float64 `json:"times_faster_than_naive,omitempty"`
	// VsDownload is a run's time over the "download only" reference's: 1
	// means processing hid entirely behind the download (0 when not
	// measured).
	VsDownload float64 `json:"time_vs_download,omitempty"`
	// Speedup is, for a re-sync row, the first sync's time over the
	// re-sync's.
	Speedup float64 `json:"speedup,omitempty"`
	// VerifyAll says the row checked every digest an entry lists, not
	// only its strongest (Options.VerifyAll); its ratios are to the
	// references that did the same.
	VerifyAll bool `json:"verify_all,omitempty"`
	// Skipped tells a reference that could not run; Note says why.
	Skipped bool   `json:"skipped,omitempty"`
	Note    string `json:"note,omitempty"`
}

// Dump describes the benchmarked dump.
type Dump struct {
	Dir          string `json:"dir"`
	Cached       bool   `json:"cached"`
	Resources    int    `json:"resources"`
	Packages     int    `json:"packages"`
	PayloadBytes int64  `json:"payload_bytes"`
	PackageBytes int64  `json:"package_bytes"`
}

// Result is a whole benchmark.
type Result struct {
	Started    time.Time `json:"started"`
	Dump       Dump      `json:"dump"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	NumCPU     int       `json:"num_cpu"`
	// Inflater is this build's DEFLATE decoder (unzip.Inflater).
	Inflater string `json:"inflater"`
	// Rounds is how many times every row was measured (Repeat); each row
	// is the median.
	Rounds int `json:"rounds,omitempty"`
	// LinkBytesPerSec is the throttle (0: none).
	LinkBytesPerSec float64 `json:"link_bytes_per_s"`
	// ConnLinkBytesPerSec is the per-connection throttle (0: none).
	ConnLinkBytesPerSec float64 `json:"conn_link_bytes_per_s,omitempty"`
	Latency             string  `json:"latency"`
	WorkDir             string  `json:"work_dir"`
	Rows                []Row   `json:"rows"`
	// Stages are the CPU by stage of the profiled runs (Options.Stages).
	Stages []StageRow `json:"stages,omitempty"`
	// Notes explain how to read the figures.
	Notes []string `json:"notes"`
}

// StageRow is one profiled run's CPU by stage.
type StageRow struct {
	Name    string `json:"name"`
	Seconds Stages `json:"seconds"`
}

// Names of the reference rows.
const (
	RefLimit    = "necessary-work limit"
	RefNaive    = "naive curl+unzip+sha256sum"
	RefPython   = "python job, one process per package"
	RefDownload = "download only"
	// The references checking every digest (Options.VerifyAll).
	RefLimitAll  = RefLimit + ", every digest"
	RefPythonAll = RefPython + ", every digest"
)

// everyDigest is the suffix of the name of a row that checks every digest.
const everyDigest = " --verify all"

// Run generates (or reuses) the dump, serves it on 127.0.0.1, runs the
// pipeline at every concurrency and then the reference points.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if opts.CacheDir == "" || opts.WorkDir == "" {
		return nil, errors.New("harness: CacheDir and WorkDir are required")
	}
	if len(opts.Concurrency) == 0 {
		opts.Concurrency = []int{4}
	}
	for _, c := range opts.Concurrency {
		if c < 1 {
			return nil, fmt.Errorf("harness: concurrency %d is below 1", c)
		}
	}
	if opts.Link < 0 || opts.ConnLink < 0 || opts.Latency < 0 {
		return nil, errors.New("harness: negative link rate or latency")
	}
	if opts.Pipeline == nil {
		opts.Pipeline = DefaultOptions
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(opts.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	dump, err := Prepare(ctx, opts.CacheDir, opts.Gen, log)
	if err != nil {
		return nil, err
	}
	res := &Result{
		Started:             time.Now().UTC(),
		Dump:                dump,
		GOMAXPROCS:          runtime.GOMAXPROCS(0),
		NumCPU:              runtime.NumCPU(),
		Inflater:            unzip.Inflater(),
		LinkBytesPerSec:     opts.Link,
		ConnLinkBytesPerSec: opts.ConnLink,
		Latency:             opts.Latency.String(),
		WorkDir:             opts.WorkDir,
		Notes: []string{
			"peak RSS of in-process rows is the maximum over the whole process so far (getrusage RUSAGE_SELF), not of that row alone",
			"CPU seconds of every row include the loopback server's (in this process); CPU s/GB is per GB of payload",
		},
	}
	srv, err := bench.Serve(ctx, dump.Dir, "127.0.0.1:0", bench.ServeOptions{
		Wrap:     chain(Wrap(opts.Link, opts.Latency), ConnWrap(opts.ConnLink)),
		CacheDir: opts.WorkDir,
	})
	if err != nil {
		return nil, fmt.Errorf("harness: serving %s: %w", dump.Dir, err)
	}
	defer srv.Close()

	for i, c := range opts.Concurrency {
		log.InfoContext(ctx, "bench: pipeline run", "concurrency", c)
		var after func(RunParams, Row) error
		if opts.Resync && i == len(opts.Concurrency)-1 {
			after = func(p RunParams, first Row) error {
				copyless, err := bench.Serve(ctx, dump.Dir, "127.0.0.1:0", bench.ServeOptions{
					Wrap:     chain(Wrap(opts.Link, opts.Latency), ConnWrap(opts.ConnLink), withoutCopies),
					CacheDir: opts.WorkDir,
				})
				if err != nil {
					return fmt.Errorf("harness: serving %s: %w", dump.Dir, err)
				}
				defer copyless.Close()
				log.InfoContext(ctx, "bench: re-syncs of the unchanged dump")
				rows, err := resyncs(ctx, opts, srv.URL, copyless.URL, p, first, dump)
				res.Rows = append(res.Rows, rows...)
				return err
			}
		}
		row, err := runPipeline(ctx, opts, srv.URL, c, false, dump, after)
		if err != nil {
			return nil, err
		}
		// The re-sync rows follow their first run.
		res.Rows = slices.Insert(res.Rows, len(res.Rows)-countKind(res.Rows, KindResync), row)
	}
	if opts.VerifyAll {
		c := opts.Concurrency[len(opts.Concurrency)-1]
		log.InfoContext(ctx, "bench: pipeline run, every digest", "concurrency", c)
		row, err := runPipeline(ctx, opts, srv.URL, c, true, dump, nil)
		if err != nil {
			return nil, err
		}
		res.Rows = append(res.Rows, row)
	}
	if opts.Refs {
		type ref struct {
			name string
			fn   func(context.Context, string, Dump) (Row, error)
		}
		limit := func(all bool) func(context.Context, string, Dump) (Row, error) {
			return func(ctx context.Context, url string, d Dump) (Row, error) {
				return necessaryWork(ctx, url, opts.WorkDir, all, d)
			}
		}
		python := func(all bool) func(context.Context, string, Dump) (Row, error) {
			return func(ctx context.Context, url string, d Dump) (Row, error) {
				return pythonJob(ctx, url, opts.WorkDir, all, d)
			}
		}
		refs := []ref{
			{RefDownload, func(ctx context.Context, url string, d Dump) (Row, error) {
				return downloadOnly(ctx, url, opts.Concurrency[len(opts.Concurrency)-1], d)
			}},
			{RefLimit, limit(false)},
			{RefNaive, func(ctx context.Context, url string, d Dump) (Row, error) { return naive(ctx, url, opts.WorkDir, d) }},
			{RefPython, python(false)},
		}
		if opts.VerifyAll {
			refs = append(refs, ref{RefLimitAll, limit(true)}, ref{RefPythonAll, python(true)})
		}
		for _, r := range refs {
			log.InfoContext(ctx, "bench: reference", "name", r.name)
			row, err := r.fn(ctx, srv.URL, dump)
			if err != nil {
				return nil, fmt.Errorf("harness: %s: %w", r.name, err)
			}
			row.Name, row.Kind, row.VerifyAll = r.name, KindReference, r.name == RefLimitAll || r.name == RefPythonAll
			res.Rows = append(res.Rows, row)
		}
	}
	for _, bin := range opts.Compare {
		c := opts.Concurrency[len(opts.Concurrency)-1]
		log.InfoContext(ctx, "bench: another build", "binary", bin, "concurrency", c)
		row, err := otherBuild(ctx, bin, srv.URL, opts.WorkDir, c, dump)
		if err != nil {
			return nil, fmt.Errorf("harness: %s: %w", bin, err)
		}
		res.Rows = append(res.Rows, row)
	}
	if opts.Stages {
		if err := res.profile(ctx, opts, srv.URL, dump); err != nil {
			return nil, err
		}
	}
	res.fillRatios()
	return res, nil
}

// profile runs the pipeline at the last concurrency, and with opts.Refs
// the necessary-work limit, once more each under the CPU profiler, and
// records their CPU by stage.
func (r *Result) profile(ctx context.Context, opts Options, url string, d Dump) error {
	c := opts.Concurrency[len(opts.Concurrency)-1]
	type run struct {
		name string
		fn   func() error
	}
	runs := []run{{fmt.Sprintf("rsharvest -c %d", c), func() error { _, err := runPipeline(ctx, opts, url, c, false, d, nil); return err }}}
	if opts.Refs {
		runs = append(runs, run{RefLimit, func() error { _, err := necessaryWork(ctx, url, opts.WorkDir, false, d); return err }})
	}
	for _, run := range runs {
		st, err := profileStages(run.fn)
		if err != nil {
			return fmt.Errorf("harness: profiled %s: %w", run.name, err)
		}
		if st != nil {
			r.Stages = append(r.Stages, StageRow{Name: run.name, Seconds: st})
		}
	}
	return nil
}

// fillRatios sets every row's CPU per GB and its ratios to the references
// measured.
func (r *Result) fillRatios() {
	ref := map[string]Row{}
	for _, row := range r.Rows {
		if row.Kind == KindReference && !row.Skipped {
			ref[row.Name] = row
		}
	}
	for i := range r.Rows {
		row := &r.Rows[i]
		if row.Skipped || row.Kind == KindResync {
			continue
		}
		if r.Dump.PayloadBytes > 0 {
			row.CPUPerGB = row.CPUSeconds / (float64(r.Dump.PayloadBytes) / 1e9)
		}
		limit, python := RefLimit, RefPython
		if row.VerifyAll {
			limit, python = RefLimitAll, RefPythonAll
		}
		if l, ok := ref[limit]; ok {
			row.Ratio = row.MBps / l.MBps
		}
		if row.Kind != KindRun && row.Kind != KindCompare {
			continue
		}
		if dl, ok := ref[RefDownload]; ok {
			row.VsDownload = row.Seconds / dl.Seconds
		}
		if p, ok := ref[python]; ok {
			row.VsPython = p.Seconds / row.Seconds
		}
		if n, ok := ref[RefNaive]; ok && !row.VerifyAll {
			row.VsNaive = n.Seconds / row.Seconds
		}
	}
}

// countKind counts the rows of a kind.
func countKind(rows []Row, kind string) int {
	n := 0
	for _, r := range rows {
		if r.Kind == kind {
			n++
		}
	}
	return n
}

// chain applies wrappers in order, the first outermost; nil ones are left
// out.
func chain(ws ...func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		for i := len(ws) - 1; i >= 0; i-- {
			if ws[i] != nil {
				h = ws[i](h)
			}
		}
		return h
	}
}

// DefaultOptions builds pipeline options as the baseline command does by
// default: one fs sink, a fresh state store and an HTTP client.
func DefaultOptions(ctx context.Context, p RunParams) (pipeline.Options, func(context.Context) error, error) {
	s, err := fs.New(p.SinkDir, fs.Options{})
	if err != nil {
		return pipeline.Options{}, nil, fmt.Errorf("harness: %w", err)
	}
	store, err := state.Open(ctx, p.StatePath)
	if err != nil {
		s.Close(ctx)
		return pipeline.Options{}, nil, fmt.Errorf("harness: %w", err)
	}
	return pipeline.Options{
			Source:      p.Source,
			Protocol:    resourcesync.Protocol(),
			Sinks:       []sink.Sink{s},
			SinkNames:   []string{"fs:" + p.SinkDir},
			Store:       store,
			Client:      fetch.New(fetch.Options{UserAgent: "rsharvest-bench"}),
			Concurrency: p.Concurrency,
			VerifyAll:   p.VerifyAll,
			Workers:     runtime.NumCPU(),
			SpoolDir:    p.SpoolDir,
		}, func(ctx context.Context) error {
			defer store.Close()
			return s.Close(ctx)
		}, nil
}

// usage is a snapshot of the process's resource usage.
type usage struct {
	cpu    time.Duration
	maxRSS int64 // bytes
}

// selfUsage returns the process's CPU time (user + system) and peak RSS.
func selfUsage() usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return usage{}
	}
	return usage{
		cpu:    time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		maxRSS: ru.Maxrss * 1024, // kilobytes on Linux
	}
}

// runPipeline runs one baseline into a fresh directory and measures it;
// after, when set, runs with that run's parameters and row before the
// directory is removed.
func runPipeline(ctx context.Context, opts Options, url string, c int, all bool, d Dump, after func(RunParams, Row) error) (Row, error) {
	dir, err := os.MkdirTemp(opts.WorkDir, fmt.Sprintf("run-c%d-", c))
	if err != nil {
		return Row{}, fmt.Errorf("harness: %w", err)
	}
	defer os.RemoveAll(dir)
	spool := filepath.Join(dir, "spool")
	if err := os.Mkdir(spool, 0o755); err != nil {
		return Row{}, fmt.Errorf("harness: %w", err)
	}
	p := RunParams{
		Source:      url,
		SinkDir:     filepath.Join(dir, "mirror"),
		StatePath:   filepath.Join(dir, "state.db"),
		SpoolDir:    spool,
		Concurrency: c,
		VerifyAll:   all,
	}
	row, err := measureRun(ctx, opts, p, d, nil, func(rep *runreport.Report) error {
		if rep.Status != runreport.StatusOK || rep.Resources.Written != int64(d.Resources) {
			return fmt.Errorf("status %s, %d of %d resources written", rep.Status, rep.Resources.Written, d.Resources)
		}
		return nil
	})
	if err != nil {
		return Row{}, fmt.Errorf("harness: run at concurrency %d: %w", c, err)
	}
	row.Name, row.Kind, row.Concurrency, row.VerifyAll = fmt.Sprintf("rsharvest -c %d", c), KindRun, c, all
	if all {
		row.Name += everyDigest
	}
	if after != nil {
		if err := after(p, row); err != nil {
			return Row{}, err
		}
	}
	return row, nil
}

// measured fills a row's figures from raw measurements.
func measured(elapsed, cpu time.Duration, rss, downloaded int64, d Dump) Row {
	s := max(elapsed.Seconds(), 1e-9)
	return Row{
		Seconds:      s,
		MBps:         float64(d.PayloadBytes) / 1e6 / s,
		ResPerSec:    float64(d.Resources) / s,
		CPUSeconds:   cpu.Seconds(),
		PeakRSSMB:    float64(rss) / 1e6,
		DownloadedMB: float64(downloaded) / 1e6,
	}
}

// Sweep runs the pipeline once, at the last of opts.Concurrency, on a dump
// of each of the given numbers of resources (opts.Gen otherwise), to show
// how the time grows with the dump: linear growth keeps resources/s flat.
// Each row is named after its dump; Dump describes the largest.
func Sweep(ctx context.Context, opts Options, resources []int) (*Result, error) {
	var all *Result
	for _, n := range resources {
		o := opts
		o.Gen.Resources = n
		o.Refs, o.Resync, o.Stages, o.VerifyAll = false, false, false, false
		if len(o.Concurrency) > 1 {
			o.Concurrency = o.Concurrency[len(o.Concurrency)-1:]
		}
		res, err := Run(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("harness: sweep at %d resources: %w", n, err)
		}
		for i := range res.Rows {
			res.Rows[i].Name = fmt.Sprintf("%s, %d resources", res.Rows[i].Name, n)
			res.Rows[i].Resources = n
		}
		if all == nil {
			all = res
			continue
		}
		all.Rows = append(all.Rows, res.Rows...)
		all.Dump = res.Dump
	}
	if all == nil {
		return nil, errors.New("harness: sweep of no dump")
	}
	all.Notes = append(all.Notes, "sweep: time is linear in the number of resources when resources/s stays flat")
	return all, nil
}

// Repeat runs the benchmark of opts rounds times, one whole round after
// the other (every row of a round measured within seconds of the others),
// and keeps of each row the round whose time is the median: on a shared,
// noisy machine a single slow or fast moment does not decide a ratio.
// Ratios are computed again from the rows kept.
func Repeat(ctx context.Context, opts Options, rounds int) (*Result, error) {
	if rounds < 1 {
		return nil, fmt.Errorf("harness: %d rounds", rounds)
	}
	var all []*Result
	for i := range rounds {
		if opts.Logger != nil {
			opts.Logger.InfoContext(ctx, "bench: round", "round", i+1, "of", rounds)
		}
		o := opts
		o.Stages = opts.Stages && i == rounds-1 // profiled once, after the measured rounds
		res, err := Run(ctx, o)
		if err != nil {
			return nil, err
		}
		if len(all) > 0 && len(res.Rows) != len(all[0].Rows) {
			return nil, fmt.Errorf("harness: round %d has %d rows, the first %d", i+1, len(res.Rows), len(all[0].Rows))
		}
		all = append(all, res)
	}
	out := all[len(all)-1]
	for k := range out.Rows {
		rows := make([]Row, 0, rounds)
		for _, res := range all {
			rows = append(rows, res.Rows[k])
		}
		slices.SortFunc(rows, func(a, b Row) int { return cmp.Compare(a.Seconds, b.Seconds) })
		row := rows[len(rows)/2]
		// The smallest peak RSS: exact for external commands in any round,
		// and for in-process rows that of the first round, before later
		// rows (the limit's buffers) raised the process's peak.
		for _, r := range rows {
			row.PeakRSSMB = min(row.PeakRSSMB, r.PeakRSSMB)
		}
		row.CPUPerGB, row.Ratio, row.VsDownload, row.VsPython, row.VsNaive = 0, 0, 0, 0, 0
		out.Rows[k] = row
	}
	out.Rounds = rounds
	if rounds > 1 {
		out.Notes = append(out.Notes, fmt.Sprintf("each row is the median (by time) of %d rounds; the ratios are between those medians", rounds))
	}
	out.fillRatios()
	return out, nil
}
