package es

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/es/zinctest"
	"github.com/rsharvest/rsharvest/sink/sinktest"
)

// The test server's credentials and largest bulk line.
const (
	zincUser     = zinctest.User
	zincPassword = zinctest.Password
	zincMaxDoc   = zinctest.MaxDoc
)

// zinc starts the package's ZincSearch on first use; TestMain stops it.
var zinc = sync.OnceValues(func() (*zinctest.Server, error) { return zinctest.Start("sink/es") })

func TestMain(m *testing.M) {
	code := m.Run()
	if z, err := zinc(); err == nil {
		z.Stop()
	}
	os.Exit(code)
}

// newZinc opens a sink on two new indexes of the test ZincSearch.
func newZinc(t *testing.T, opts Options) *ES {
	t.Helper()
	z, err := zinc()
	if err != nil {
		t.Fatalf("ZincSearch: %v", err)
	}
	opts.URL = z.URL
	opts.Username, opts.Password = zincUser, zincPassword
	opts.Index = z.NewIndex()
	if opts.RetryWait == 0 {
		opts.RetryWait = 10 * time.Millisecond
	}
	s, err := New(t.Context(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if s.Flavor() != FlavorZinc {
		t.Fatalf("flavour %v, want zincsearch", s.Flavor())
	}
	return s
}

func TestConformanceZinc(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sink.Sink {
		return newZinc(t, Options{StoreBody: true, Concurrency: 8})
	})
}

func TestZincOpenRefused(t *testing.T) {
	z, err := zinc()
	if err != nil {
		t.Fatalf("ZincSearch: %v", err)
	}
	spec := strings.Replace(z.URL, "http://", "http://"+zincUser+":not-"+zincPassword+"@", 1) + "/refused"
	_, err = Open(t.Context(), spec)
	if !errclass.IsFatal(err) || strings.Contains(err.Error(), zincPassword) {
		t.Errorf("Open with a wrong password = %v, want fatal without the password", err)
	}
	t.Setenv("ES_USERNAME", zincUser)
	t.Setenv("ES_PASSWORD", zincPassword)
	s, err := Open(t.Context(), z.URL+"/fromenv?batch=2")
	if err != nil {
		t.Fatalf("Open with ES_USERNAME/ES_PASSWORD: %v", err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestZincOversizeDocument has ZincSearch refuse one document (longer than
// its ZINC_MAX_DOCUMENT_SIZE) of a bulk request: the others are indexed.
func TestZincOversizeDocument(t *testing.T) {
	s := newZinc(t, Options{StoreBody: true, BatchSize: 100})
	const huge = "http://example.com/huge"
	var want []string
	for i := range 6 {
		uri := fmt.Sprintf("http://example.com/%d", i)
		put(t, s, uri, "", "small "+uri)
		want = append(want, uri)
		if i == 2 {
			put(t, s, huge, "", strings.Repeat("h", zincMaxDoc))
		}
	}
	var got []string
	if err := s.Walk(t.Context(), func(uri string) error { got = append(got, uri); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Walk = %v, want %v", got, want)
	}
	failed := s.Failed()
	if len(failed) != 1 || failed[0].URI != huge || !errclass.IsPermanent(failed[0].Err) {
		t.Errorf("Failed() = %+v, want the huge put alone, permanent", failed)
	}
	if _, err := s.Get(t.Context(), huge); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Get(huge) = %v, want ErrNotExist", err)
	}
	if err := s.Close(t.Context()); !errclass.IsPermanent(err) {
		t.Errorf("Close = %v, want permanent", err)
	}
}

// TestZincDublinCore: ZincSearch takes the dc_* fields of an oai_dc record
// and finds the record by them.
func TestZincDublinCore(t *testing.T) {
	s := newZinc(t, Options{})
	about := `<provenance xmlns="http://www.openarchives.org/OAI/2.0/provenance"/>`
	r := &sink.Resource{URI: "oai:example.org:1", Length: int64(len(oaiDCRecord)), Type: "application/xml", Sets: []string{"physics", "math:algebra"}, About: []string{about}}
	if err := s.Put(t.Context(), r, strings.NewReader(oaiDCRecord)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	var hits []searchHit
	for deadline := time.Now().Add(10 * time.Second); len(hits) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		if hits, err = s.search(t.Context(), s.opts.Index, map[string]any{"query": map[string]any{"match": map[string]any{"dc_title": "rivers"}}, "size": 10}); err != nil {
			t.Fatal(err)
		}
	}
	if len(hits) != 1 || fmt.Sprint(decode(t, hits[0].Source)["dc_creator"]) != "[Ada Bob]" {
		t.Fatalf("search dc_title:rivers: %v", hits)
	}
	if doc := decode(t, hits[0].Source); fmt.Sprint(doc["sets"]) != "[physics math:algebra]" || fmt.Sprint(doc["about"]) != "["+about+"]" {
		t.Errorf("sets %v, about %v", doc["sets"], doc["about"])
	}
}

// TestZincChanges checks the change documents that Put and Delete append.
func TestZincChanges(t *testing.T) {
	s := newZinc(t, Options{})
	put(t, s, "http://example.com/a", "text/plain", "alpha")
	put(t, s, "http://example.com/a", "text/plain", "alpha, again")
	if err := s.Delete(t.Context(), "http://example.com/a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), "http://example.com/never"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var changes []string
	deadline := time.Now().Add(10 * time.Second)
	for len(changes) < 4 && time.Now().Before(deadline) {
		hits, err := s.search(ctx, s.opts.ChangesIndex, map[string]any{
			"query": map[string]any{"match_all": map[string]any{}}, "size": 10,
		})
		if err != nil {
			t.Fatal(err)
		}
		// In the order of the writes: by the sequence number ending the rev
		// (timestamps have millisecond precision).
		seq := func(h searchHit) int {
			n, _ := strconv.Atoi(h.ID[strings.LastIndex(h.ID, "-")+1:])
			return n
		}
		slices.SortFunc(hits, func(a, b searchHit) int { return seq(a) - seq(b) })
		changes = changes[:0]
		for _, h := range hits {
			doc := decode(t, h.Source)
			if doc["rev"] != h.ID {
				t.Errorf("change document %s has rev %v", h.ID, doc["rev"])
			}
			changes = append(changes, fmt.Sprint(doc["change"], " ", doc["uri"]))
		}
		time.Sleep(20 * time.Millisecond)
	}
	want := "[updated http://example.com/a updated http://example.com/a deleted http://example.com/a deleted http://example.com/never]"
	if fmt.Sprint(changes) != want {
		t.Errorf("change documents %v, want %v", changes, want)
	}
}
