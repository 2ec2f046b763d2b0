package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/source/oaipmh"
)

// oaiOptions are the harness's options for an OAI-PMH repository at
// base, harvested by p (its Client set to the run's).
func oaiOptions(h *harness, base string, p *oaipmh.Planner) pipeline.Options {
	o := h.options(base)
	p.Client, p.Log = o.Client, slog.New(slog.DiscardHandler)
	o.Protocol = planned(p)
	return o
}

// TestRetryOfRecordGone: a record held at an older version whose newer
// version failed for good (broken beyond repair, in its page and alone) is
// asked for again by the next run; the repository has since removed it
// (idDoesNotExist: a repository whose deletedRecord policy is "no" or
// "transient" keeps no tombstone). The planner turns that into a delete,
// dated by the server's clock, which removes the record from the sinks.
func TestRetryOfRecordGone(t *testing.T) {
	ctx := context.Background()
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: 10, PageSize: 20})
	const victim = "oai:rsharvest.example:0000005" // updated at revision 1
	var phase atomic.Int32
	phase.Store(1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		verb := r.Form.Get("verb")
		switch {
		case phase.Load() == 2 && (verb == "ListRecords" || verb == "GetRecord"):
			// The victim's new version broken beyond repair, in its page
			// and alone.
			rec := httptest.NewRecorder()
			repo.ServeHTTP(rec, r)
			w.Header().Set("Content-Type", "text/xml")
			io.WriteString(w, strings.Replace(rec.Body.String(), "Record 5, version 1</dc:title>", "Record 5, version 1</dc:titel>", 1))
		case phase.Load() == 3 && verb == "GetRecord" && r.Form.Get("identifier") == victim:
			w.Header().Set("Content-Type", "text/xml")
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><responseDate>%s</responseDate><request verb="GetRecord">http://%s/</request>
<error code="idDoesNotExist">%s</error></OAI-PMH>`, repo.Now().Format(time.RFC3339), r.Host, victim)
		default:
			repo.ServeHTTP(w, r)
		}
	}))
	defer srv.Close()
	h := newHarness(t)
	opts := func() pipeline.Options { return oaiOptions(h, srv.URL, &oaipmh.Planner{}) }
	if rep := h.syncRun(ctx, opts()); rep.Status != runreport.StatusOK {
		t.Fatalf("baseline: %s", rep.Summary())
	}
	repo.Advance()
	phase.Store(2)
	rep := h.syncRun(ctx, opts())
	if !slices.ContainsFunc(rep.Failures, func(f runreport.Failure) bool { return f.URI == victim && f.Permanent }) {
		t.Fatalf("run 2: %s %+v; want the victim's own permanent failure", rep.Summary(), rep.Failures)
	}
	if _, ok := h.held(ctx)[victim]; !ok {
		t.Fatalf("run 2: the victim's older version is not held")
	}
	phase.Store(3)
	rep = h.syncRun(ctx, opts())
	t.Logf("run 3: %s", rep.Summary())
	if b, ok := h.held(ctx)[victim]; ok {
		t.Errorf("the repository no longer has %s, the retry found it so, and the destination still holds it (%q)", victim, firstLine(b))
	}
	// And nothing will ask for it again.
	rep = h.syncRun(ctx, opts())
	if _, ok := h.held(ctx)[victim]; ok {
		t.Logf("run 4: %s; still held", rep.Summary())
	}
}

func firstLine(b []byte) string {
	if i := bytes.Index(b, []byte("<dc:title>")); i >= 0 {
		b = b[i:]
	}
	return string(b[:min(len(b), 40)])
}

// TestPageBudgetIncrementalGoesOn: --max-pages stops a list that goes
// on, the run ends partial, and the next run goes on from the last page,
// in an incremental run as in a baseline: the checkpoint of a set held
// keeps its progress marks, so runs of one page each harvest the whole
// list in the end.
func TestPageBudgetIncrementalGoesOn(t *testing.T) {
	ctx := context.Background()
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: 30, PageSize: 5})
	var tokens atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if r.Form.Get("resumptionToken") != "" {
			tokens.Add(1)
		}
		repo.ServeHTTP(w, r)
	}))
	defer srv.Close()
	tests := []struct {
		name     string
		baseline bool // the budgeted runs are baselines (no checkpoint yet)
	}{
		{"control: baseline", true},
		{"incremental", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if !tc.baseline {
				if rep := h.syncRun(ctx, oaiOptions(h, srv.URL, &oaipmh.Planner{})); rep.Status != runreport.StatusOK {
					t.Fatalf("baseline: %s", rep.Summary())
				}
				repo.Advance() // 13 records changed: 3 pages of 5
			}
			tokens.Store(0)
			// With a budget of one page a run, 6 (baseline) or 3
			// (incremental) runs read the list; 7 are made.
			for run := 1; run <= 7; run++ {
				rep := h.syncRun(ctx, oaiOptions(h, srv.URL, &oaipmh.Planner{MaxPages: 1}))
				t.Logf("run %d: %s", run, rep.Summary())
			}
			resumed := tokens.Load() // requests that went on with a token
			ref := newHarness(t)
			if rep := ref.syncRun(ctx, oaiOptions(ref, srv.URL, &oaipmh.Planner{})); rep.Status != runreport.StatusOK {
				t.Fatalf("reference: %s", rep.Summary())
			}
			want, got := ref.held(ctx), h.held(ctx)
			var missing []string
			for uri, b := range want {
				if !bytes.Equal(got[uri], b) {
					missing = append(missing, uri)
				}
			}
			slices.Sort(missing)
			if len(missing) > 0 {
				t.Errorf("after 7 runs of one page each, %d records not held as the repository has them (%d requests with a token: the list never resumed): %v",
					len(missing), resumed, missing)
			}
		})
	}
}
