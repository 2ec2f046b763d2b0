package oaipmh_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/oaipmh"
	"github.com/rsharvest/rsharvest/source/sourcetest"
)

// repo serves a synthetic repository (bench.OAIRepository) on 127.0.0.1,
// recording the list requests it answers.
type repo struct {
	*httptest.Server
	*bench.OAIRepository
	mu       sync.Mutex
	requests []url.Values
	methods  []string
}

func newRepo(t *testing.T, o bench.OAIOptions) *repo {
	r := &repo{OAIRepository: bench.NewOAIRepository(o)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if err := req.ParseForm(); err == nil && req.Form.Get("verb") == "ListRecords" {
			r.mu.Lock()
			r.requests = append(r.requests, req.Form)
			r.methods = append(r.methods, req.Method)
			r.mu.Unlock()
		}
		r.OAIRepository.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *repo) listRequests() []url.Values {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.requests)
}

// ids returns the identifiers of the repository's records that pass keep.
func (r *repo) ids(keep func(bench.OAIRecord) bool) []string {
	var out []string
	for _, rec := range r.Records() {
		if keep(rec) {
			out = append(out, rec.Identifier)
		}
	}
	return out
}

func all(bench.OAIRecord) bool { return true }

func planner() *oaipmh.Planner {
	return &oaipmh.Planner{Client: fetch.New(fetch.Options{Retries: -1, Timeout: 5 * time.Second})}
}

// TestPlannerConformance runs the planner conformance suite on the
// OAI-PMH planner.
func TestPlannerConformance(t *testing.T) {
	r := newRepo(t, bench.OAIOptions{Records: 10, PageSize: 3})
	rev0 := r.Now()
	minute := func(i int) time.Time { return r.Records()[i].Datestamp }
	between := func(lo, hi time.Time) func(bench.OAIRecord) bool {
		return func(rec bench.OAIRecord) bool {
			return !rec.Datestamp.Before(lo) && (hi.IsZero() || !rec.Datestamp.After(hi))
		}
	}
	dc, even := oaipmh.ResourceSet("oai_dc", ""), oaipmh.ResourceSet("oai_dc", "parity:even")
	task := func(mode source.Mode, set string, from, until time.Time) source.Task {
		return source.Task{Source: r.URL, Mode: mode, Set: set, From: from, Until: until}
	}
	cases := []sourcetest.Case{
		{
			Name: "baseline", Planner: planner(), Task: task(source.Baseline, "", time.Time{}, time.Time{}),
			Records: r.ids(all), Sets: []string{dc}, Checkpoints: map[string]time.Time{dc: rev0},
		},
		{
			Name: "baseline of a set", Planner: planner(), Task: task(source.Baseline, "parity:even", time.Time{}, time.Time{}),
			Records: []string{"oai:rsharvest.example:0000000", "oai:rsharvest.example:0000002", "oai:rsharvest.example:0000004", "oai:rsharvest.example:0000006", "oai:rsharvest.example:0000008"},
			Sets:    []string{even}, Checkpoints: map[string]time.Time{even: rev0},
		},
		{
			Name: "incremental over a range", Planner: planner(), Task: task(source.Incremental, "", minute(2), minute(5)),
			Records: r.ids(between(minute(2), minute(5))), Sets: []string{dc}, Checkpoints: map[string]time.Time{dc: minute(5)},
		},
		{
			Name: "incremental without a checkpoint", Planner: planner(), Task: task(source.Incremental, "", time.Time{}, time.Time{}),
			Err: source.ErrNoCheckpoint,
		},
	}
	// The same in parallel date windows: still every record once.
	windowed := &oaipmh.Planner{Client: planner().Client, Concurrency: 3}
	for _, c := range slices.Clone(cases) {
		c.Name += " in windows"
		c.Planner, c.Unordered = windowed, true
		cases = append(cases, c)
	}
	sourcetest.Run(t, cases)

	// The repository changes: an incremental task from the checkpoint
	// sees the changes (updates, deletes, creations) and nothing else.
	r.Advance()
	held := sourcetest.Holdings{dc: {ResourceSet: dc, Next: rev0, Baseline: rev0}}
	sourcetest.Run(t, []sourcetest.Case{
		{
			Name: "incremental from the checkpoint", Planner: planner(), Held: held, Task: task(source.Incremental, "", time.Time{}, time.Time{}),
			Records: r.ids(between(rev0, time.Time{})), Sets: []string{dc}, Checkpoints: map[string]time.Time{dc: r.Now()},
		},
		{
			Name: "incremental from the checkpoint in windows", Planner: windowed, Unordered: true, Held: held, Task: task(source.Incremental, "", time.Time{}, time.Time{}),
			Records: r.ids(between(rev0, time.Time{})), Sets: []string{dc}, Checkpoints: map[string]time.Time{dc: r.Now()},
		},
		{
			Name: "incremental with nothing new", Planner: planner(), Held: held, Task: task(source.Incremental, "", r.Now(), time.Time{}),
			Sets: []string{dc}, Checkpoints: map[string]time.Time{dc: r.Now()},
		},
	})
}

