package pipeline_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/source/oaipmh"
)

// chaos is a seeded server-side fault injector for the checkpoint rule's
// property test. Each request is named by its path and query; whether it
// fails, and how, is a function of the seed, that name and how often the
// name was asked for, so a run's faults do not depend on the order of
// concurrent requests. A fault is persistent (every ask during the faulty
// phase: a list, page or record that stays broken) or once (the first
// ask: a transient glitch).
type chaos struct {
	seed    uint64
	rate    float64 // share of names with a fault
	on      atomic.Bool
	mu      sync.Mutex
	asked   map[string]int
	counts  map[string]int
	faulted map[string]string
}

func newChaos(seed uint64, rate float64) *chaos {
	c := &chaos{seed: seed, rate: rate, asked: map[string]int{}, counts: map[string]int{}, faulted: map[string]string{}}
	c.on.Store(true)
	return c
}

// draw returns a number in [0, 1) from the seed, the name and salt.
func (c *chaos) draw(name string, salt int) float64 {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d|%s|%d", c.seed, name, salt))
	return float64(binary.BigEndian.Uint64(sum[:])>>11) / float64(1<<53)
}

// fault returns the fault for this ask of name among kinds ("" for none).
// A kind whose name ends in "!" is persistent.
func (c *chaos) fault(name string, kinds []string) string {
	if !c.on.Load() || len(kinds) == 0 {
		return ""
	}
	c.mu.Lock()
	n := c.asked[name]
	c.asked[name]++
	c.mu.Unlock()
	if c.draw(name, -1) >= c.rate {
		return ""
	}
	k := kinds[int(c.draw(name, -2)*float64(len(kinds)))]
	if !strings.HasSuffix(k, "!") && n > 0 {
		return "" // a transient fault: the first ask only
	}
	c.mu.Lock()
	c.counts[k]++
	c.faulted[name] = k
	c.mu.Unlock()
	return k
}

// addTo adds the faults injected, by kind, to kinds, and returns how
// many there were.
func (c *chaos) addTo(kinds map[string]int) (n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.counts {
		n += v
		kinds[k] += v
	}
	return n
}

// compareHeld reports every resource of want not held byte for byte in
// got (and returns how many: those lost), and every one held but not in
// want.
func compareHeld(t *testing.T, seed int, want, got map[string][]byte) (lost int) {
	t.Helper()
	for uri, b := range want {
		if !bytes.Equal(got[uri], b) {
			lost++
			t.Errorf("seed %d: %s not held as the source has it (%d bytes held, %d wanted)", seed, uri, len(got[uri]), len(b))
		}
	}
	for uri := range got {
		if _, ok := want[uri]; !ok {
			t.Errorf("seed %d: %s held, but not at the source", seed, uri)
		}
	}
	return lost
}

// respond writes rec's response with fault k applied to its body.
func respond(w http.ResponseWriter, rec *httptest.ResponseRecorder, k string) {
	body := rec.Body.Bytes()
	for h, vs := range rec.Header() {
		if h != "Content-Length" {
			w.Header()[h] = vs
		}
	}
	switch strings.TrimSuffix(k, "!") {
	case "503":
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	case "500":
		http.Error(w, "broken", http.StatusInternalServerError)
		return
	case "404":
		http.NotFound(w, nil)
		return
	case "truncate":
		// Cut short, with no length declared: the body just ends.
		w.WriteHeader(rec.Code)
		w.Write(body[:len(body)/2])
		return
	case "flip":
		body = bytes.Clone(body)
		if len(body) > 0 {
			body[len(body)/2] ^= 0x55
		}
	case "charref":
		// A character XML 1.0 forbids, as a reference, in the envelope.
		body = bytes.Replace(body, []byte("</request>"), []byte("&#x1A;</request>"), 1)
	case "badentry":
		// One entry of a ResourceSync document malformed (its lastmod),
		// its loc readable.
		body = bytes.Replace(body, []byte("<lastmod>"), []byte("<lastmod>x"), 1)
	case "broken":
		// One record's XML broken beyond repair.
		body = bytes.Replace(body, []byte("</dc:title>"), []byte("</dc:titel>"), 1)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rec.Code)
	w.Write(body)
}

// wrap serves next through the faults: kinds picks the kinds that apply
// to a request.
func (c *chaos) wrap(next http.Handler, kinds func(*http.Request) []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		name := r.URL.Path + "?" + r.Form.Encode()
		k := c.fault(name, kinds(r))
		if k == "" {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		respond(w, rec, k)
	})
}

