package bench

import (
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/spf13/pflag"
)

// FaultFlags are the command-line flags of fault injection (rsharvest
// serve's --fault-…), bound by Register and turned into an injector by
// Injector.
type FaultFlags struct {
	rate, resumeRate          float64
	seed                      uint64
	kinds, targets, path      string
	form                      string
	maxPerPath, stormLength   int
	stormCodes                []int
	retryAfter                time.Duration
	resetAfter, lengthDelta   int64
	dripChunk                 int
	dripDelay, dripMax, stall time.Duration
}

// Register binds the flags to fl.
func (ff *FaultFlags) Register(fl *pflag.FlagSet) {
	fl.Float64Var(&ff.rate, "fault-rate", 0, "probability (0 to 1) that a request gets an injected fault (0: no faults)")
	fl.Float64Var(&ff.resumeRate, "fault-resume-rate", 0, "probability for requests with a Range header (resumes; 0: --fault-rate)")
	fl.Uint64Var(&ff.seed, "fault-seed", 1, "seed of the fault decisions (the same seed gives the same faults)")
	fl.StringVar(&ff.kinds, "faults", "all", "kinds of fault: all, transient, or a comma-separated list of "+FaultKindNames())
	fl.StringVar(&ff.targets, "fault-targets", "all", "files faults apply to: all, or some of packages, documents, resources")
	fl.StringVar(&ff.path, "fault-path", "", "only inject faults into URL paths matching this regular expression")
	fl.IntVar(&ff.maxPerPath, "fault-max-per-path", 0, "at most this many faults per URL path (0: no limit)")
	fl.DurationVar(&ff.retryAfter, "fault-retry-after", DefaultFaultRetryAfter, "Retry-After of 429s and storm 503s (negative: none)")
	fl.StringVar(&ff.form, "fault-retry-after-form", RetryAfterMixed, "Retry-After as seconds, date (HTTP-date) or mixed")
	fl.IntVar(&ff.stormLength, "fault-storm-length", DefaultFaultStormLength, "consecutive 5xx answers of a storm")
	fl.IntSliceVar(&ff.stormCodes, "fault-storm-codes", []int{500, 502, 503}, "status codes of storms")
	fl.Int64Var(&ff.resetAfter, "fault-reset-after", 0, "body bytes sent before a reset (0: a seeded offset; negative: right after the headers)")
	fl.IntVar(&ff.dripChunk, "fault-drip-chunk", DefaultFaultDripChunk, "bytes per drip-fed write")
	fl.DurationVar(&ff.dripDelay, "fault-drip-delay", DefaultFaultDripDelay, "sleep after each drip-fed write")
	fl.DurationVar(&ff.dripMax, "fault-drip-max", DefaultFaultDripMax, "longest a response is drip-fed")
	fl.DurationVar(&ff.stall, "fault-stall", DefaultFaultStallFor, "how long a stalled body stops (above the client's --stall-timeout to trip it)")
	fl.Int64Var(&ff.lengthDelta, "fault-length-delta", 0, "how far a wrong Content-Length is off (0: a seeded 1 to 1024)")
}

// Injector builds the fault injector the flags describe (nil when the
// rate is 0); an error names the flag that is wrong.
func (ff *FaultFlags) Injector(log *slog.Logger) (*FaultInjector, error) {
	if ff.rate == 0 {
		return nil, nil
	}
	if ff.rate < 0 {
		return nil, fmt.Errorf("--fault-rate %v: want 0 to 1", ff.rate)
	}
	if ff.rate > 1 {
		return nil, fmt.Errorf("--fault-rate %v: want 0 to 1", ff.rate)
	}
	kinds, err := ParseFaultKinds(ff.kinds)
	if err != nil {
		return nil, fmt.Errorf("--faults: %w", err)
	}
	targets, err := ParseFaultTargets(ff.targets)
	if err != nil {
		return nil, fmt.Errorf("--fault-targets: %w", err)
	}
	f := Faults{Seed: ff.seed, Rate: ff.rate, ResumeRate: ff.resumeRate, Kinds: kinds, Targets: targets, MaxPerPath: ff.maxPerPath,
		RetryAfter: ff.retryAfter, RetryAfterForm: ff.form, StormLength: ff.stormLength, StormCodes: ff.stormCodes,
		ResetAfter: ff.resetAfter, DripChunk: ff.dripChunk, DripDelay: ff.dripDelay, DripMax: ff.dripMax,
		StallFor: ff.stall, LengthDelta: ff.lengthDelta, Logger: log}
	if ff.path != "" {
		if f.Path, err = regexp.Compile(ff.path); err != nil {
			return nil, fmt.Errorf("--fault-path: %w", err)
		}
	}
	inj, err := NewFaultInjector(f)
	if err != nil {
		return nil, fmt.Errorf("fault flags: %w", err)
	}
	return inj, nil
}

// Summary says what the flags inject, for a server's banner.
func (ff *FaultFlags) Summary() string {
	return fmt.Sprintf("injecting faults into %.0f %% of the requests (seed %d)", 100*ff.rate, ff.seed)
}

// RegisterContent binds to fl the flags of what a generated dump holds,
// shared by rsharvest gen and bench: the defaults are o's values as given.
func (o *GenOptions) RegisterContent(fl *pflag.FlagSet) {
	fl.IntVar(&o.Packages, "packages", o.Packages, "number of ZIP packages (default: one per 5,000 resources)")
	fl.Int64Var(&o.Seed, "seed", o.Seed, "seed of the pseudo-random content")
	fl.IntVar(&o.MeanSize, "size", o.MeanSize, "mean resource size in bytes")
	fl.StringVar(&o.SizeDist, "size-dist", o.SizeDist, "size distribution: lognormal, fixed, uniform")
	fl.StringVar(&o.Producer, "producer", o.Producer, "write the packages as this producer does: rsharvest, python-1, python-6 (Python zipfile at zlib level 1 or 6), java (ZipOutputStream: data descriptors, manifest last); all but rsharvest need python3")
	fl.Float64Var(&o.CompressibleShare, "compressible", o.CompressibleShare, "share of compressible (text) bodies, 0..1")
	fl.Float64Var(&o.StoredShare, "stored", o.StoredShare, "share of stored (not deflated) entries, 0..1 (-1: incompressible ones stored)")
}
