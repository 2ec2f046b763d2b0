package bench

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// FaultKind names one kind of fault a FaultInjector injects.
type FaultKind string

// The kinds of fault. Each is one item of the hostile-input checklist's
// HTTP part (see DESIGN.md).
const (
	// FaultThrottle answers 429 Too Many Requests with a Retry-After
	// (delta-seconds or HTTP-date, see Faults.RetryAfterForm).
	FaultThrottle FaultKind = "throttle"
	// FaultStorm starts a storm: this request and the next
	// Faults.StormLength-1 matching requests, whatever their path, are
	// answered 500, 502 or 503 (503 with a Retry-After).
	FaultStorm FaultKind = "storm"
	// FaultReset closes the connection after N bytes of the body (see
	// Faults.ResetAfter): the client sees an unexpected EOF.
	FaultReset FaultKind = "reset"
	// FaultDrip sends the body in small writes with sleeps between them,
	// for at most Faults.DripMax, then the rest at full speed.
	FaultDrip FaultKind = "drip"
	// FaultStall stops writing the body at a seeded offset for
	// Faults.StallFor, then goes on (if the client is still there).
	FaultStall FaultKind = "stall"
	// FaultRangeIgnored answers a Range request with 200 and the whole
	// body. It applies to requests with a Range header only.
	FaultRangeIgnored FaultKind = "range-ignored"
	// FaultETagChanged changes the path's ETag from this request on (as
	// if the file had been replaced), so a resume's If-Range no longer
	// matches: the request is answered 200 with the whole body and the new
	// ETag. It applies to requests with a Range header only.
	FaultETagChanged FaultKind = "etag-changed"
	// FaultLengthShort declares a Content-Length below the body's length;
	// the body is cut to it (the response looks complete).
	FaultLengthShort FaultKind = "length-short"
	// FaultLengthLong declares a Content-Length above the body's length;
	// the connection is closed after the body.
	FaultLengthLong FaultKind = "length-long"
	// FaultLengthMissing sends no Content-Length (chunked encoding).
	FaultLengthMissing FaultKind = "length-missing"
	// FaultFlip flips one byte of a ZIP package (a "*.zip" path) at a
	// seeded offset: the package's md5 no longer matches its Resource
	// Dump's.
	FaultFlip FaultKind = "flip"
)

// FaultKinds returns every kind of fault, in a fixed order.
func FaultKinds() []FaultKind {
	return []FaultKind{FaultThrottle, FaultStorm, FaultReset, FaultDrip, FaultStall, FaultRangeIgnored,
		FaultETagChanged, FaultLengthShort, FaultLengthLong, FaultLengthMissing, FaultFlip}
}

// TransientFaultKinds returns the kinds a client that retries and resumes
// (as package fetch does) survives without losing anything: all but
// FaultFlip, FaultLengthShort and FaultLengthLong, which make the bytes
// disagree with the Resource Dump's length or md5.
func TransientFaultKinds() []FaultKind {
	return []FaultKind{FaultThrottle, FaultStorm, FaultReset, FaultDrip, FaultStall, FaultRangeIgnored,
		FaultETagChanged, FaultLengthMissing}
}

