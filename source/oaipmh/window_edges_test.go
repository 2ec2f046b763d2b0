package oaipmh_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/oaipmh"
	"github.com/rsharvest/rsharvest/source/sourcetest"
)

// fakeRecord is one record of a fakeRepo.
type fakeRecord struct {
	id        string
	datestamp string // as sent
	deleted   bool
}

// fakeRepo is a small OAI-PMH data provider written for these tests: it
// filters from/until at the granularity it declares (inclusive, each
// record's datestamp compared as truncated to that granularity, as a
// server keeping finer stamps than it declares does), pages by an offset
// token, and counts its requests.
type fakeRepo struct {
	*httptest.Server
	granularity  string // as Identify declares it
	earliest     string
	responseDate string
	pageSize     int
	mu           sync.Mutex
	records      []fakeRecord
	lists        atomic.Int64
}

func newFakeRepo(t *testing.T, granularity, earliest, responseDate string, pageSize int, recs []fakeRecord) *fakeRepo {
	f := &fakeRepo{granularity: granularity, earliest: earliest, responseDate: responseDate, pageSize: pageSize, records: recs}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeRepo) day() bool { return !strings.Contains(f.granularity, "hh") }

// bound parses an argument: ok false when not in the declared granularity.
func (f *fakeRepo) bound(s string, until bool) (time.Time, bool) {
	if s == "" {
		return time.Time{}, true
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		if until {
			t = t.Add(24*time.Hour - time.Nanosecond)
		}
		return t, true
	}
	if f.day() {
		return time.Time{}, false
	}
	t, err := time.Parse("2006-01-02T15:04:05Z", s)
	return t, err == nil
}

