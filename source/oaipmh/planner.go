package oaipmh

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/source"
)

// DefaultMetadataPrefix is the format harvested when none is named: every
// OAI-PMH repository must offer unqualified Dublin Core.
const DefaultMetadataPrefix = "oai_dc"

// DefaultMaxPages bounds the pages of one list, each date window of a
// harvest its own (Planner.MaxPages): 100,000 pages of 100 records are ten
// million records a window, and a repository that sends new resumption
// tokens forever is stopped there, the next run going on from the last page.
const DefaultMaxPages = 100_000

// DefaultMaxGetURL is the longest request URL sent with GET
// (Planner.MaxGetURL): a longer request (a long resumption token, a long
// setSpec) is POSTed, as OAI-PMH allows, since servers and proxies refuse
// long URLs (2 to 8 KB, by their limits).
const DefaultMaxGetURL = 2000

// ErrTokenLoop is wrapped by the error of a list whose server sends back a
// resumptionToken it sent before: following it would never end.
var ErrTokenLoop = errors.New("resumptionToken repeats")

// DefaultMaxPageRecords bounds the records of one page (Planner.
// MaxPageRecords): a response that never ends is refused there, its list
// failed, and what a harvest keeps of a page — the identifiers it emitted —
// is bounded by it.
const DefaultMaxPageRecords = 1_000_000

// ErrPageTooLong is wrapped by the (permanent) error of a list whose page
// holds more than Planner.MaxPageRecords records.
var ErrPageTooLong = errors.New("page too long")

// ErrPageBudget is wrapped by the temporary error of a list that reached
// its page budget (Planner.MaxPages) with the server still sending
// resumption tokens: the run ends partial, and the next goes on from the
// last page harvested.
var ErrPageBudget = errors.New("page budget spent")

// Planner is the OAI-PMH planner (a source.Planner). A task's Source is a
// repository's base URL; its Set, when not empty, is the setSpec
// harvested. Each record of ListRecords becomes a record unit carrying its
// metadata (URI: the OAI identifier; a deleted header: a delete). A
// baseline harvests every record; an incremental task those with a
// datestamp from the checkpoint's Next (or the task's From) up to the
// task's Until, sent in the granularity Identify declares. The
// checkpoint's Next is the responseDate of the harvest's first list
// response: the server's clock, never the local one.
type Planner struct {
	// Client makes the requests (rate limit, retries, Retry-After).
	Client *fetch.Client
	// MetadataPrefix is the format harvested ("": DefaultMetadataPrefix).
	MetadataPrefix string
	// MaxRecordSize caps one record's metadata (see Options).
	MaxRecordSize int
	// MaxDocumentSize caps one response's bytes once decompressed (0:
	// no cap beyond MaxRecordSize per record).
	MaxDocumentSize int64
	// MaxPages bounds the pages of one list or window, restarts after a
	// forgotten token included (0: DefaultMaxPages).
	MaxPages int
	// MaxPageRecords bounds the records of one page (0:
	// DefaultMaxPageRecords).
	MaxPageRecords int
	// MaxGetURL is the longest request URL sent with GET; a longer
	// request is POSTed (0: DefaultMaxGetURL).
	MaxGetURL int
	// Concurrency is how many lists are harvested at once: above 1, a
	// task's range is split into date windows (4 per list at once), each
	// its own chain of resumption tokens (0 or 1: one list).
	Concurrency int
	// SetSpecs, when not empty, are the sets harvested, each its own
	// resource set with its own checkpoint, in parallel with the others
	// (the task's Set is then not used).
	SetSpecs []string
	// Log takes the planner's warnings (nil: discarded).
	Log *slog.Logger
}

var _ source.Planner = (*Planner)(nil)

// ResourceSet names the resource set of a harvest: its metadata format,
// and its set when it has one, as the request's arguments name them
// ("metadataPrefix=oai_dc&set=physics"). The checkpoint is kept per
// resource set: a second format of the same repository is a harvest of
// its own.
func ResourceSet(prefix, set string) string {
	v := url.Values{"metadataPrefix": {prefix}}
	if set != "" {
		v.Set("set", set)
	}
	return v.Encode()
}