// ParseFaultKinds parses a comma-separated list of kinds. "all" stands for
// FaultKinds() and "transient" for TransientFaultKinds(); an empty string
// is "all". Duplicates are dropped.
func ParseFaultKinds(s string) ([]FaultKind, error) {
	var out []FaultKind
	add := func(ks ...FaultKind) {
		for _, k := range ks {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	if strings.TrimSpace(s) == "" {
		return FaultKinds(), nil
	}
	for f := range strings.SplitSeq(s, ",") {
		switch f = strings.TrimSpace(f); f {
		case "all":
			add(FaultKinds()...)
		case "transient":
			add(TransientFaultKinds()...)
		default:
			if !slices.Contains(FaultKinds(), FaultKind(f)) {
				return nil, fmt.Errorf("bench: unknown fault kind %q (want all, transient or some of %s)", f, joinKinds(FaultKinds()))
			}
			add(FaultKind(f))
		}
	}
	return out, nil
}

// FaultKindNames names every kind of fault, comma-separated, for help
// texts.
func FaultKindNames() string { return joinKinds(FaultKinds()) }

func joinKinds(ks []FaultKind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// FaultTargets selects which files faults apply to.
type FaultTargets uint8

// Targets of Faults.
const (
	// TargetPackages are ZIP packages ("*.zip").
	TargetPackages FaultTargets = 1 << iota
	// TargetDocuments are the ResourceSync documents ("*.xml",
	// /.well-known/resourcesync, robots.txt, "*.html"), manifest copies
	// included.
	TargetDocuments
	// TargetResources are every other file (resource bodies).
	TargetResources
	// TargetAll is every file.
	TargetAll = TargetPackages | TargetDocuments | TargetResources
)

// ParseFaultTargets parses a comma-separated list of "packages",
// "documents", "resources" or "all"; empty is "all".
func ParseFaultTargets(s string) (FaultTargets, error) {
	if strings.TrimSpace(s) == "" {
		return TargetAll, nil
	}
	var t FaultTargets
	for f := range strings.SplitSeq(s, ",") {
		switch strings.TrimSpace(f) {
		case "packages":
			t |= TargetPackages
		case "documents":
			t |= TargetDocuments
		case "resources":
			t |= TargetResources
		case "all":
			t |= TargetAll
		default:
			return 0, fmt.Errorf("bench: unknown fault target %q (want packages, documents, resources or all)", f)
		}
	}
	return t, nil
}

// targetOf returns the target class of a URL path.
func targetOf(p string) FaultTargets {
	rel := strings.TrimPrefix(p, "/")
	switch {
	case strings.HasSuffix(rel, ".zip"):
		return TargetPackages
	case docType(rel) != "":
		return TargetDocuments
	}
	return TargetResources
}

// Defaults of Faults.
const (
	DefaultFaultRetryAfter  = time.Second
	DefaultFaultStormLength = 3
	DefaultFaultDripChunk   = 1 << 10
	DefaultFaultDripDelay   = 10 * time.Millisecond
	DefaultFaultDripMax     = 2 * time.Second
	DefaultFaultStallFor    = 2 * time.Second
	// maxFaultLengthDelta bounds the seeded Content-Length error.
	maxFaultLengthDelta = 1 << 10
)

// Retry-After forms of Faults.RetryAfterForm.
const (
	RetryAfterSeconds = "seconds"
	RetryAfterDate    = "date"
	RetryAfterMixed   = "mixed"
)

// Faults configures a FaultInjector: which requests get a fault, of which
// kind, with which parameters. Every decision is a function of Seed, the
// request's URL path and how many requests for that path came before it
// (and, for storms, of the order of requests), so a run is reproducible
// whatever the interleaving of concurrent requests. The zero value of every
// field but Rate, ResumeRate and Sequence selects its documented default;
// zero rates and an empty Sequence inject nothing.
type Faults struct {
	// Seed selects the pseudo-random decisions (math/rand/v2 PCG).
	Seed uint64
	// Rate is the probability, 0 to 1, that a matching request gets a
	// fault; its kind is then drawn among the Kinds that apply to it, in
	// proportion to Weights.
	Rate float64
	// ResumeRate, when above 0, replaces Rate for requests with a Range
	// header (resumes), where FaultRangeIgnored and FaultETagChanged
	// apply.
	ResumeRate float64
	// Kinds are the kinds drawn from; empty means FaultKinds().
	Kinds []FaultKind
	// Weights are the relative weights of the kinds; a kind absent from
	// the map weighs 1.
	Weights map[FaultKind]float64
	// Sequence, when not empty, replaces the draw: the i-th matching
	// request for each path (from 0) gets Sequence[i] ("" for none) when
	// that kind applies to it, and requests past the sequence get none.
	// Rate, Kinds and Weights are then ignored.
	Sequence []FaultKind
	// Targets are the files faults apply to; 0 means TargetAll.
	Targets FaultTargets
	// Path, when set, restricts faults to URL paths it matches.
	Path *regexp.Regexp
	// MaxPerPath bounds the faults injected per URL path (storm responses
	// included); 0 means no bound.
	MaxPerPath int
	// RetryAfter is the delay announced by 429s and storm 503s; 0 means
	// DefaultFaultRetryAfter, a negative value sends no Retry-After.
	RetryAfter time.Duration
	// RetryAfterForm is RetryAfterSeconds, RetryAfterDate (an HTTP-date,
	// rounded up to the next whole second) or RetryAfterMixed (the
	// default: either, by a seeded coin).
	RetryAfterForm string
	// StormLength is the number of consecutive 5xx answers of a storm; 0
	// means DefaultFaultStormLength.
	StormLength int
	// StormCodes are the status codes of storms (each between 500 and
	// 599); empty means 500, 502 and 503.
	StormCodes []int
	// ResetAfter is the number of body bytes sent before a reset (at most
	// the body's length less one); 0 means a seeded offset within the
	// body, a negative value a reset right after the headers.
	ResetAfter int64
	// DripChunk is the size of each drip-fed write; 0 means
	// DefaultFaultDripChunk.
	DripChunk int
	// DripDelay is the sleep after each drip-fed write; 0 means
	// DefaultFaultDripDelay.
	DripDelay time.Duration
	// DripMax bounds the time one response is drip-fed; the rest goes at
	// full speed. 0 means DefaultFaultDripMax.
	DripMax time.Duration
	// StallFor is how long a stall lasts; 0 means DefaultFaultStallFor.
	StallFor time.Duration
	// LengthDelta is how far a wrong Content-Length is from the truth (a
	// short one is at least 0); 0 means a seeded 1 to 1024.
	LengthDelta int64
	// Logger receives one debug record per fault; nil discards.
	Logger *slog.Logger
}

// FaultStats counts what a FaultInjector did.
type FaultStats struct {
	// Requests counts the requests faults could apply to (GETs of
	// matching paths while enabled).
	Requests int64
	// Faulted counts the requests that got a fault.
	Faulted int64
	// Storms counts the storms started.
	Storms int64
	// ByKind counts the faults injected by kind; a storm counts each of
	// its 5xx answers.
	ByKind map[FaultKind]int64
}

// String lists the counts by kind, in the order of FaultKinds.
func (s FaultStats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d faults in %d requests", s.Faulted, s.Requests)
	sep := ": "
	for _, k := range FaultKinds() {
		if n := s.ByKind[k]; n > 0 {
			fmt.Fprintf(&b, "%s%s %d", sep, k, n)
			if k == FaultStorm {
				fmt.Fprintf(&b, " (%d storms)", s.Storms)
			}
			sep = ", "
		}
	}
	return b.String()
}

// FaultInjector is an http.Handler middleware (Wrap) that injects the
// faults Faults describe into the responses of the handler it wraps. It
// only touches GET requests of matching paths, never paths beginning with
// "/_" (administrative endpoints). Every sleep it makes is bounded and ends
// when the request's context does. It is safe for concurrent use.
type FaultInjector struct {
	f       Faults
	kinds   []FaultKind
	weights []float64
	total   float64
	log     *slog.Logger
	enabled atomic.Bool
	// trace, when set (by tests), sees every decision.
	trace func(path string, n int, k FaultKind)

	mu       sync.Mutex
	seen     map[string]int // matching requests per path
	faulted  map[string]int // faults per path
	versions map[string]int // ETag version per path (FaultETagChanged)
	storm    int            // answers left in the current storm
	stats    FaultStats
}

// NewFaultInjector checks f and returns an enabled injector.
func NewFaultInjector(f Faults) (*FaultInjector, error) {
	for _, r := range []float64{f.Rate, f.ResumeRate} {
		if r < 0 || r > 1 || math.IsNaN(r) {
			return nil, fmt.Errorf("bench: fault rate %v is not between 0 and 1", r)
		}
	}
	if len(f.Kinds) == 0 {
		f.Kinds = FaultKinds()
	}
	for _, k := range append(slices.Clone(f.Kinds), f.Sequence...) {
		if k != "" && !slices.Contains(FaultKinds(), k) {
			return nil, fmt.Errorf("bench: unknown fault kind %q", k)
		}
	}
	for k, w := range f.Weights {
		if w < 0 || math.IsNaN(w) {
			return nil, fmt.Errorf("bench: fault weight of %s is %v", k, w)
		}
	}
	if f.Targets == 0 {
		f.Targets = TargetAll
	}
	if f.MaxPerPath < 0 {
		return nil, fmt.Errorf("bench: MaxPerPath %d is negative", f.MaxPerPath)
	}
	if f.RetryAfter == 0 {
		f.RetryAfter = DefaultFaultRetryAfter
	}
	switch f.RetryAfterForm {
	case "":
		f.RetryAfterForm = RetryAfterMixed
	case RetryAfterSeconds, RetryAfterDate, RetryAfterMixed:
	default:
		return nil, fmt.Errorf("bench: Retry-After form %q (want seconds, date or mixed)", f.RetryAfterForm)
	}
	if f.StormLength == 0 {
		f.StormLength = DefaultFaultStormLength
	}
	if f.StormLength < 1 {
		return nil, fmt.Errorf("bench: storm length %d", f.StormLength)
	}
	if len(f.StormCodes) == 0 {
		f.StormCodes = []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable}
	}
	for _, c := range f.StormCodes {
		if c < 500 || c > 599 {
			return nil, fmt.Errorf("bench: storm status %d is not a 5xx", c)
		}
	}
	if f.DripChunk < 0 || f.DripDelay < 0 || f.DripMax < 0 || f.StallFor < 0 || f.LengthDelta < 0 {
		return nil, errors.New("bench: negative drip, stall or length parameter")
	}
	if f.DripChunk == 0 {
		f.DripChunk = DefaultFaultDripChunk
	}
	if f.DripDelay == 0 {
		f.DripDelay = DefaultFaultDripDelay
	}
	if f.DripMax == 0 {
		f.DripMax = DefaultFaultDripMax
	}
	if f.StallFor == 0 {
		f.StallFor = DefaultFaultStallFor
	}
	inj := &FaultInjector{
		f:        f,
		log:      f.Logger,
		seen:     make(map[string]int),
		faulted:  make(map[string]int),
		versions: make(map[string]int),
		stats:    FaultStats{ByKind: make(map[FaultKind]int64)},
	}
	if inj.log == nil {
		inj.log = slog.New(slog.DiscardHandler)
	}
	for _, k := range f.Kinds {
		w := 1.0
		if v, ok := f.Weights[k]; ok {
			w = v
		}
		if w > 0 && !slices.Contains(inj.kinds, k) {
			inj.kinds = append(inj.kinds, k)
			inj.weights = append(inj.weights, w)
			inj.total += w
		}
	}
	inj.enabled.Store(true)
	return inj, nil
}

// SetEnabled turns fault injection on or off. While off, requests pass
// untouched (except that an ETag changed by FaultETagChanged stays
// changed) and are not counted.
func (inj *FaultInjector) SetEnabled(on bool) { inj.enabled.Store(on) }

// Stats returns a snapshot of the counters.
func (inj *FaultInjector) Stats() FaultStats {
	inj.mu.Lock()
	defer inj.mu.Unlock()
	s := inj.stats
	s.ByKind = maps.Clone(inj.stats.ByKind)
	return s
}

// Wrap returns next with faults injected; use it as ServeOptions.Wrap.
func (inj *FaultInjector) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { inj.serve(next, w, r) })
}