// syncRun runs what `rsharvest sync` runs: a baseline when the state has
// no checkpoint for the source, else an incremental run.
func (h *harness) syncRun(ctx context.Context, opts pipeline.Options) *runreport.Report {
	h.t.Helper()
	has, err := h.store.HasCheckpoint(ctx, opts.Source)
	if err != nil {
		h.t.Fatal(err)
	}
	var rep *runreport.Report
	if has {
		rep, err = pipeline.Incremental(ctx, opts, pipeline.Range{})
	} else {
		rep, err = pipeline.Baseline(ctx, opts)
	}
	var se *pipeline.SourceError
	if err != nil && !errors.As(err, &se) {
		h.t.Fatalf("sync: %v", err)
	}
	if rep == nil {
		rep = &runreport.Report{Status: runreport.StatusFailed}
	}
	return rep
}

// seeds is how many seeded runs each property test makes.
func seeds() int {
	if n, err := strconv.Atoi(os.Getenv("RSHARVEST_PROPERTY_SEEDS")); err == nil && n > 0 {
		return n
	}
	if testing.Short() {
		return 8
	}
	return 40
}

// quickClient is a client that gives up soon: the faults are meant to
// outlast its retries.
func quickClient() *fetch.Client {
	return fetch.New(fetch.Options{Retries: 2, BackoffInitial: time.Millisecond, BackoffMax: 5 * time.Millisecond, StallTimeout: 5 * time.Second})
}

// TestCheckpointRuleOAIPMH is the checkpoint rule's property over the
// OAI-PMH planner and the executor: a repository whose lists, pages,
// windows and single records fail at random — temporarily and for the
// whole faulty phase, as 5xx, truncated bodies, pages not well-formed
// (a forbidden character reference; a record broken beyond repair) —
// harvested by a baseline and, after the repository changed, by a sync,
// both faulty, then by one clean sync, holds every record of the
// repository byte for byte, as a clean harvest does: no record was
// skipped by a checkpoint.
func TestCheckpointRuleOAIPMH(t *testing.T) {
	ctx := context.Background()
	var faults, lost, records int
	kindsSeen := map[string]int{}
	for seed := firstSeed(); seed < firstSeed()+seeds(); seed++ {
		repo := bench.NewOAIRepository(bench.OAIOptions{Records: 45, PageSize: 6})
		ch := newChaos(uint64(seed), chaosRate(0.3))
		srv := httptest.NewServer(ch.wrap(repo, func(r *http.Request) []string {
			switch r.Form.Get("verb") {
			case "ListRecords":
				return []string{"503", "500!", "truncate", "truncate!", "charref!", "broken!"}
			case "GetRecord":
				return []string{"503", "500!", "broken!", "truncate!"}
			}
			return nil
		}))
		opts := func(h *harness) pipeline.Options {
			o := h.options(srv.URL)
			o.Client = quickClient()
			o.Protocol = planned(&oaipmh.Planner{Client: o.Client, Concurrency: 2, Log: slog.New(slog.DiscardHandler)})
			return o
		}
		h := newHarness(t)
		r1 := h.syncRun(ctx, opts(h))
		repo.Advance()
		r2 := h.syncRun(ctx, opts(h))
		if os.Getenv("RSHARVEST_PROPERTY_DEBUG") != "" {
			t.Logf("seed %d run 1: %s %+v\n%v", seed, r1.Summary(), r1.Failures, ch.faulted)
			t.Logf("seed %d run 2: %s %+v", seed, r2.Summary(), r2.Failures)
		}
		ch.on.Store(false)
		if rep := h.syncRun(ctx, opts(h)); rep.Status != runreport.StatusOK {
			t.Errorf("seed %d: the clean sync: %s %+v", seed, rep.Summary(), rep.Failures)
		}
		ref := newHarness(t)
		if rep := ref.syncRun(ctx, opts(ref)); rep.Status != runreport.StatusOK {
			t.Fatalf("seed %d: the reference harvest: %s", seed, rep.Summary())
		}
		want := ref.held(ctx)
		records += len(want)
		lost += compareHeld(t, seed, want, h.held(ctx))
		faults += ch.addTo(kindsSeen)
		srv.Close()
	}
	t.Logf("OAI-PMH: %d seeds, %d faults injected %v, %d records in the end, %d lost", seeds(), faults, kindsSeen, records, lost)
}