// Plan plans task (see Planner); a task with a Part plans the part Parts
// named.
func (p *Planner) Plan(ctx context.Context, task source.Task, held source.Holdings, emit func(context.Context, source.Unit) error) ([]source.Checkpoint, error) {
	pl, err := p.prepare(ctx, task, held)
	if err != nil {
		return nil, err
	}
	log, base, jobs, cps := pl.log, pl.base, pl.jobs, pl.cps
	// The records whose own failure is outstanding, asked for again first:
	// the checkpoint, or the progress marks of a task resumed, moved past
	// them.
	for _, cp := range cps {
		if err := pl.harvest(cp.ResourceSet, list{window: window{from: cp.From}}, emit).retry(ctx, pl.retries[cp.ResourceSet]); err != nil {
			return nil, err
		}
	}
	var (
		mu             sync.Mutex
		pages, outside int
		failed         []listFailure
		refused        error // what emit returned: nothing is emitted after it
	)
	emitOne := func(ctx context.Context, u source.Unit) error {
		mu.Lock()
		defer mu.Unlock()
		if refused == nil {
			refused = emit(ctx, u)
		}
		return refused
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(p.Concurrency, 1))
	for _, j := range jobs {
		g.Go(func() error {
			h := pl.harvest(j.set, j.l, emitOne)
			err := h.list(gctx, j.args)
			mu.Lock()
			defer mu.Unlock()
			pages, outside = pages+h.pages, outside+h.outside
			switch {
			case err == nil:
			case h.stop != nil:
				return h.stop
			case gctx.Err() != nil:
				return gctx.Err()
			default:
				failed = append(failed, listFailure{j.set, err, j.l.from})
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if outside > 0 {
		log.Warn("the server sent records outside the range asked for; dropped", "source", base, "records", outside)
	}
	if pages == 0 && len(jobs) > 0 && len(failed) == len(jobs) {
		return nil, &source.SourceError{URL: base, Err: failed[0].err}
	}
	for _, f := range failed {
		// What was harvested stands; the set's checkpoint is held at the
		// start of the list that failed until it is.
		if err := emit(ctx, source.Unit{Failure: &source.Failure{URI: base, ResourceSet: f.set, Stage: "document", Err: f.err, WholeSet: true, At: f.at}}); err != nil {
			return nil, err
		}
	}
	return pl.checkpoints(task), nil
}

// plan is a task planned before any list is asked for: every list of every
// set, and the records to ask for again.
type plan struct {
	*Planner
	log          *slog.Logger
	base, prefix string
	change       source.Change
	id           *Identify
	// now is the server's clock when the task began.
	now time.Time
	// cps are the task's resource sets where the task begins in each.
	cps  []source.Checkpoint
	jobs []job
	// retries are, by resource set, the records to ask for again.
	retries map[string][]source.Record
}

// job is one list of a set to harvest.
type job struct {
	set     string
	setSpec string
	args    url.Values
	l       list
}

// prepare plans task up to its lists: the whole task's, or the one list
// (or the records asked for again) of task.Part.
func (p *Planner) prepare(ctx context.Context, task source.Task, held source.Holdings) (*plan, error) {
	pl := &plan{Planner: p, log: p.Log, base: task.Source, prefix: cmp.Or(p.MetadataPrefix, DefaultMetadataPrefix), retries: map[string][]source.Record{}}
	switch task.Mode {
	case source.Incremental:
		pl.change = source.Updated // OAI-PMH does not tell created from updated
	case source.Baseline:
	default:
		return nil, errclass.Fatalf("oaipmh: no such task mode %q", task.Mode)
	}
	if pl.log == nil {
		pl.log = slog.New(slog.DiscardHandler)
	}
	part, err := decodePart(task.Part)
	if err != nil {
		return nil, err
	}
	id, err := p.Identify(ctx, pl.base)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &source.SourceError{URL: pl.base, Err: err}
	}
	pl.id, pl.now = id, id.At // the server's clock, before any record was asked for
	if pl.now.IsZero() {
		// A server without a usable responseDate: the checkpoints come
		// from this machine's clock, which may not agree with its.
		pl.now = time.Now().UTC()
		pl.log.Warn("the repository's Identify gives no usable responseDate: its checkpoints are taken from this machine's clock", "source", pl.base)
	}
	sets := p.SetSpecs
	if len(sets) == 0 {
		sets = []string{task.Set}
	}
	for _, setSpec := range sets {
		set := ResourceSet(pl.prefix, setSpec)
		cp := source.Checkpoint{ResourceSet: set}
		if task.Mode == source.Incremental {
			if cp, err = source.Resume(ctx, task, held, set); err != nil {
				return nil, err
			}
		}
		marks, err := held.Progress(ctx, set)
		if err != nil {
			return nil, err
		}
		pl.cps = append(pl.cps, cp)
		args := url.Values{"verb": {"ListRecords"}, "metadataPrefix": {pl.prefix}}
		if setSpec != "" {
			args.Set("set", setSpec)
		}
		if part != nil {
			// One list of one set, as Parts named it, resumed from its
			// mark when a worker began it before.
			if part.retries || part.setSpec != setSpec {
				continue
			}
			l := part.list
			if v, ok := marks[id.windowMark(l.window).key()]; ok {
				var m listMark
				if err := json.Unmarshal([]byte(v), &m); err == nil {
					if m.Done {
						continue
					}
					l.resume = &m
				}
			}
			pl.jobs = append(pl.jobs, job{set, setSpec, args, l})
			continue
		}
		for _, l := range p.lists(id, cp, pl.now, marks, pl.log) {
			pl.jobs = append(pl.jobs, job{set, setSpec, args, l})
		}
	}
	if part != nil && !part.retries {
		return pl, nil
	}
	for _, cp := range pl.cps {
		if pl.retries[cp.ResourceSet], err = held.Retries(ctx, cp.ResourceSet); err != nil {
			return nil, err
		}
	}
	return pl, nil // a part of the records asked for again has no lists
}

// harvest is the harvest of list l of resource set set, emitting to emit.
func (pl *plan) harvest(set string, l list, emit func(context.Context, source.Unit) error) *harvest {
	return &harvest{Planner: pl.Planner, log: pl.log, base: pl.base, set: set, change: pl.change, emit: emit, id: pl.id, l: l, prefix: pl.prefix, now: pl.now}
}

// checkpoints are where task leaves each set when every list succeeds.
func (pl *plan) checkpoints(task source.Task) []source.Checkpoint {
	cps := slices.Clone(pl.cps)
	for i := range cps {
		cp := &cps[i]
		cp.Next = cmp.Or(cp.Until, pl.now)
		if cp.Next.After(pl.now) {
			// An until to come: what the repository adds before then is
			// read by the next run.
			cp.Next = pl.now
		}
		if task.Mode == source.Baseline {
			cp.Baseline = cp.Next
		} else if cp.Until.IsZero() {
			cp.Until = cp.Next
		}
	}
	return cps
}

var _ source.Parter = (*Planner)(nil)

// Parts divides task into its lists — each date window of each set, 4 per
// list the planner's Concurrency harvests at once, and at least 16 — and,
// when records of earlier tasks are to be asked for again, a part of
// those (see source.Parter). Each part's name is its plan (it has no
// other): its set, its window and the task's edge, so that a worker
// plans it whatever its clock says.
func (p *Planner) Parts(ctx context.Context, task source.Task, held source.Holdings, add func(context.Context, string, []byte) error) ([]source.Checkpoint, error) {
	if task.Part != "" {
		return nil, errclass.Fatalf("oaipmh: part %q cannot be divided", task.Part)
	}
	q := *p
	q.Concurrency = max(p.Concurrency, 4)
	pl, err := q.prepare(ctx, task, held)
	if err != nil {
		return nil, err
	}
	n := len(pl.jobs)
	for _, j := range pl.jobs {
		if err := add(ctx, encodePart(j), nil); err != nil {
			return nil, err
		}
	}
	for _, recs := range pl.retries {
		if len(recs) > 0 {
			if err := add(ctx, url.Values{"retries": {"1"}}.Encode(), nil); err != nil {
				return nil, err
			}
			n++
			break
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("oaipmh: %w: no list to request", source.ErrIndivisible)
	}
	return pl.checkpoints(task), nil
}

// part is a part of a task as Parts named it: one list, or the records
// asked for again.
type part struct {
	setSpec string
	list    list
	retries bool
}

// encodePart names the part of job j.
func encodePart(j job) string {
	v := url.Values{"set": {j.setSpec}, "edge": {j.l.edge}}
	if !j.l.from.IsZero() {
		v.Set("from", j.l.from.Format(time.RFC3339Nano))
	}
	if !j.l.until.IsZero() {
		v.Set("until", j.l.until.Format(time.RFC3339Nano))
	}
	if j.l.resume != nil {
		m, _ := json.Marshal(j.l.resume)
		v.Set("resume", string(m))
	}
	return v.Encode()
}

// decodePart reads a part's name (nil for "", the whole task).
func decodePart(s string) (*part, error) {
	if s == "" {
		return nil, nil
	}
	v, err := url.ParseQuery(s)
	if err != nil {
		return nil, errclass.Fatalf("oaipmh: part %q: %w", s, err)
	}
	if v.Get("retries") != "" {
		return &part{retries: true}, nil
	}
	pt := &part{setSpec: v.Get("set"), list: list{edge: v.Get("edge")}}
	for _, f := range []struct {
		key string
		t   *time.Time
	}{{"from", &pt.list.from}, {"until", &pt.list.until}} {
		if x := v.Get(f.key); x != "" {
			if *f.t, err = time.Parse(time.RFC3339Nano, x); err != nil {
				return nil, errclass.Fatalf("oaipmh: part %q: %w", s, err)
			}
		}
	}
	if r := v.Get("resume"); r != "" {
		var m listMark
		if err := json.Unmarshal([]byte(r), &m); err != nil {
			return nil, errclass.Fatalf("oaipmh: part %q: %w", s, err)
		}
		pt.list.resume = &m
	}
	return pt, nil
}

// windowMark is the mark of a list of window w, as far as its window goes:
// its bounds in the repository's granularity, "" where open. A list's
// marks are kept, and found again, under its key.
func (id *Identify) windowMark(w window) *listMark {
	m := &listMark{}
	if !w.from.IsZero() {
		m.From = id.format(w.from)
	}
	if !w.until.IsZero() {
		m.Until = id.format(w.until)
	}
	return m
}

// listFailure is a list of resource set set that failed, and the start
// of its window (zero: open), where it holds the set's checkpoint.
type listFailure struct {
	set string
	err error
	at  time.Time
}

// window is a range of datestamps harvested as one list (zero: open).
type window struct{ from, until time.Time }

// list is one list to harvest: a window, and where an unfinished task
// left it (nil: from its start).
type list struct {
	window
	resume *listMark
	// edge is the datestamp (in the repository's granularity) of the
	// harvest's clock when the list began: what the list holds is all the
	// repository held before it.
	edge string
}

// listMark is what a progress mark (source.Mark) records of a list once
// its pages so far have committed: the page to ask for next, or that the
// list is done.
type listMark struct {
	// From and Until are the window as sent ("": open).
	From  string `json:"from,omitempty"`
	Until string `json:"until,omitempty"`
	// Edge is list.edge.
	Edge string `json:"edge"`
	// Token asks for the next page ("" once Done).
	Token string `json:"token,omitempty"`
	// Last is the newest datestamp harvested; Ordered says the pages'
	// datestamps never went down, so that a list restarted from Last
	// misses nothing.
	Last    string `json:"last,omitempty"`
	Ordered bool   `json:"ordered,omitempty"`
	Done    bool   `json:"done,omitempty"`
}

// key is the mark's key: the window.
func (m *listMark) key() string { return "list " + m.From + "/" + m.Until }

// lists returns the lists of a harvest of cp's range up to now (see
// windows). What marks say an unfinished task harvested in full is left
// out, and a list it left partway resumes at its next page: each mark
// covers its window up to its edge (what changes after the edge has a
// newer datestamp, so the range after the edge is harvested again).
func (p *Planner) lists(id *Identify, cp source.Checkpoint, now time.Time, marks map[string]string, log *slog.Logger) []list {
	unit := id.unit()
	edge := id.format(now)
	var covered []window
	var out []list
	for k, v := range marks {
		var m listMark
		if err := json.Unmarshal([]byte(v), &m); err != nil || k != m.key() {
			log.Warn("a progress mark not understood; ignored", "key", k, "error", err)
			continue
		}
		w := window{ParseDatestamp(m.From), ParseDatestamp(m.Until)}
		if e := ParseDatestamp(m.Edge).Truncate(unit).Add(-unit); w.until.IsZero() || e.Before(w.until) {
			w.until = e
		}
		if !w.from.IsZero() && w.until.Before(w.from) {
			continue // the mark covers nothing
		}
		covered = append(covered, w)
		if !m.Done {
			out = append(out, list{window: window{ParseDatestamp(m.From), ParseDatestamp(m.Until)}, resume: &m, edge: m.Edge})
		}
	}
	slices.SortFunc(out, func(a, b list) int { return a.from.Compare(b.from) })
	for _, w := range subtract(p.windows(id, cp.From, cp.Until, now), covered, unit) {
		out = append(out, list{window: w, edge: edge})
	}
	return out
}

// subtract returns the parts of ws that none of cut covers; bounds are
// inclusive, in steps of unit, and zero is open-ended.
func subtract(ws, cut []window, unit time.Duration) []window {
	for _, c := range cut {
		var next []window
		for _, w := range ws {
			if !source.Intersects(w.from, w.until, c.from, c.until) {
				next = append(next, w)
				continue
			}
			if !c.from.IsZero() && (w.from.IsZero() || w.from.Before(c.from)) {
				next = append(next, window{w.from, c.from.Add(-unit)})
			}
			if !c.until.IsZero() && (w.until.IsZero() || w.until.After(c.until)) {
				next = append(next, window{c.until.Add(unit), w.until})
			}
		}
		ws = next
	}
	return ws
}

// windows splits [from, until] into the windows harvested in parallel:
// one (the range as given) with Concurrency 1; otherwise 4 per
// concurrent list, adjacent in the repository's granularity, from its
// earliest datestamp (the first window open-ended below, should a record
// be older) up to until, else now.
func (p *Planner) windows(id *Identify, from, until, now time.Time) []window {
	unit := id.unit()
	lo, hi := from, cmp.Or(until, now)
	if lo.IsZero() {
		lo = ParseDatestamp(id.EarliestDatestamp)
	}
	lo, hi = lo.Truncate(unit), hi.Truncate(unit)
	n := 4 * p.Concurrency
	if p.Concurrency <= 1 || lo.IsZero() || !hi.After(lo) {
		return []window{{from, until}}
	}
	// The span in whole units (a Duration holds 292 years: an earliest
	// datestamp of 1700 would overflow it), then a step of at least one.
	units := (hi.Unix() - lo.Unix()) / int64(unit/time.Second)
	stepUnits := (units + 1 + int64(n) - 1) / int64(n)
	step := max(unit, time.Duration(stepUnits)*unit)
	var out []window
	for start := lo; !start.After(hi); start = start.Add(step) {
		end := start.Add(step - unit)
		if end.After(hi) {
			end = hi
		}
		out = append(out, window{start, end})
	}
	out[0].from = from // open-ended below when the task is
	return out
}

// unit is the repository's granularity: a day or a second.
func (id *Identify) unit() time.Duration {
	if id.Seconds() {
		return time.Second
	}
	return 24 * time.Hour
}

// format formats t as a datestamp the repository takes.
func (id *Identify) format(t time.Time) string {
	if id.Seconds() {
		return t.UTC().Format("2006-01-02T15:04:05Z")
	}
	return t.UTC().Format("2006-01-02")
}

// MayBeRepository reports whether src may be an OAI-PMH base URL, worth
// asking Identify: not a bare site, and not a path a ResourceSync
// document has (*.xml, *.xml.gz, /.well-known/…).
func MayBeRepository(src string) bool {
	u, err := url.Parse(src)
	if err != nil || u.Path == "" || u.Path == "/" {
		return false
	}
	p := strings.ToLower(u.Path)
	return !strings.HasSuffix(p, ".xml") && !strings.HasSuffix(p, ".xml.gz") && !strings.Contains(p, "/.well-known/")
}

// Identify asks the repository at base what it is; its error wraps
// ErrMalformed when the answer is not an OAI-PMH Identify response. An
// answer that is not well-formed is asked for once more and read
// leniently, as a list page is (see isolate).
func (p *Planner) Identify(ctx context.Context, base string) (*Identify, error) {
	var id *Identify
	identify := func(lenient bool) error {
		return p.requestWith(ctx, base, url.Values{"verb": {"Identify"}}, lenient, func(rd *Reader) error {
			var err error
			id, err = rd.Identify()
			return err
		})
	}
	err := identify(false)
	if err != nil && malformedPage(err) && ctx.Err() == nil {
		err = identify(true)
	}
	return id, err
}

// Formats returns the metadata formats the repository at base offers.
func (p *Planner) Formats(ctx context.Context, base string) (Formats, error) {
	var out []MetadataFormat
	err := p.request(ctx, base, url.Values{"verb": {"ListMetadataFormats"}}, func(rd *Reader) error {
		for {
			f, err := rd.NextFormat()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			out = append(out, *f)
		}
	})
	return out, err
}

// GetRecord returns the record identifier of the repository at base in
// format prefix ("": DefaultMetadataPrefix). An unknown identifier is an
// Errors holding idDoesNotExist.
func (p *Planner) GetRecord(ctx context.Context, base, identifier, prefix string) (*Record, error) {
	return p.getRecord(ctx, base, identifier, cmp.Or(prefix, DefaultMetadataPrefix), false)
}

// Sets returns the sets of the repository at base, following resumption
// tokens (at most MaxPages pages); a repository without sets answers
// noSetHierarchy, returned as Errors.
func (p *Planner) Sets(ctx context.Context, base string) (Sets, error) {
	var out []Set
	_, err := p.follow(ctx, base, url.Values{"verb": {"ListSets"}}, p.maxPages(), func(rd *Reader) error {
		for {
			s, err := rd.NextSet()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			out = append(out, *s)
		}
	}, nil, nil)
	return out, err
}

// request GETs base with args — POSTs them when the URL would be longer
// than MaxGetURL — and hands the response to read.
func (p *Planner) request(ctx context.Context, base string, args url.Values, read func(*Reader) error) error {
	return p.requestWith(ctx, base, args, false, read)
}

// requestWith is request, the response read leniently when lenient is set
// (see Options.Lenient).
func (p *Planner) requestWith(ctx context.Context, base string, args url.Values, lenient bool, read func(*Reader) error) error {
	u := base + "?" + args.Encode()
	return p.open(ctx, base, args, func(in io.Reader) error {
		rd, err := NewReader(in, Options{MaxRecordSize: p.MaxRecordSize, Lenient: lenient})
		if err == nil {
			err = read(rd)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", u, err)
		}
		return nil
	})
}

// open GETs base with args — POSTs them when the URL would be longer than
// MaxGetURL — and hands the response's decoded body to read.
func (p *Planner) open(ctx context.Context, base string, args url.Values, read func(io.Reader) error) error {
	u := base + "?" + args.Encode()
	var body *fetch.Body
	var err error
	if len(u) > cmp.Or(p.MaxGetURL, DefaultMaxGetURL) {
		body, err = p.Client.OpenForm(ctx, base, args)
	} else {
		body, err = p.Client.Open(ctx, u)
	}
	if err != nil {
		return err
	}
	defer body.Close()
	in, err := fetch.DecodeDocument(body, u, body.Header.Get("Content-Encoding"), p.MaxDocumentSize)
	if err != nil {
		return err
	}
	return read(in)
}

// follow requests a list with args, then through its resumption tokens,
// handing each response to read (which reads its items; the token is
// taken after), then, when not nil, the token that comes next to paged
// ("" after the last page). noRecordsMatch is an empty page. A page that
// is not well-formed (see malformedPage) is handed, when isolate is not
// nil, to isolate, which returns its token and what it could not
// recover. A token sent twice ends the list with a permanent error
// (ErrTokenLoop); a token still sent after budget pages, with a temporary
// one (ErrPageBudget). It returns how many pages were read.
func (p *Planner) follow(ctx context.Context, base string, args url.Values, budget int, read func(*Reader) error, paged func(ctx context.Context, next string) error,
	isolate func(ctx context.Context, args url.Values, err error) (string, error)) (int, error) {
	// The tokens seen, by their hashes: a bounded budget of 8-byte keys,
	// whatever the tokens' length.
	seed := maphash.MakeSeed()
	seen := map[uint64]bool{}
	for pages := 0; ; {
		if pages >= budget {
			return pages, errclass.Retryablef("%s: %w: %d pages of one list (--max-pages), the repository still sending resumption tokens; the next run goes on from the last page",
				base, ErrPageBudget, pages)
		}
		if err := ctx.Err(); err != nil {
			return pages, err
		}
		var token Token
		err := p.request(ctx, base, args, func(rd *Reader) error {
			if err := read(rd); err != nil {
				return err
			}
			token = rd.Token()
			return nil
		})
		if isolate != nil && malformedPage(err) && ctx.Err() == nil {
			token.Value, err = isolate(ctx, args, err)
		}
		if err != nil && !IsNoRecordsMatch(err) {
			return pages, err
		}
		pages++
		if paged != nil {
			if err := paged(ctx, token.Value); err != nil {
				return pages, err
			}
		}
		h := maphash.String(seed, token.Value)
		switch {
		case token.Value == "":
			return pages, nil
		case seen[h]:
			return pages, errclass.Permanentf("%s: %w: %q", base, ErrTokenLoop, token.Value)
		}
		seen[h] = true
		args = url.Values{"verb": {args.Get("verb")}, "resumptionToken": {token.Value}}
	}
}

// maxPageRecords is the most records a page may hold.
func (p *Planner) maxPageRecords() int { return cmp.Or(p.MaxPageRecords, DefaultMaxPageRecords) }

// maxPages is the page budget of one list.
func (p *Planner) maxPages() int { return cmp.Or(p.MaxPages, DefaultMaxPages) }

// maxRestarts bounds how often in a row one list is asked for again after
// its server forgot a resumption token (badResumptionToken) with no page
// read in between.
const maxRestarts = 10

// harvest is one list being harvested.
type harvest struct {
	*Planner
	log    *slog.Logger
	base   string
	set    string
	change source.Change
	emit   func(context.Context, source.Unit) error
	id     *Identify
	l      list
	// lo and hi bound the datestamps of the records taken (zero: no
	// bound); outside counts those dropped.
	lo, hi  time.Time
	outside int
	// mark is where the list stands, last and ordered included.
	mark listMark
	last time.Time
	// prefix is the metadata format harvested.
	prefix string
	// now is the server's clock when the plan began (see plan.now).
	now time.Time
	// stop is the emit function's error: it ends the plan.
	stop  error
	pages int
	// encoding says a response's encoding was warned of.
	encoding bool
	// taken are the identifiers the page being read emitted (by their
	// hashes), so that a page read again (see isolate) emits none twice;
	// at most Planner.MaxPageRecords.
	taken     map[uint64]bool
	takenSeed maphash.Seed
}

// list harvests a list from its first request (or the page an unfinished
// task left it at) through its resumption tokens, emitting each record,
// and a mark after each page. A server that forgot a token
// (badResumptionToken: expired, or one use only) is asked for the window
// again, from the newest datestamp harvested when its pages came in
// datestamp order, else from the window's start.
func (h *harvest) list(ctx context.Context, args url.Values) error {
	w := h.l.window
	first := h.windowArgs(args, w.from)
	h.mark = *h.id.windowMark(w)
	h.mark.Edge, h.mark.Ordered = h.l.edge, true
	if !w.from.IsZero() {
		h.lo = ParseDatestamp(first.Get("from"))
	}
	if !w.until.IsZero() {
		// Some servers ignore from and until: what they send outside
		// the window (as sent, in their granularity) is dropped. until
		// is inclusive of its whole unit: a day, or a second (a
		// datestamp may carry a fraction of one).
		h.hi = ParseDatestamp(first.Get("until")).Add(h.id.unit() - time.Nanosecond)
	}
	if r := h.l.resume; r != nil {
		h.mark.Last, h.mark.Ordered, h.last = r.Last, r.Ordered, ParseDatestamp(r.Last)
		first = url.Values{"verb": {"ListRecords"}, "resumptionToken": {r.Token}}
	}
	for restarts := 0; ; restarts++ {
		n, err := h.follow(ctx, h.base, first, h.maxPages()-h.pages, func(rd *Reader) error { return h.page(ctx, rd) }, h.paged, h.isolate)
		h.pages += n
		if n > 1 {
			// Pages read since the last restart: the budget is for
			// restarts in a row that get nowhere (the page budget bounds
			// the list).
			restarts = 0
		}
		var es Errors
		if err == nil || h.stop != nil || !errors.As(err, &es) || !es.Has("badResumptionToken") || restarts >= maxRestarts {
			return err
		}
		from := w.from
		if h.mark.Ordered && !h.last.IsZero() {
			from = h.last
		}
		h.log.Warn("the server forgot its resumption token; asking for the window again", "source", h.base, "from", h.id.format(from), "error", err)
		first = h.windowArgs(args, from)
	}
}

// windowArgs are args with the list's window, from from.
func (h *harvest) windowArgs(args url.Values, from time.Time) url.Values {
	out := maps.Clone(args)
	if !from.IsZero() {
		out.Set("from", h.id.format(from))
	}
	if u := h.l.until; !u.IsZero() {
		out.Set("until", h.id.format(u))
	}
	return out
}

// paged emits the list's mark once a page's records are emitted: the
// token of the next page, or done.
func (h *harvest) paged(ctx context.Context, next string) error {
	h.mark.Token, h.mark.Done = next, next == ""
	clear(h.taken) // the next page is another
	if !h.last.IsZero() {
		h.mark.Last = h.id.format(h.last)
	}
	v, err := json.Marshal(&h.mark)
	if err != nil {
		return err
	}
	if err := h.emit(ctx, source.Unit{Mark: &source.Mark{ResourceSet: h.set, Key: h.mark.key(), Value: string(v)}}); err != nil {
		h.stop = err
		return err
	}
	return nil
}

// page emits the records of one response.
func (h *harvest) page(ctx context.Context, rd *Reader) error {
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			if n := rd.Replaced(); n > 0 {
				h.log.Warn("characters XML forbids, or bytes not UTF-8, replaced", "source", h.base, "count", n)
			}
			if rd.Encoding != "" && !h.encoding {
				h.encoding = true
				h.log.Warn("a response not in UTF-8, or not in the encoding it declares", "source", h.base, "read", rd.Encoding)
			}
			return nil
		}
		if rec == nil {
			return err
		}
		if err := h.take(ctx, rec, err); err != nil {
			return err
		}
	}
}

// take emits one record of a page (or its failure, err): what falls
// outside the list's window is dropped, and a record this page emitted
// already (when the page is read again) is not emitted twice.
func (h *harvest) take(ctx context.Context, rec *Record, err error) error {
	if id := rec.Header.Identifier; id != "" {
		if h.took(id) {
			return nil
		}
		if h.taken == nil {
			h.taken, h.takenSeed = map[uint64]bool{}, maphash.MakeSeed()
		}
		if n := h.maxPageRecords(); len(h.taken) >= n {
			return errclass.Permanentf("%s: %w: more than %d records in one page", h.base, ErrPageTooLong, n)
		}
		h.taken[maphash.String(h.takenSeed, id)] = true
	}
	t := rec.Header.Time
	if !t.IsZero() && ((!h.lo.IsZero() && t.Before(h.lo)) || (!h.hi.IsZero() && t.After(h.hi))) {
		h.outside++
		return nil
	}
	if t.Before(h.last) {
		h.mark.Ordered = false
	} else {
		h.last = t
	}
	return h.emitRecord(ctx, rec.Header.Identifier, rec, err)
}

// took reports whether the page being read emitted record id.
func (h *harvest) took(id string) bool {
	return h.taken != nil && h.taken[maphash.String(h.takenSeed, id)]
}

// emitRecord emits record id as read (rec), or its failure (err, or a
// record that is not deleted and has no metadata).
func (h *harvest) emitRecord(ctx context.Context, id string, rec *Record, err error) error {
	u := source.Unit{}
	if err == nil && !rec.Header.Deleted && len(rec.Metadata) == 0 {
		err = errclass.Permanentf("%w: record %s has no metadata", ErrMalformed, id)
	}
	if err != nil {
		u.Failure = h.recordFailure(id, err)
	} else {
		u.Record = h.record(rec)
	}
	if err := h.emit(ctx, u); err != nil {
		h.stop = err
		return err
	}
	return nil
}

// recordFailure is the failure of record id (err): its own, asked for
// again by the next task when permanent; a temporary one holds the set at
// the list's start.
func (h *harvest) recordFailure(id string, err error) *source.Failure {
	f := &source.Failure{URI: id, ResourceSet: h.set, Stage: "document", Listed: h.base, Err: err, Resource: true, At: h.l.from}
	if id == "" {
		f.URI = h.base
	} else {
		f.Retry = &source.Record{URI: id, ResourceSet: h.set, Length: -1}
	}
	return f
}

// record is the unit a harvested record becomes.
func (h *harvest) record(rec *Record) *source.Record {
	r := &source.Record{URI: rec.Header.Identifier, ResourceSet: h.set, Listed: h.base, Change: h.change,
		ChangeTime: rec.Header.Time, Length: -1, Lastmod: rec.Header.Time, Sets: rec.Header.Sets}
	if h.id.Seconds() {
		// The datestamp is the record's version: OAI-PMH changes it with
		// every change of the record, so a record held at its datestamp
		// (and length) is held, and is not written again. A datestamp to
		// the day is not one: a record may change twice in a day.
		r.Version = rec.Header.Datestamp
	}
	for _, a := range rec.About {
		r.About = append(r.About, string(a))
	}
	if rec.Header.Deleted {
		r.Change = source.Deleted
		return r
	}
	body := rec.Metadata
	r.Length, r.Type = int64(len(body)), "application/xml"
	r.Open = func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return r
}