// faultPlan is the decision about one request.
type faultPlan struct {
	kind    FaultKind
	code    int // storm status
	version int // ETag version of the path (after this request's change)
	rng     *rand.Rand
}

// matches reports whether faults may apply to r.
func (inj *FaultInjector) matches(r *http.Request) bool {
	p := r.URL.Path
	return r.Method == http.MethodGet && !strings.HasPrefix(strings.TrimLeft(p, "/"), "_") &&
		targetOf(p)&inj.f.Targets != 0 && (inj.f.Path == nil || inj.f.Path.MatchString(p))
}

// decide takes the decision for r.
func (inj *FaultInjector) decide(r *http.Request) faultPlan {
	p := r.URL.Path
	inj.mu.Lock()
	defer inj.mu.Unlock()
	plan := faultPlan{version: inj.versions[p]}
	if !inj.enabled.Load() || !inj.matches(r) {
		return plan
	}
	n := inj.seen[p]
	inj.seen[p]++
	inj.stats.Requests++
	plan.rng = rand.New(rand.NewPCG(inj.f.Seed, requestStream(p, n)))
	if inj.f.MaxPerPath > 0 && inj.faulted[p] >= inj.f.MaxPerPath {
		return plan
	}
	if inj.storm > 0 {
		inj.storm--
		plan.kind = FaultStorm
		plan.code = inj.f.StormCodes[plan.rng.IntN(len(inj.f.StormCodes))]
	} else {
		plan.kind = inj.draw(plan.rng, r, n)
	}
	switch plan.kind {
	case "":
		return plan
	case FaultStorm:
		if plan.code == 0 {
			inj.storm = inj.f.StormLength - 1
			inj.stats.Storms++
			plan.code = inj.f.StormCodes[plan.rng.IntN(len(inj.f.StormCodes))]
		}
	case FaultETagChanged:
		inj.versions[p]++
		plan.version = inj.versions[p]
	}
	inj.faulted[p]++
	if inj.trace != nil {
		inj.trace(p, n, plan.kind)
	}
	// Body faults are counted when the response has a body (apply).
	if !bodyFault(plan.kind) {
		inj.countLocked(plan.kind)
	}
	return plan
}