// TestRecordUnits: records carry their metadata, a standalone document
// (also where the server declares its namespaces on the envelope only); a
// deleted header is a delete; tokens go back exactly as sent.
func TestRecordUnits(t *testing.T) {
	r := newRepo(t, bench.OAIOptions{Records: 10, PageSize: 3, RootNamespaces: true, EmptyLastToken: true})
	r.Advance()
	units := plan(t, r, source.Task{Source: r.URL, Mode: source.Baseline})
	truth := r.Records()
	if len(units) != len(truth) {
		t.Fatalf("%d units, %d records", len(units), len(truth))
	}
	for i, u := range units {
		rec, want := u.Record, truth[i]
		if rec.URI != want.Identifier || rec.ResourceSet != "metadataPrefix=oai_dc" || !rec.ChangeTime.Equal(want.Datestamp) {
			t.Errorf("%s: %+v", want.Identifier, rec)
		}
		if want.Deleted {
			if rec.Change != source.Deleted || rec.Open != nil {
				t.Errorf("deleted record: %+v", rec)
			}
			continue
		}
		body := readBody(t, rec)
		if !strings.Contains(body, `<dc:title>`+want.Title+`</dc:title>`) || !strings.Contains(body, `xmlns:dc="`+bench.DCNamespace+`"`) || int64(len(body)) != rec.Length {
			t.Errorf("%s: body %q", rec.URI, body)
		}
	}
	var tokens []string
	for _, q := range r.listRequests() {
		if tok := q.Get("resumptionToken"); tok != "" {
			tokens = append(tokens, tok)
		}
	}
	if want := []string{"3+oai_dc/- - -", "6+oai_dc/- - -", "9+oai_dc/- - -"}; !slices.Equal(tokens, want) {
		t.Errorf("tokens sent %q, want %q", tokens, want)
	}
}

// TestDayGranularity: a repository that takes days is never sent seconds
// (it would answer badArgument).
func TestDayGranularity(t *testing.T) {
	r := newRepo(t, bench.OAIOptions{Records: 10, DayGranularity: true})
	from, until := time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC), time.Date(2024, 1, 2, 10, 0, 0, 0, time.UTC)
	units := plan(t, r, source.Task{Source: r.URL, Mode: source.Incremental, From: from, Until: until})
	q := r.listRequests()[0]
	if q.Get("from") != "2024-01-01" || q.Get("until") != "2024-01-02" || len(units) != 10 {
		t.Errorf("from %q until %q, %d units", q.Get("from"), q.Get("until"), len(units))
	}
}

