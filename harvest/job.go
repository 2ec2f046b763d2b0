// Package harvest is the library that runs harvests: a Job (what to
// harvest, into which sinks, and how) becomes a run of the pipeline with
// the planner of the source's protocol, in the mode the state calls for.
// The command line, the daemon and the status page only build jobs and
// call a Harvester; nothing here knows about flags or cobra.
package harvest

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/protocols"
	"github.com/rsharvest/rsharvest/state"
)

// Mode is what a harvest does.
type Mode string

// The modes of a harvest.
const (
	// Baseline copies every resource of the source's snapshot.
	Baseline Mode = "baseline"
	// Incremental applies the source's changes over a range.
	Incremental Mode = "incremental"
	// Sync is the everyday mode: a baseline when the state has no
	// checkpoint for the source, else an incremental run from it (a
	// baseline again where the source offers no changes).
	Sync Mode = "sync"
)

// Job is one harvest's settings: what a command's flags, a config file or
// a registry site resolve to, each parsed where it is given (see Settings,
// the table that declares them). DefaultJob gives the defaults.
type Job struct {
	// Source is where to start: a ResourceSync document or site, or an
	// OAI-PMH base URL.
	Source string
	// SourceKey names the source in the state store ("": Source).
	SourceKey string
	// Sinks are the sink specs every resource goes to.
	Sinks []string
	// Site names the registry site harvested ("": none), for the log and
	// the harvest log.
	Site string
	// From and Until bound an incremental harvest (W3C datetimes, ""
	// open).
	From, Until string
	// Concurrency is how many packages (or lists) are read at once;
	// ConcurrencySet says it was given explicitly, and then also bounds
	// the GETs of a list's resources (otherwise the pipeline's default).
	Concurrency    int
	ConcurrencySet bool
	// Workers is how many entries are verified and delivered at once.
	Workers int
	// Rate is requests per second per host (0: unlimited); Retries the
	// retries of a failed request.
	Rate    float64
	Retries int
	// BwLimit caps the bytes per second received from the source, all
	// requests together (--bwlimit: "10M", "500k", "2.5MB/s"; 0: no cap).
	BwLimit fetch.Bandwidth
	// NoValidate stores documents unchecked (--validate=false): by
	// default each document that says what it must be (a harvest list's
	// documentType) is checked before it is stored, and one that is not
	// what it says is that document's permanent failure
	// (pipeline.Options.Validate). Schemas are "TYPE=FILE.xsd", the XSD
	// to validate a type against (--schema); they check even with
	// NoValidate.
	NoValidate bool
	Schemas    []string
	// DeleteUnlisted removes what a protocol whose lists name everything
	// (a harvest list) no longer lists (--delete-unlisted); otherwise it
	// is kept and reported.
	DeleteUnlisted bool
	// Spread divides a registry site's harvest, when its protocol can
	// (source.Parter: OAI-PMH by date windows and sets, a ResourceSync
	// baseline by packages and slices of its lists), into units that
	// any daemon sharing the registry executes (--spread; see
	// Harvester.Units). Elsewhere the harvest runs whole.
	Spread bool
	// DryRun reads the plan and tells Harvester.Preview what the run
	// would fetch, write and delete, changing nothing (--dry-run).
	DryRun bool
	// MaxDelete bounds the resources one run may delete (--max-delete: a
	// count, "100", or a share of those held, "5%"; unset: no bound): a
	// run that would delete more stops before deleting any.
	MaxDelete pipeline.DeleteLimit
	// Headers are extra request headers, each "Name: value".
	Headers []string
	// SpoolDir is where packages are unpacked ("": the system's).
	SpoolDir string
	// StallTimeout cuts and resumes a download receiving nothing.
	StallTimeout time.Duration
	// LowSpeedLimit and LowSpeedTime cut a response slower than
	// LowSpeedLimit bytes a second for LowSpeedTime, a temporary failure
	// (0: no cutoff).
	LowSpeedLimit int64
	LowSpeedTime  time.Duration
	// HeaderOrigins are the origins besides the source's that Headers
	// are sent to (each scheme://host[:port]).
	HeaderOrigins []string
	// RequireHash refuses resources that give no hash.
	RequireHash bool
	// Verify is which digests of those an entry lists are checked:
	// "strongest" (the default: sha-512, else sha-256, else sha-1, else
	// md5) or "all".
	Verify string
	// AllowMissingHash is accepted for compatibility; it does nothing.
	AllowMissingHash bool
	// AllowPrivateAddresses lifts the address rule (fetch.AddressPolicy).
	AllowPrivateAddresses bool
	// Sets are the resource sets harvested (none: every one).
	Sets []string
	// Protocol is the source's protocol: "auto", or a name of the
	// registry (source/protocols).
	Protocol string
	// Options are the options the protocols declare (OAI-PMH's
	// metadata-prefix, ResourceSync's prefer), by name, as given; one not
	// given has its default.
	Options map[string]string
	// RangeParts is how many parallel Range requests download a large
	// package.
	RangeParts int
	// MaxDocumentSize caps one document's bytes (-1: no cap).
	MaxDocumentSize int64
	// MaxPackageSize caps the bytes of a package whose dump gives no
	// length (-1: no cap).
	MaxPackageSize int64

	// auth is the Authorization that the credentials of the source URL
	// stand for, once prepare took them out of Source ("": none).
	auth string
}