// requestStream is the PCG stream of the n-th request for path p.
func requestStream(p string, n int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(p))
	return h.Sum64() ^ (uint64(n)+1)*0x9e3779b97f4a7c15
}

// draw picks the kind of fault of the n-th request for its path, or "".
func (inj *FaultInjector) draw(rng *rand.Rand, r *http.Request, n int) FaultKind {
	if len(inj.f.Sequence) > 0 {
		if n < len(inj.f.Sequence) && inj.applies(inj.f.Sequence[n], r) {
			return inj.f.Sequence[n]
		}
		return ""
	}
	rate := inj.f.Rate
	if inj.f.ResumeRate > 0 && r.Header.Get("Range") != "" {
		rate = inj.f.ResumeRate
	}
	if rng.Float64() >= rate {
		return ""
	}
	total := 0.0
	for i, k := range inj.kinds {
		if inj.applies(k, r) {
			total += inj.weights[i]
		}
	}
	if total <= 0 {
		return ""
	}
	x := rng.Float64() * total
	var last FaultKind
	for i, k := range inj.kinds {
		if !inj.applies(k, r) {
			continue
		}
		last = k
		if x < inj.weights[i] {
			return k
		}
		x -= inj.weights[i]
	}
	return last
}

// applies reports whether a fault of kind k can be injected into r.
func (inj *FaultInjector) applies(k FaultKind, r *http.Request) bool {
	switch k {
	case FaultFlip:
		return strings.HasSuffix(r.URL.Path, ".zip")
	case FaultRangeIgnored, FaultETagChanged:
		return r.Header.Get("Range") != ""
	}
	return true
}