// TestCheckpointRuleResourceSync is the same property over the
// ResourceSync planner and the executor: a source with a Resource Dump, a
// Resource List and a Change Dump, baselined from its dumps or its lists,
// then caught up from its Change Dump, with documents, packages and single
// resources failing at random — 5xx, truncated bodies, a malformed entry
// (of a list of resources, of a dump, of a manifest copy), flipped bytes
// (a package's or a resource's fixity), 404 — holds every resource of the
// source after one clean sync.
func TestCheckpointRuleResourceSync(t *testing.T) {
	ctx := context.Background()
	var faults, lost, resources int
	kindsSeen := map[string]int{}
	for seed := firstSeed(); seed < firstSeed()+seeds(); seed++ {
		src := t.TempDir()
		ch := newChaos(uint64(seed), chaosRate(0.25))
		// The resources are served as the source holds them at the step
		// published (a deleted one is gone), as a real source's are.
		var current atomic.Pointer[map[string][]byte]
		currentResources := func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				cur := current.Load()
				if cur == nil || !strings.HasPrefix(r.URL.Path, "/resources/") {
					next.ServeHTTP(w, r)
					return
				}
				b, ok := (*cur)[strings.TrimPrefix(r.URL.Path, "/")]
				if !ok {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Length", strconv.Itoa(len(b)))
				w.Write(b)
			})
		}
		wrap := func(next http.Handler) http.Handler {
			return ch.wrap(currentResources(next), func(r *http.Request) []string {
				switch {
				case r.Header.Get("Range") != "":
					return nil // a resume of a package: the fault was the first ask
				case strings.HasSuffix(r.URL.Path, ".zip"):
					return []string{"500!", "flip!", "truncate"}
				case strings.HasSuffix(r.URL.Path, ".xml"):
					if strings.Contains(r.URL.Path, "capabilitylist") || strings.Contains(r.URL.Path, "well-known") {
						return []string{"503", "truncate"}
					}
					return []string{"503", "503!", "truncate", "truncate!", "badentry!"}
				case strings.Contains(r.URL.Path, "/resources/"):
					return []string{"503", "404!", "flip!", "truncate!"}
				}
				return nil
			})
		}
		srv, err := bench.Serve(ctx, src, "127.0.0.1:0", bench.ServeOptions{Wrap: wrap})
		if err != nil {
			t.Fatal(err)
		}
		gen := bench.GenOptions{Dir: src, Base: srv.URL, Resources: 36, Packages: 3, Seed: int64(seed), MeanSize: 600, NoOddNames: true,
			WriteResources: true, ChangePackages: 2, ChangesPerPackage: 8, DeleteShare: 0.2, IndexThreshold: 2}
		if _, err := bench.Generate(ctx, gen); err != nil {
			t.Fatal(err)
		}
		h := newHarness(t)
		opts := h.options(srv.URL)
		opts.Client = quickClient()
		if seed%2 == 1 {
			opts.Settings.Options = map[string]string{"prefer": "list"}
		}
		publish := func(k int) map[string][]byte {
			srv.Handler.Publish(k)
			truth := map[string][]byte{}
			byPath := map[string][]byte{}
			if err := bench.TruthAfter(ctx, gen, k, func(uri string, body io.Reader) error {
				b, err := io.ReadAll(body)
				truth[uri], byPath[strings.TrimPrefix(uri, srv.URL)] = b, b
				return err
			}); err != nil {
				t.Fatal(err)
			}
			current.Store(&byPath)
			return truth
		}
		publish(1)
		r1 := h.syncRun(ctx, opts)
		want := publish(2)
		r2 := h.syncRun(ctx, opts)
		if os.Getenv("RSHARVEST_PROPERTY_DEBUG") != "" {
			t.Logf("seed %d run 1: %s %+v\n%v", seed, r1.Summary(), r1.Failures, ch.faulted)
			t.Logf("seed %d run 2: %s %+v", seed, r2.Summary(), r2.Failures)
			rs, _ := h.store.Retries(ctx, srv.URL, srv.URL+"capabilitylist.xml")
			t.Logf("seed %d retries: %+v", seed, rs)
		}
		ch.on.Store(false)
		opts.Settings.Options = nil
		// One clean sync; when the faulty runs never set a checkpoint it
		// is a baseline, which loads the Resource Dump's snapshot by
		// definition, and a second clean sync catches up.
		rep := h.syncRun(ctx, opts)
		if rep.Mode == "baseline" && rep.Status == runreport.StatusOK {
			rep = h.syncRun(ctx, opts)
		}
		if rep.Status != runreport.StatusOK {
			t.Errorf("seed %d: the clean sync: %s %+v", seed, rep.Summary(), rep.Failures)
		} else if os.Getenv("RSHARVEST_PROPERTY_DEBUG") != "" {
			t.Logf("seed %d clean: %s", seed, rep.Summary())
		}
		resources += len(want)
		lost += compareHeld(t, seed, want, h.held(ctx))
		faults += ch.addTo(kindsSeen)
		srv.Close()
	}
	t.Logf("ResourceSync: %d seeds, %d faults injected %v, %d resources in the end, %d lost", seeds(), faults, kindsSeen, resources, lost)
}

// chaosRate is def, or $RSHARVEST_CHAOS_RATE (to check the test itself
// with none).
func chaosRate(def float64) float64 {
	if r, err := strconv.ParseFloat(os.Getenv("RSHARVEST_CHAOS_RATE"), 64); err == nil {
		return r
	}
	return def
}

// firstSeed is 0, or $RSHARVEST_PROPERTY_SEED (to look at one seed).
func firstSeed() int {
	n, _ := strconv.Atoi(os.Getenv("RSHARVEST_PROPERTY_SEED"))
	return n
}