func (f *fakeRepo) serve(w http.ResponseWriter, req *http.Request) {
	req.ParseForm()
	a := req.Form
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	var body string
	switch a.Get("verb") {
	case "Identify":
		body = `<Identify><repositoryName>fake</repositoryName><baseURL>` + f.URL + `</baseURL><protocolVersion>2.0</protocolVersion>` +
			`<adminEmail>a@b.c</adminEmail><earliestDatestamp>` + f.earliest + `</earliestDatestamp><deletedRecord>persistent</deletedRecord>` +
			`<granularity>` + f.granularity + `</granularity></Identify>`
	case "ListRecords":
		f.lists.Add(1)
		from, until, start := a.Get("from"), a.Get("until"), 0
		if tok := a.Get("resumptionToken"); tok != "" {
			parts := strings.SplitN(tok, "|", 3)
			start, _ = strconv.Atoi(parts[0])
			from, until = parts[1], parts[2]
		}
		lo, ok1 := f.bound(from, false)
		hi, ok2 := f.bound(until, true)
		if !ok1 || !ok2 {
			body = `<error code="badArgument">granularity</error>`
			break
		}
		unit := time.Second
		if f.day() {
			unit = 24 * time.Hour
		}
		f.mu.Lock()
		var match []fakeRecord
		for _, r := range f.records {
			t := oaipmh.ParseDatestamp(r.datestamp).Truncate(unit)
			if (lo.IsZero() || !t.Before(lo)) && (hi.IsZero() || !t.After(hi)) {
				match = append(match, r)
			}
		}
		f.mu.Unlock()
		if len(match) == 0 {
			body = `<error code="noRecordsMatch">none</error>`
			break
		}
		end := min(start+f.pageSize, len(match))
		var b strings.Builder
		b.WriteString("<ListRecords>")
		for _, r := range match[start:end] {
			if r.deleted {
				fmt.Fprintf(&b, `<record><header status="deleted"><identifier>%s</identifier><datestamp>%s</datestamp></header></record>`, r.id, r.datestamp)
				continue
			}
			fmt.Fprintf(&b, `<record><header><identifier>%s</identifier><datestamp>%s</datestamp></header>`+
				`<metadata><oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>%s</dc:title></oai_dc:dc></metadata></record>`,
				r.id, r.datestamp, r.id)
		}
		if end < len(match) {
			fmt.Fprintf(&b, `<resumptionToken>%d|%s|%s</resumptionToken>`, end, from, until)
		}
		b.WriteString("</ListRecords>")
		body = b.String()
	default:
		body = `<error code="badVerb">no</error>`
	}
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><responseDate>%s</responseDate><request>%s</request>%s</OAI-PMH>`, f.responseDate, f.URL, body)
}

// planRecords plans task with p and returns the URIs of the records it
// emitted (sorted), and its failures.
func planRecords(t *testing.T, p *oaipmh.Planner, task source.Task, held source.Holdings) ([]string, []string) {
	t.Helper()
	var mu sync.Mutex
	var recs, fails []string
	_, err := p.Plan(context.Background(), task, held, func(_ context.Context, u source.Unit) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case u.Record != nil:
			recs = append(recs, u.Record.URI)
		case u.Failure != nil:
			fails = append(fails, u.Failure.URI+": "+u.Failure.Err.Error())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	slices.Sort(recs)
	return recs, fails
}

// TestSubSecondDatestampsAtWindowEdges: a repository of seconds
// granularity whose datestamps carry a fraction of a second, harvested in
// parallel date windows (Concurrency above 1, the default 4): a record
// stamped within the last second of a window belongs to that window, and
// every record comes, as harvested in one list.
func TestSubSecondDatestampsAtWindowEdges(t *testing.T) {
	var recs []fakeRecord
	for i := range 60 {
		recs = append(recs, fakeRecord{id: fmt.Sprintf("oai:x:%02d", i), datestamp: fmt.Sprintf("2024-01-01T00:00:%02d.500Z", i)})
	}
	f := newFakeRepo(t, "YYYY-MM-DDThh:mm:ssZ", "2024-01-01T00:00:00Z", "2024-01-01T00:01:00Z", 10, recs)
	task := source.Task{Source: f.URL, Mode: source.Baseline}
	one, _ := planRecords(t, &oaipmh.Planner{Client: planner().Client}, task, sourcetest.Holdings{})
	if len(one) != 60 {
		t.Fatalf("one list: %d records, want 60", len(one))
	}
	windowed, fails := planRecords(t, &oaipmh.Planner{Client: planner().Client, Concurrency: 4}, task, sourcetest.Holdings{})
	var lost []string
	for _, id := range one {
		if _, ok := slices.BinarySearch(windowed, id); !ok {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		t.Errorf("in date windows, %d of 60 records never emitted (no failure either: %q): %q", len(lost), fails, lost)
	}
}

// TestEarliestDatestampCenturiesAgo: a repository whose Identify gives an
// earliestDatestamp more than 292 years ago (longer than a Duration) is
// divided into the usual number of date windows, not one a day.
func TestEarliestDatestampCenturiesAgo(t *testing.T) {
	f := newFakeRepo(t, "YYYY-MM-DD", "1700-01-01", "2024-01-01T00:01:00Z", 10,
		[]fakeRecord{{id: "oai:x:1", datestamp: "2023-05-06"}})
	p := &oaipmh.Planner{Client: planner().Client, Concurrency: 4}
	var parts atomic.Int64
	_, err := p.Parts(context.Background(), source.Task{Source: f.URL, Mode: source.Baseline}, sourcetest.Holdings{},
		func(context.Context, string, []byte) error { parts.Add(1); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if n := parts.Load(); n > 16 {
		t.Errorf("a baseline divided into %d parts (date windows), want at most 16 (4 per list at Concurrency 4)", n)
	}
}

// TestForgottenTokensLongList: a server that forgets a resumption token
// now and then over a long list: the list is asked for again each time,
// the restarts bounded only in a row without progress, and every record
// comes in one run.
func TestForgottenTokensLongList(t *testing.T) {
	r := newRepo(t, bench.OAIOptions{Records: 2000, PageSize: 10, ForgetTokens: true})
	recs, fails := planRecords(t, planner(), source.Task{Source: r.URL, Mode: source.Baseline}, sourcetest.Holdings{})
	if len(fails) > 0 {
		t.Errorf("the list failed after %d records: %q", len(recs), fails)
	}
	seen := map[string]bool{}
	for _, id := range recs {
		seen[id] = true
	}
	if len(seen) != 2000 {
		t.Errorf("%d of 2000 records harvested", len(seen))
	}
}
