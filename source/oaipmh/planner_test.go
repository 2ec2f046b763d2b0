package oaipmh_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/oaipmh"
	"github.com/rsharvest/rsharvest/source/sourcetest"
)

// item is one record of a test repository.
type item struct {
	id      string
	stamp   time.Time
	sets    []string
	deleted bool
}

// repo is a small OAI-PMH 2.0 data provider on 127.0.0.1: its records
// paged by pageSize with resumption tokens holding '+', '/' and spaces,
// from/until and set honoured, a fixed responseDate.
type repo struct {
	*httptest.Server
	items    []item
	pageSize int
	// days: the repository's granularity is YYYY-MM-DD.
	days bool
	// loop: every token leads back to the first page's token.
	loop bool
	now  time.Time

	mu       sync.Mutex
	tokens   map[string]listState
	requests []url.Values
}

type listState struct {
	args   url.Values
	offset int
}

func newRepo(t *testing.T, items []item) *repo {
	r := &repo{items: items, pageSize: 2, now: time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC), tokens: map[string]listState{}}
	r.Server = httptest.NewServer(r)
	t.Cleanup(r.Close)
	return r
}

func (r *repo) granularity() string {
	if r.days {
		return "YYYY-MM-DD"
	}
	return "YYYY-MM-DDThh:mm:ssZ"
}

func (r *repo) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, q)
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<OAI-PMH xmlns="%s" xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="http://purl.org/dc/elements/1.1/">
<responseDate>%s</responseDate><request>%s</request>`, oaipmh.Namespace, r.now.Format(time.RFC3339), r.URL)
	defer fmt.Fprint(w, "</OAI-PMH>")
	switch q.Get("verb") {
	case "Identify":
		fmt.Fprintf(w, `<Identify><repositoryName>test</repositoryName><baseURL>%s</baseURL><protocolVersion>2.0</protocolVersion>