// bodyFault reports whether k acts on a response body (and is counted only
// when there is one).
func bodyFault(k FaultKind) bool {
	switch k {
	case FaultReset, FaultDrip, FaultStall, FaultLengthShort, FaultLengthLong, FaultLengthMissing, FaultFlip:
		return true
	}
	return false
}

func (inj *FaultInjector) countLocked(k FaultKind) {
	inj.stats.Faulted++
	inj.stats.ByKind[k]++
}

func (inj *FaultInjector) count(k FaultKind) {
	inj.mu.Lock()
	defer inj.mu.Unlock()
	inj.countLocked(k)
}

// serve answers r through next with the planned fault.
func (inj *FaultInjector) serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	plan := inj.decide(r)
	if plan.kind != "" {
		inj.log.DebugContext(r.Context(), "bench: injecting fault", "kind", plan.kind, "path", r.URL.Path, "range", r.Header.Get("Range"))
	}
	switch plan.kind {
	case FaultThrottle:
		inj.retryAfter(w, plan.rng)
		http.Error(w, "too many requests (injected fault)", http.StatusTooManyRequests)
		return
	case FaultStorm:
		if plan.code == http.StatusServiceUnavailable {
			inj.retryAfter(w, plan.rng)
		}
		http.Error(w, "server error (injected fault)", plan.code)
		return
	case FaultRangeIgnored:
		r = r.Clone(r.Context())
		r.Header.Del("Range")
		r.Header.Del("If-Range")
	}
	if plan.version > 0 {
		r = withETagVersion(r, plan.version)
	}
	if plan.version == 0 && !bodyFault(plan.kind) {
		next.ServeHTTP(w, r)
		return
	}
	fw := &faultWriter{ResponseWriter: w, inj: inj, ctx: r.Context(), plan: plan}
	next.ServeHTTP(fw, r)
}