// TestUntilInTheFuture: an incremental task whose until is still to come
// leaves its checkpoint at now, not at that until: what the repository
// adds before then is read by the next run.
func TestUntilInTheFuture(t *testing.T) {
	r := newRepo(t, bench.OAIOptions{Records: 3})
	until := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	cps, err := planner().Plan(context.Background(), source.Task{Source: r.URL, Mode: source.Incremental, From: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), Until: until},
		sourcetest.Holdings{}, func(context.Context, source.Unit) error { return nil })
	if err != nil || len(cps) != 1 {
		t.Fatalf("Plan: %v %v", cps, err)
	}
	if now := time.Now(); cps[0].Next.After(now) {
		t.Errorf("checkpoint %v, later than now (%v)", cps[0].Next, now)
	}
}

// TestTokenLoop: a token sent twice ends the list with the set's failure;
// the records before it stand, and no request loops.
func TestTokenLoop(t *testing.T) {
	r := newRepo(t, bench.OAIOptions{Records: 10, PageSize: 3, LoopTokens: true})
	var failures []*source.Failure
	var records int
	cps, err := planner().Plan(context.Background(), source.Task{Source: r.URL, Mode: source.Baseline}, sourcetest.Holdings{}, func(_ context.Context, u source.Unit) error {
		if u.Failure != nil {
			failures = append(failures, u.Failure)
		}
		if u.Record != nil {
			records++
		}
		return nil
	})
	if err != nil || len(cps) != 1 {
		t.Fatalf("Plan: %v %v", cps, err)
	}
	if len(failures) != 1 || !failures[0].WholeSet || !strings.Contains(failures[0].Err.Error(), "resumptionToken repeats") {
		t.Errorf("failures %+v", failures)
	}
	if records != 6 || len(r.listRequests()) != 2 {
		t.Errorf("%d records in %d requests", records, len(r.listRequests()))
	}
}

func plan(t *testing.T, _ *repo, task source.Task) []source.Unit {
	t.Helper()
	return planWith(t, planner(), task)
}