// ParseWhen reads a time as the command line gives one: a W3C datetime,
// or a duration back from now (24h, 90m).
func ParseWhen(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d).UTC(), nil
	}
	t, err := manifest.ParseDatetime(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w (or a duration back from now, such as 24h)", err)
	}
	return t, nil
}

// DefaultMaxPackageSize is the default cap of a package whose dump gives
// no length: 64 GiB, far past any package seen published, and a bound on
// the disk a server sending without end can fill.
const DefaultMaxPackageSize = 64 << 30

// DefaultJob returns a job with every setting at its default.
func DefaultJob() Job {
	return Job{
		Concurrency:     4,
		Workers:         runtime.NumCPU(),
		Retries:         5,
		StallTimeout:    30 * time.Second,
		LowSpeedLimit:   fetch.DefaultLowSpeedLimit,
		LowSpeedTime:    fetch.DefaultLowSpeedTime,
		Verify:          "strongest",
		Protocol:        "auto",
		RangeParts:      1,
		MaxDocumentSize: fetch.DefaultMaxDocumentSize,
		MaxPackageSize:  DefaultMaxPackageSize,
	}
}

// schemas reads j.Schemas, each "TYPE=FILE.xsd" naming a readable file,
// by type.
func (j *Job) schemas() (map[string]string, error) {
	if len(j.Schemas) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, s := range j.Schemas {
		typ, file, ok := strings.Cut(s, "=")
		if !ok || typ == "" || file == "" {
			return nil, invalidf("--schema %q: want TYPE=FILE.xsd (TYPE a namespace, public identifier or MIME type)", s)
		}
		if _, err := os.Stat(file); err != nil {
			return nil, invalidf("--schema %s: %v", typ, err)
		}
		out[typ] = file
	}
	return out, nil
}

// InvalidError is the error of a job whose settings are wrong (a usage
// error: the command line's exit 2); its message names the setting as the
// command line spells it.
type InvalidError struct {
	Err error
}

func (e *InvalidError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *InvalidError) Unwrap() error { return e.Err }

func invalidf(format string, a ...any) error {
	return &InvalidError{fmt.Errorf(format, a...)}
}

// IsInvalid reports whether err is a job's invalid setting.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

// Validate checks j's settings (its protocol's name and settings are
// checked by the Harvester, against its registry); its error is an *InvalidError naming the
// setting as the command line spells it.
func (j *Job) Validate() error {
	if j.Source == "" {
		return invalidf("--source is required")
	}
	if err := checkSource(j.Source); err != nil {
		return invalidf("--source %v", err)
	}
	if len(j.Sinks) == 0 {
		return invalidf("at least one --sink is required (e.g. --sink fs:./mirror)")
	}
	for _, spec := range j.Sinks {
		for _, other := range []string{",fs:", ",s3://", ",es:", ",solr:"} {
			if strings.Contains(spec, other) {
				return invalidf("--sink %q names two sinks: give --sink once for each", sink.Redact(spec))
			}
		}
	}
	if j.Concurrency < 1 || j.Workers < 1 || j.Concurrency > maxInFlight || j.Workers > maxInFlight {
		return invalidf("--concurrency and --workers must be from 1 to %d", maxInFlight)
	}
	if j.RangeParts < 1 || j.RangeParts > maxInFlight {
		return invalidf("--range-parts must be from 1 to %d", maxInFlight)
	}
	if j.MaxDocumentSize == 0 || j.MaxDocumentSize < -1 {
		return invalidf("--max-document-size must be a number of bytes, or -1 for no cap")
	}
	if j.MaxPackageSize == 0 || j.MaxPackageSize < -1 {
		return invalidf("--max-package-size must be a number of bytes, or -1 for no cap")
	}
	if j.Rate < 0 || j.Retries < 0 {
		return invalidf("--rate and --retries must not be negative")
	}
	if j.LowSpeedLimit < 0 || j.LowSpeedTime < 0 {
		return invalidf("--low-speed-limit and --low-speed-time must not be negative")
	}
	for _, o := range j.HeaderOrigins {
		if err := config.CheckOrigin(o); err != nil {
			return invalidf("--header-origin %v", err)
		}
	}
	if _, err := j.schemas(); err != nil {
		return err
	}
	if j.Verify != "strongest" && j.Verify != "all" {
		return invalidf("--verify: want strongest or all")
	}
	if j.Protocol == "" {
		return invalidf("--protocol must not be empty")
	}
	for _, o := range protocols.All().Options() {
		if v, ok := j.Options[o.Name]; ok && o.Check != nil {
			if err := o.Check(v); err != nil {
				return invalidf("--%s %q: %v", o.Name, v, err)
			}
		}
	}
	if slices.Contains(j.Sets, "") {
		return invalidf("--set must not be empty")
	}
	if _, err := j.Range(); err != nil {
		return err
	}
	_, err := j.Header()
	return err
}

