package oaipmh_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/oaipmh"
	"github.com/rsharvest/rsharvest/source/sourcetest"
)

// TestCheckpointFromServerClock: the checkpoint is the server's clock (its
// responseDate), never ours unless the log says so. A responseDate
// without its zone designator (a habit of some servers) is read as UTC;
// an Identify without one leaves the checkpoint at the harvester's clock,
// here two years ahead of the server's, and says so.
func TestCheckpointFromServerClock(t *testing.T) {
	serverNow := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name                   string
		identifyDate, listDate string
	}{
		{"control: with its zone", "2024-06-01T00:00:00Z", "2024-06-01T00:00:00Z"},
		{"no zone designator", "2024-06-01T00:00:00", "2024-06-01T00:00:00"},
		{"none in Identify, one in the lists", "", "2024-06-01T00:00:00Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.ParseForm()
				w.Header().Set("Content-Type", "text/xml")
				date := func(s string) string {
					if s == "" {
						return ""
					}
					return "<responseDate>" + s + "</responseDate>"
				}
				if r.Form.Get("verb") == "Identify" {
					fmt.Fprintf(w, `<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">%s<request>x</request>
<Identify><repositoryName>r</repositoryName><baseURL>x</baseURL><protocolVersion>2.0</protocolVersion><adminEmail>a@b.c</adminEmail>
<earliestDatestamp>2020-01-01T00:00:00Z</earliestDatestamp><deletedRecord>no</deletedRecord><granularity>YYYY-MM-DDThh:mm:ssZ</granularity></Identify></OAI-PMH>`, date(tc.identifyDate))
					return
				}
				fmt.Fprintf(w, `<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">%s<request>x</request>
<ListRecords><record><header><identifier>oai:x:1</identifier><datestamp>2024-05-31T00:00:00Z</datestamp></header>
<metadata><dc xmlns="http://www.openarchives.org/OAI/2.0/oai_dc/">1</dc></metadata></record></ListRecords></OAI-PMH>`, date(tc.listDate))
			}))
			defer srv.Close()
			var logged bytes.Buffer
			p := planner()
			p.Log = slog.New(slog.NewTextHandler(&logged, nil))
			set := oaipmh.ResourceSet(oaipmh.DefaultMetadataPrefix, "")
			held := sourcetest.Holdings{set: {ResourceSet: set, Next: time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)}}
			cps, err := p.Plan(t.Context(), source.Task{Source: srv.URL, Mode: source.Incremental}, held, func(context.Context, source.Unit) error { return nil })
			if err != nil || len(cps) != 1 {
				t.Fatalf("Plan: %v %v", cps, err)
			}
			explained := strings.Contains(strings.ToLower(logged.String()), "responsedate") || strings.Contains(strings.ToLower(logged.String()), "clock")
			if cps[0].Next.After(serverNow) && !explained {
				t.Errorf("checkpoint %v: the harvester's clock, %v ahead of the server's (%v), and nothing logged of it", cps[0].Next, cps[0].Next.Sub(serverNow).Round(time.Hour), serverNow)
			}
		})
	}
}

// TestIdentifyForbiddenCharacter: a character XML forbids in the Identify
// response every harvest begins with, raw or as a character reference, is
// replaced, as in a list page (the response is read again, leniently): the
// repository is harvested.
func TestIdentifyForbiddenCharacter(t *testing.T) {
	for _, name := range []string{"raw \x1a", "a reference &#x1A;", "a reference &#26;"} {
		t.Run(name, func(t *testing.T) {
			repo := bench.NewOAIRepository(bench.OAIOptions{Records: 3})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.ParseForm()
				if r.Form.Get("verb") != "Identify" {
					repo.ServeHTTP(w, r)
					return
				}
				rec := httptest.NewRecorder()
				repo.ServeHTTP(rec, r)
				w.Header().Set("Content-Type", "text/xml")
				io.WriteString(w, strings.Replace(rec.Body.String(), "rsharvest synthetic repository", "Repository "+name, 1))
			}))
			defer srv.Close()
			n := 0
			_, err := planner().Plan(t.Context(), source.Task{Source: srv.URL, Mode: source.Baseline}, sourcetest.Holdings{}, func(_ context.Context, u source.Unit) error {
				if u.Record != nil {
					n++
				}
				return nil
			})
			if err != nil || n != 3 {
				t.Errorf("%d records, error %v", n, err)
			}
		})
	}
}