// retryAfter sets the Retry-After header in the configured form.
func (inj *FaultInjector) retryAfter(w http.ResponseWriter, rng *rand.Rand) {
	d := inj.f.RetryAfter
	if d < 0 {
		return
	}
	form := inj.f.RetryAfterForm
	if form == RetryAfterMixed {
		form = RetryAfterSeconds
		if rng.IntN(2) == 1 {
			form = RetryAfterDate
		}
	}
	if form == RetryAfterDate {
		t := time.Now().Add(d)
		if tr := t.Truncate(time.Second); tr.Before(t) {
			t = tr.Add(time.Second)
		}
		w.Header().Set("Retry-After", t.UTC().Format(http.TimeFormat))
		return
	}
	secs := int64((d + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
}

// etagSuffix is what a changed ETag carries inside its quotes.
const etagSuffix = "-f"

// versionETag returns etag changed to version v (v > 0).
func versionETag(etag string, v int) string {
	if v <= 0 || len(etag) < 2 || !strings.HasSuffix(etag, `"`) {
		return etag
	}
	return etag[:len(etag)-1] + etagSuffix + strconv.Itoa(v) + `"`
}

// withETagVersion translates r's validators for the file server: an
// If-Range or If-None-Match carrying the path's current version v is
// given the file server's ETag; a stale If-Range (an earlier version, or a
// date) makes the request unconditional, whole: the representation
// changed.
func withETagVersion(r *http.Request, v int) *http.Request {
	r = r.Clone(r.Context())
	cur := etagSuffix + strconv.Itoa(v) + `"`
	if ir := r.Header.Get("If-Range"); ir != "" {
		if strings.HasSuffix(ir, cur) {
			r.Header.Set("If-Range", strings.TrimSuffix(ir, cur)+`"`)
		} else {
			r.Header.Del("If-Range")
			r.Header.Del("Range")
		}
	}
	if inm := r.Header.Get("If-None-Match"); strings.HasSuffix(inm, cur) {
		r.Header.Set("If-None-Match", strings.TrimSuffix(inm, cur)+`"`)
	}
	return r
}

// faultWriter applies a body fault and the ETag version to a response.
type faultWriter struct {
	http.ResponseWriter
	inj  *FaultInjector
	ctx  context.Context
	plan faultPlan

	wroteHeader bool
	active      bool      // the body fault applies to this response
	sent        int64     // body bytes passed on
	at          int64     // offset of the reset, stall or flip; the short length
	done        bool      // the stall or flip happened
	dripUntil   time.Time // end of the drip-feeding
}

// WriteHeader applies the header part of the fault.
func (fw *faultWriter) WriteHeader(code int) {
	if fw.wroteHeader {
		fw.ResponseWriter.WriteHeader(code)
		return
	}
	fw.wroteHeader = true
	h := fw.Header()
	if fw.plan.version > 0 {
		if et := h.Get("ETag"); et != "" {
			h.Set("ETag", versionETag(et, fw.plan.version))
		}
	}
	size, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64)
	if err != nil {
		size = -1
	}
	f, rng := fw.inj.f, fw.plan.rng
	if bodyFault(fw.plan.kind) && (code == http.StatusOK || code == http.StatusPartialContent) && size > 0 {
		fw.active = true
		fw.inj.count(fw.plan.kind)
		delta := f.LengthDelta
		if delta == 0 {
			delta = 1 + rng.Int64N(min(size, maxFaultLengthDelta))
		}
		switch fw.plan.kind {
		case FaultReset:
			switch {
			case f.ResetAfter < 0:
				fw.at = 0
			case f.ResetAfter > 0:
				fw.at = min(f.ResetAfter, size-1)
			default:
				fw.at = rng.Int64N(size)
			}
		case FaultStall, FaultFlip:
			fw.at = rng.Int64N(size)
		case FaultDrip:
			fw.dripUntil = time.Now().Add(f.DripMax)
		case FaultLengthShort:
			fw.at = size - min(delta, size)
			h.Set("Content-Length", strconv.FormatInt(fw.at, 10))
		case FaultLengthLong:
			h.Set("Content-Length", strconv.FormatInt(size+delta, 10))
		case FaultLengthMissing:
			h.Del("Content-Length")
		}
	}
	fw.ResponseWriter.WriteHeader(code)
	if fw.active && (fw.plan.kind == FaultLengthMissing || fw.plan.kind == FaultReset && fw.at == 0) {
		// Send the header now: without a length the server must chunk
		// (it would otherwise compute one for a small body); a reset
		// after 0 bytes needs the header on the wire first.
		fw.flush()
		if fw.plan.kind == FaultReset {
			panic(http.ErrAbortHandler)
		}
	}
}

// Write applies the body part of the fault.
func (fw *faultWriter) Write(p []byte) (int, error) {
	if !fw.wroteHeader {
		fw.WriteHeader(http.StatusOK)
	}
	if !fw.active {
		return fw.ResponseWriter.Write(p)
	}
	switch fw.plan.kind {
	case FaultReset:
		if fw.sent+int64(len(p)) > fw.at {
			k := fw.at - fw.sent
			fw.ResponseWriter.Write(p[:k])
			fw.flush()
			// The server closes the connection without ending the
			// response: the client sees an unexpected EOF.
			panic(http.ErrAbortHandler)
		}
	case FaultStall:
		if !fw.done && fw.sent+int64(len(p)) > fw.at {
			fw.done = true
			k := fw.at - fw.sent
			n, err := fw.pass(p[:k])
			if err != nil {
				return n, err
			}
			fw.flush()
			if err := sleepCtx(fw.ctx, fw.inj.f.StallFor); err != nil {
				return n, err
			}
			m, err := fw.pass(p[k:])
			return n + m, err
		}
	case FaultLengthShort:
		// The server refuses a write past the declared length as a
		// whole: send what fits, so the response is complete and short.
		if fw.sent+int64(len(p)) > fw.at {
			n, err := fw.pass(p[:fw.at-fw.sent])
			if err == nil {
				err = http.ErrContentLength
			}
			return n, err
		}
	case FaultFlip:
		if !fw.done && fw.sent+int64(len(p)) > fw.at {
			fw.done = true
			q := slices.Clone(p)
			q[fw.at-fw.sent] ^= 0xff
			return fw.pass(q)
		}
	case FaultDrip:
		written := 0
		for len(p) > 0 && time.Now().Before(fw.dripUntil) {
			k := min(len(p), fw.inj.f.DripChunk)
			n, err := fw.pass(p[:k])
			written += n
			if err != nil {
				return written, err
			}
			fw.flush()
			p = p[k:]
			if err := sleepCtx(fw.ctx, fw.inj.f.DripDelay); err != nil {
				return written, err
			}
		}
		n, err := fw.pass(p)
		return written + n, err
	}
	return fw.pass(p)
}

// pass writes p on and counts it.
func (fw *faultWriter) pass(p []byte) (int, error) {
	n, err := fw.ResponseWriter.Write(p)
	fw.sent += int64(n)
	return n, err
}

func (fw *faultWriter) flush() {
	http.NewResponseController(fw.ResponseWriter).Flush()
}

// Flush implements http.Flusher.
func (fw *faultWriter) Flush() { fw.flush() }

// Unwrap gives http.ResponseController the underlying writer.
func (fw *faultWriter) Unwrap() http.ResponseWriter { return fw.ResponseWriter }

// sleepCtx waits for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