// Range parses From and Until.
func (j *Job) Range() (pipeline.Range, error) {
	var rng pipeline.Range
	var err error
	now := time.Now()
	if j.From != "" {
		if rng.From, err = ParseWhen(j.From, now); err != nil {
			return rng, invalidf("--from: %v", err)
		}
	}
	if j.Until != "" {
		if rng.Until, err = ParseWhen(j.Until, now); err != nil {
			return rng, invalidf("--until: %v", err)
		}
	}
	if !rng.From.IsZero() && !rng.Until.IsZero() && rng.From.After(rng.Until) {
		return rng, invalidf("--from %s is later than --until %s", j.From, j.Until)
	}
	return rng, nil
}

// checkSource checks that src is an absolute http(s) URL; its error names
// src without its password.
func checkSource(src string) error {
	u, err := url.Parse(src)
	if err != nil && strings.HasPrefix(strings.ToLower(src), "http") {
		// The parser's message would repeat the URL, password and all.
		return fmt.Errorf("%q: not a valid URL (a '%%', '#' or '/' in it, a password's too, must be percent-encoded)", state.SourceKey(src))
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		shown := state.SourceKey(src)
		if !strings.Contains(src, "://") {
			return fmt.Errorf("%q: want an http(s) URL, such as http://%s", shown, shown)
		}
		return fmt.Errorf("%q: want an http(s) URL", shown)
	}
	return nil
}

// Header returns Headers as a header set, as written: a value's ${NAME}
// references are resolved by headerValues, at harvest time.
func (j *Job) Header() (http.Header, error) {
	h := http.Header{}
	for _, s := range j.Headers {
		k, v, ok := strings.Cut(s, ":")
		k = strings.TrimSpace(k)
		if !ok || !config.IsHeaderName(k) || strings.ContainsAny(v, "\r\n") {
			return nil, invalidf("--header %q: want 'Name: value'", RedactHeader(s))
		}
		h.Add(k, strings.TrimSpace(v))
	}
	return h, nil
}

// headerValues returns Headers as a header set with every ${NAME}
// reference in a value resolved from the environment.
func (j *Job) headerValues() (http.Header, error) {
	h, err := j.Header()
	if err != nil {
		return nil, err
	}
	for k, vs := range h {
		for i, v := range vs {
			if vs[i], err = expandEnv("header "+k, v); err != nil {
				return nil, err
			}
			if strings.ContainsAny(vs[i], "\r\n") {
				return nil, invalidf("header %s: the value of ${…} holds a line break", k)
			}
		}
	}
	return h, nil
}

// RedactHeader hides a header's value in messages: headers carry
// credentials.
func RedactHeader(s string) string {
	k, _, ok := strings.Cut(s, ":")
	if !ok {
		return "…"
	}
	return k + ": …"
}

// prepare names the source by its identity (state.SourceKey: its URL
// normalised, without the password), as the state, the logs, the reports
// and what is published name it — every spelling of one source is one —
// and the credentials the URL held become an Authorization header sent to
// the source's origin alone. It is idempotent; every entry point of a
// harvest calls it.
func (j *Job) prepare() {
	if _, auth := source.Credentials(j.Source); auth != "" && j.auth == "" {
		j.auth = auth
	}
	j.Source = state.SourceKey(j.Source)
}

// settings are the job's settings its protocol's planner takes.
func (j *Job) settings() source.Settings {
	return source.Settings{Sets: j.Sets, Options: j.Options}
}

// Key is the name of the job's source in the state store: SourceKey, else
// the source's identity (state.SourceKey: its URL normalised, without a
// password).
// maxInFlight bounds --concurrency, --workers and --range-parts: each
// sizes buffers and goroutines, and a typo of a few more digits must be
// refused, not taken for memory.
const maxInFlight = 1024

func (j *Job) Key() string {
	if j.SourceKey != "" {
		return j.SourceKey
	}
	return state.SourceKey(j.Source)
}