// planWith plans task and returns its units but the marks.
func planWith(t *testing.T, p *oaipmh.Planner, task source.Task) []source.Unit {
	t.Helper()
	var units []source.Unit
	held := sourcetest.Holdings{}
	if _, err := p.Plan(context.Background(), task, held, func(_ context.Context, u source.Unit) error {
		if u.Mark == nil {
			units = append(units, u)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return units
}

// TestPost: a request whose URL would be too long is POSTed, and the
// harvest is the same.
func TestPost(t *testing.T) {
	var get, post []string
	for _, maxURL := range []int{0, 10} {
		r := newRepo(t, bench.OAIOptions{Records: 20, PageSize: 6})
		p := planner()
		p.MaxGetURL = maxURL
		var ids []string
		for _, u := range planWith(t, p, source.Task{Source: r.URL, Mode: source.Baseline}) {
			ids = append(ids, u.Record.URI)
		}
		if maxURL == 0 {
			get = ids
		} else {
			post = ids
		}
		methods := map[string]int{}
		for _, m := range r.methods {
			methods[m]++
		}
		if (maxURL == 0 && methods["POST"] != 0) || (maxURL > 0 && methods["GET"] != 0) {
			t.Errorf("MaxGetURL %d: methods %v", maxURL, methods)
		}
	}
	if !slices.Equal(get, post) || len(get) != 20 {
		t.Errorf("GET harvested %d records, POST %d", len(get), len(post))
	}
}

// TestRecordMetadata: a record carries its sets and its about containers
// (each a standalone document) beside its body, and its datestamp as its
// lastmod.
func TestRecordMetadata(t *testing.T) {
	r := newRepo(t, bench.OAIOptions{Records: 12, PageSize: 5, RootNamespaces: true})
	truth := map[string]bench.OAIRecord{}
	for _, rec := range r.Records() {
		truth[rec.Identifier] = rec
	}
	units := planWith(t, planner(), source.Task{Source: r.URL, Mode: source.Baseline})
	if len(units) != len(truth) {
		t.Fatalf("%d units for %d records", len(units), len(truth))
	}
	for _, u := range units {
		rec, want := u.Record, truth[u.Record.URI]
		if !slices.Equal(rec.Sets, want.Sets) || !rec.Lastmod.Equal(want.Datestamp) {
			t.Errorf("%s: sets %v, lastmod %v; want %v, %v", rec.URI, rec.Sets, rec.Lastmod, want.Sets, want.Datestamp)
		}
		switch {
		case want.About == "" && len(rec.About) != 0:
			t.Errorf("%s: about %q, want none", rec.URI, rec.About)
		case want.About != "" && (len(rec.About) != 1 || !strings.HasPrefix(rec.About[0], "<?xml") || !strings.Contains(rec.About[0], `xmlns="`+bench.OAIProvenanceNamespace+`"`) || !strings.Contains(rec.About[0], "<identifier>"+rec.URI+"</identifier>")):
			t.Errorf("%s: about %q", rec.URI, rec.About)
		}
	}
}

func readBody(t *testing.T, rec *source.Record) string {
	t.Helper()
	rc, err := rec.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestQuirks: the habits of real servers, each alone and all together,
// leave a baseline and an incremental harvest with exactly the records
// the repository holds.
func TestQuirks(t *testing.T) {
	quirks := map[string]func(*bench.OAIOptions){
		"day granularity":        func(o *bench.OAIOptions) { o.DayGranularity = true },
		"from and until ignored": func(o *bench.OAIOptions) { o.IgnoreDates = true },
		"empty last token":       func(o *bench.OAIOptions) { o.EmptyLastToken = true },
		"namespaces on the root": func(o *bench.OAIOptions) { o.RootNamespaces = true },
		"control characters":     func(o *bench.OAIOptions) { o.ControlChars = true },
		"one-use tokens":         func(o *bench.OAIOptions) { o.OneUseTokens = true },
		"forgotten tokens":       func(o *bench.OAIOptions) { o.ForgetTokens = true },
		"gzip without saying so": func(o *bench.OAIOptions) { o.Gzip = true },
		"deflate":                func(o *bench.OAIOptions) { o.Deflate = true },
		// One page of every window not well-formed: repaired by the
		// lenient second reading, or (broken beyond repair) each record
		// of it asked for alone; every record arrives.
		"a malformed page per window": func(o *bench.OAIOptions) { o.MalformedPages = true },
		"a broken page per window":    func(o *bench.OAIOptions) { o.BrokenPages = true },
	}
	names := slices.Sorted(maps.Keys(quirks))
	for _, name := range append(names, "all together", "all together in windows") {
		t.Run(name, func(t *testing.T) {
			p := planner()
			if strings.HasSuffix(name, "in windows") {
				p.Concurrency = 3
			}
			o := bench.OAIOptions{Records: 30, PageSize: 7}
			for n, q := range quirks {
				if n == name || strings.HasPrefix(name, "all together") {
					q(&o)
				}
			}
			r := newRepo(t, o)
			got := map[string]string{}
			repaired := 0
			collect := func(units []source.Unit) {
				for _, u := range units {
					if u.Record == nil {
						t.Fatalf("unit %+v %v", u, u.Failure.Err)
					}
					if u.Record.Change == source.Deleted {
					} else if b := readBody(t, u.Record); strings.Contains(b, "flawed") {
						repaired++
						if !strings.Contains(b, "flawed \uFFFD \uFFFD") {
							t.Errorf("%s: the forbidden characters not replaced: %q", u.Record.URI, b)
						}
					}
					if u.Record.Change == source.Deleted {
						delete(got, u.Record.URI)
						continue
					}
					got[u.Record.URI] = readBody(t, u.Record)
				}
			}
			collect(planWith(t, p, source.Task{Source: r.URL, Mode: source.Baseline}))
			from := r.Now()
			r.Advance()
			units := planWith(t, p, source.Task{Source: r.URL, Mode: source.Incremental, From: from})
			collect(units)
			truth := r.Records()
			// A list asked for again after its token was forgotten
			// repeats records: count each once.
			distinct := map[string]bool{}
			for _, u := range units {
				distinct[u.Record.URI] = true
			}
			if changed := len(slices.DeleteFunc(slices.Clone(truth), func(rec bench.OAIRecord) bool { return rec.Datestamp.Before(from) })); len(distinct) != changed {
				t.Errorf("incremental: %d records, %d changed since %v", len(distinct), changed, from)
			}
			live := 0
			for _, rec := range truth {
				if rec.Deleted {
					if _, ok := got[rec.Identifier]; ok {
						t.Errorf("%s deleted, still held", rec.Identifier)
					}
					continue
				}
				live++
				want := strings.ReplaceAll(rec.Title, "\x01", "\uFFFD")
				want = strings.ReplaceAll(want, "\x1f", "\uFFFD")
				if !strings.Contains(got[rec.Identifier], "<dc:title>"+want+"</dc:title>") {
					t.Errorf("%s holds %q, want title %q", rec.Identifier, got[rec.Identifier], want)
				}
			}
			if len(got) != live {
				t.Errorf("%d records held, %d live", len(got), live)
			}
			if name == "a malformed page per window" && repaired == 0 {
				t.Errorf("no page was read leniently")
			}
		})
	}
}

// BenchmarkWindows harvests a repository answering each request after
// 20 ms, one chain of resumption tokens at a time and in parallel date
// windows; it reports records per second.
func BenchmarkWindows(b *testing.B) {
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: 5000, PageSize: 100})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		time.Sleep(20 * time.Millisecond)
		repo.ServeHTTP(w, req)
	}))
	defer srv.Close()
	for _, conc := range []int{1, 4} {
		b.Run(fmt.Sprintf("concurrency %d", conc), func(b *testing.B) {
			p := &oaipmh.Planner{Client: fetch.New(fetch.Options{Retries: -1}), Concurrency: conc}
			records := 0
			for b.Loop() {
				if _, err := p.Plan(context.Background(), source.Task{Source: srv.URL, Mode: source.Baseline}, sourcetest.Holdings{}, func(context.Context, source.Unit) error {
					records++
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// TestRecordVersion: a record's datestamp is its version when the
// repository's granularity is seconds (held at its datestamp, it is not
// written again), and no version when it is days (a record may change
// twice in a day).
func TestRecordVersion(t *testing.T) {
	for _, day := range []bool{false, true} {
		r := newRepo(t, bench.OAIOptions{Records: 5, DayGranularity: day})
		for _, u := range planWith(t, planner(), source.Task{Source: r.URL, Mode: source.Baseline}) {
			if u.Record == nil {
				continue
			}
			if v := u.Record.Version; day && v != "" {
				t.Errorf("day granularity: %s has version %q", u.Record.URI, v)
			} else if !day && (v == "" || !oaipmh.ParseDatestamp(v).Equal(u.Record.ChangeTime)) {
				t.Errorf("seconds: %s has version %q, want its datestamp %v", u.Record.URI, v, u.Record.ChangeTime)
			}
		}
	}
}

// TestPageBudget: a repository that sends a new resumption token with
// every page is stopped after the page budget of its list — a temporary
// failure of the list, saying so, that holds its checkpoint — with the
// records of the pages read emitted and a mark after each.
func TestPageBudget(t *testing.T) {
	var requests int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		w.Header().Set("Content-Type", "text/xml")
		verb := r.Form.Get("verb")
		if verb == "Identify" {
			fmt.Fprintf(w, `<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><responseDate>2024-01-01T00:00:00Z</responseDate><request>%s</request>
<Identify><repositoryName>endless</repositoryName><baseURL>%s</baseURL><protocolVersion>2.0</protocolVersion><adminEmail>a@b.c</adminEmail>
<earliestDatestamp>2020-01-01T00:00:00Z</earliestDatestamp><deletedRecord>no</deletedRecord><granularity>YYYY-MM-DDThh:mm:ssZ</granularity></Identify></OAI-PMH>`, r.URL, r.URL)
			return
		}
		mu.Lock()
		requests++
		n := requests
		mu.Unlock()
		fmt.Fprintf(w, `<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><responseDate>2024-01-01T00:00:00Z</responseDate><request>x</request>
<ListRecords><record><header><identifier>oai:x:%d</identifier><datestamp>2021-01-01T00:00:00Z</datestamp></header>
<metadata><dc xmlns="http://www.openarchives.org/OAI/2.0/oai_dc/">%d</dc></metadata></record>
<resumptionToken>token-%d</resumptionToken></ListRecords></OAI-PMH>`, n, n, n)
	}))
	defer srv.Close()
	p := planner()
	p.MaxPages = 5
	var failures []*source.Failure
	var records, marks int
	_, err := p.Plan(t.Context(), source.Task{Source: srv.URL, Mode: source.Baseline}, sourcetest.Holdings{}, func(_ context.Context, u source.Unit) error {
		switch {
		case u.Failure != nil:
			failures = append(failures, u.Failure)
		case u.Record != nil:
			records++
		case u.Mark != nil:
			marks++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if records != 5 || marks != 5 || requests != 5 {
		t.Errorf("%d records, %d marks in %d requests; want 5 of each", records, marks, requests)
	}
	if len(failures) != 1 || !failures[0].WholeSet || !errors.Is(failures[0].Err, oaipmh.ErrPageBudget) || !errclass.IsRetryable(failures[0].Err) ||
		!strings.Contains(failures[0].Err.Error(), "--max-pages") {
		t.Fatalf("failures %+v; want one temporary failure of the list naming its page budget", failures)
	}
}

// TestPageRecordsBound: a page of more records than the planner keeps
// track of fails its list (here the only one, on its first page: the
// source is unreadable), having emitted those up to the bound.
func TestPageRecordsBound(t *testing.T) {
	r := newRepo(t, bench.OAIOptions{Records: 10, PageSize: 10})
	p := planner()
	p.MaxPageRecords = 5
	var records int
	_, err := p.Plan(t.Context(), source.Task{Source: r.URL, Mode: source.Baseline}, sourcetest.Holdings{}, func(_ context.Context, u source.Unit) error {
		if u.Record != nil {
			records++
		}
		return nil
	})
	if records != 5 || !errors.Is(err, oaipmh.ErrPageTooLong) {
		t.Errorf("%d records, error %v", records, err)
	}
}

// TestGetRecordAnswersAnother: when a page is recovered record by record
// and the repository answers a GetRecord with another record than the one
// asked for, the asked record is its own permanent failure, kept to be
// asked for again — never lost in silence.
func TestGetRecordAnswersAnother(t *testing.T) {
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: 6, PageSize: 6, BrokenPages: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if r.Form.Get("verb") == "GetRecord" {
			// Another record than asked: the first one, always.
			q := r.URL.Query()
			q.Set("identifier", repo.Records()[0].Identifier)
			r.URL.RawQuery = q.Encode()
			r.Form = nil
			r.PostForm = nil
		}
		repo.ServeHTTP(w, r)
	}))
	defer srv.Close()
	var failures []*source.Failure
	ids := map[string]int{}
	if _, err := planner().Plan(t.Context(), source.Task{Source: srv.URL, Mode: source.Baseline}, sourcetest.Holdings{}, func(_ context.Context, u source.Unit) error {
		if u.Failure != nil {
			failures = append(failures, u.Failure)
		}
		if u.Record != nil {
			ids[u.Record.URI]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var wrong *source.Failure
	for _, f := range failures {
		if errors.Is(f.Err, oaipmh.ErrWrongRecord) {
			wrong = f
		}
	}
	if wrong == nil || !errclass.IsPermanent(wrong.Err) || wrong.Retry == nil || wrong.Retry.URI != wrong.URI || ids[wrong.URI] != 0 {
		t.Fatalf("failures %+v, records %v: want the asked record's own failure, kept to be asked again", failures, ids)
	}
	for id, n := range ids {
		if n > 1 {
			t.Errorf("record %s emitted %d times", id, n)
		}
	}
}