<adminEmail>a@example.org</adminEmail><earliestDatestamp>2024-01-01</earliestDatestamp><deletedRecord>persistent</deletedRecord>
<granularity>%s</granularity></Identify>`, r.URL, r.granularity())
	case "ListRecords":
		st := listState{args: q}
		if tok := q.Get("resumptionToken"); tok != "" {
			var ok bool
			if st, ok = r.tokens[tok]; !ok {
				fmt.Fprint(w, `<error code="badResumptionToken">unknown</error>`)
				return
			}
		}
		var match []item
		for _, it := range r.items {
			if r.matches(it, st.args) {
				match = append(match, it)
			}
		}
		if len(match) == 0 {
			fmt.Fprint(w, `<error code="noRecordsMatch">none</error>`)
			return
		}
		end := min(st.offset+r.pageSize, len(match))
		fmt.Fprint(w, "<ListRecords>")
		for _, it := range match[st.offset:end] {
			status := ""
			if it.deleted {
				status = ` status="deleted"`
			}
			fmt.Fprintf(w, `<record><header%s><identifier>%s</identifier><datestamp>%s</datestamp>`, status, it.id, r.stamp(it.stamp))
			for _, s := range it.sets {
				fmt.Fprintf(w, "<setSpec>%s</setSpec>", s)
			}
			fmt.Fprint(w, "</header>")
			if !it.deleted {
				fmt.Fprintf(w, `<metadata><oai_dc:dc><dc:title>%s</dc:title></oai_dc:dc></metadata>`, it.id)
			}
			fmt.Fprint(w, "</record>")
		}
		switch {
		case end < len(match):
			tok := fmt.Sprintf("p+%d/x y", end)
			if r.loop {
				tok = fmt.Sprintf("p+%d/x y", r.pageSize)
			}
			r.tokens[tok] = listState{args: st.args, offset: end}
			fmt.Fprintf(w, `<resumptionToken completeListSize="%d" cursor="%d">%s</resumptionToken>`, len(match), st.offset, tok)
		case st.offset > 0:
			fmt.Fprintf(w, `<resumptionToken completeListSize="%d" cursor="%d"/>`, len(match), st.offset)
		}
		fmt.Fprint(w, "</ListRecords>")
	default:
		fmt.Fprint(w, `<error code="badVerb">no</error>`)
	}
}

func (r *repo) stamp(t time.Time) string {
	if r.days {
		return t.Format("2006-01-02")
	}
	return t.Format(time.RFC3339)
}

// matches applies from, until (inclusive, in the repository's
// granularity) and set.
func (r *repo) matches(it item, args url.Values) bool {
	if s := args.Get("set"); s != "" && !slices.Contains(it.sets, s) {
		return false
	}
	stamp := oaipmh.ParseDatestamp(r.stamp(it.stamp))
	if f := args.Get("from"); f != "" && stamp.Before(oaipmh.ParseDatestamp(f)) {
		return false
	}
	if u := args.Get("until"); u != "" && stamp.After(oaipmh.ParseDatestamp(u)) {
		return false
	}
	return true
}

func (r *repo) listRequests() []url.Values {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []url.Values
	for _, q := range r.requests {
		if q.Get("verb") == "ListRecords" {
			out = append(out, q)
		}
	}
	return out
}

func day(m time.Month, d int) time.Time { return time.Date(2024, m, d, 10, 0, 0, 0, time.UTC) }

func items() []item {
	return []item{
		{id: "oai:t:1", stamp: day(1, 5), sets: []string{"a"}},
		{id: "oai:t:2", stamp: day(2, 5), sets: []string{"a", "b"}},
		{id: "oai:t:3", stamp: day(3, 5), sets: []string{"b"}, deleted: true},
		{id: "oai:t:4", stamp: day(4, 5)},
		{id: "oai:t:5", stamp: day(5, 5), sets: []string{"a"}},
	}
}

func planner() *oaipmh.Planner {
	return &oaipmh.Planner{Client: fetch.New(fetch.Options{Retries: -1, Timeout: 5 * time.Second})}
}

// TestPlannerConformance runs the planner conformance suite on the
// OAI-PMH planner.
func TestPlannerConformance(t *testing.T) {
	r := newRepo(t, items())
	dc, dcA := oaipmh.ResourceSet("oai_dc", ""), oaipmh.ResourceSet("oai_dc", "a")
	held := sourcetest.Holdings{dc: {ResourceSet: dc, Next: day(3, 1), Baseline: day(1, 1)}}
	task := func(mode source.Mode, set string, from, until time.Time) source.Task {
		return source.Task{Source: r.URL, Mode: mode, Set: set, From: from, Until: until}
	}
	sourcetest.Run(t, []sourcetest.Case{
		{
			Name: "baseline", Planner: planner(), Task: task(source.Baseline, "", time.Time{}, time.Time{}),
			Records: []string{"oai:t:1", "oai:t:2", "oai:t:3", "oai:t:4", "oai:t:5"},
			Sets:    []string{dc}, Checkpoints: map[string]time.Time{dc: r.now},
		},
		{
			Name: "baseline of a set", Planner: planner(), Task: task(source.Baseline, "a", time.Time{}, time.Time{}),
			Records: []string{"oai:t:1", "oai:t:2", "oai:t:5"},
			Sets:    []string{dcA}, Checkpoints: map[string]time.Time{dcA: r.now},
		},
		{
			Name: "incremental from the checkpoint", Planner: planner(), Held: held, Task: task(source.Incremental, "", time.Time{}, time.Time{}),
			Records: []string{"oai:t:3", "oai:t:4", "oai:t:5"},
			Sets:    []string{dc}, Checkpoints: map[string]time.Time{dc: r.now},
		},
		{
			Name: "incremental over a range", Planner: planner(), Held: held, Task: task(source.Incremental, "", day(2, 1), day(4, 1)),
			Records: []string{"oai:t:2", "oai:t:3"},
			Sets:    []string{dc}, Checkpoints: map[string]time.Time{dc: day(4, 1)},
		},
		{
			Name: "incremental with nothing new", Planner: planner(), Held: held, Task: task(source.Incremental, "", day(6, 1), time.Time{}),
			Sets: []string{dc}, Checkpoints: map[string]time.Time{dc: r.now},
		},
		{
			Name: "incremental without a checkpoint", Planner: planner(), Task: task(source.Incremental, "", time.Time{}, time.Time{}),
			Err: source.ErrNoCheckpoint,
		},
	})
}

// TestRecordUnits: records carry their metadata; a deleted header is a
// delete; tokens go back exactly as sent.
func TestRecordUnits(t *testing.T) {
	r := newRepo(t, items())
	units := plan(t, r, source.Task{Source: r.URL, Mode: source.Baseline})
	if len(units) != 5 {
		t.Fatalf("%d units", len(units))
	}
	for _, u := range units {
		rec := u.Record
		if rec.ResourceSet != "metadataPrefix=oai_dc" || rec.ChangeTime.IsZero() {
			t.Errorf("%s: %+v", rec.URI, rec)
		}
		if rec.URI == "oai:t:3" {
			if rec.Change != source.Deleted || rec.Open != nil {
				t.Errorf("deleted record: %+v", rec)
			}
			continue
		}
		body := readBody(t, rec)
		if !strings.Contains(body, `<dc:title>`+rec.URI+`</dc:title>`) || !strings.Contains(body, `xmlns:dc="http://purl.org/dc/elements/1.1/"`) || int64(len(body)) != rec.Length {
			t.Errorf("%s: body %q", rec.URI, body)
		}
	}
	var tokens []string
	for _, q := range r.listRequests() {
		if tok := q.Get("resumptionToken"); tok != "" {
			tokens = append(tokens, tok)
		}
	}
	if want := []string{"p+2/x y", "p+4/x y"}; !slices.Equal(tokens, want) {
		t.Errorf("tokens sent %q, want %q", tokens, want)
	}
}

// TestDayGranularity: a repository that takes days is never sent seconds.
func TestDayGranularity(t *testing.T) {
	r := newRepo(t, items())
	r.days = true
	plan(t, r, source.Task{Source: r.URL, Mode: source.Incremental, From: day(2, 1), Until: day(4, 1)})
	q := r.listRequests()[0]
	if q.Get("from") != "2024-02-01" || q.Get("until") != "2024-04-01" {
		t.Errorf("from %q until %q", q.Get("from"), q.Get("until"))
	}
}

// TestTokenLoop: a token sent twice ends the list with the set's failure;
// the records before it stand, and no request loops.
func TestTokenLoop(t *testing.T) {
	r := newRepo(t, items())
	r.loop = true
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
	if records != 4 || len(r.listRequests()) != 2 {
		t.Errorf("%d records in %d requests", records, len(r.listRequests()))
	}
}

func plan(t *testing.T, r *repo, task source.Task) []source.Unit {
	t.Helper()
	var units []source.Unit
	held := sourcetest.Holdings{}
	if _, err := planner().Plan(context.Background(), task, held, func(_ context.Context, u source.Unit) error {
		units = append(units, u)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return units
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
