package harvest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/daemon"
	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/internal/testbin"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/site"
	src "github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// heldSink is an fs sink whose first Put of a URI containing victim
// takes the body, says so on taken, and stores it only once release
// is closed.
type heldSink struct {
	sink.Sink
	victim  string
	first   *sync.Once
	taken   chan<- struct{}
	release <-chan struct{}
	putDone func(uri string)
}

func (s *heldSink) Put(ctx context.Context, r *sink.Resource, body io.Reader) error {
	if strings.Contains(r.URI, s.victim) {
		held := false
		s.first.Do(func() { held = true })
		if held {
			b, err := io.ReadAll(body)
			if err != nil {
				return err
			}
			s.taken <- struct{}{}
			<-s.release
			return s.Sink.Put(ctx, r, bytes.NewReader(b))
		}
		defer s.putDone(r.URI)
	}
	return s.Sink.Put(ctx, r, body)
}

// watchHandler discards every log record, and closes seen at the first
// whose message is msg.
type watchHandler struct {
	msg  string
	seen chan struct{}
	once *sync.Once
}

func (w *watchHandler) Enabled(context.Context, slog.Level) bool { return true }

func (w *watchHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == w.msg {
		w.once.Do(func() { close(w.seen) })
	}
	return nil
}

func (w *watchHandler) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *watchHandler) WithGroup(string) slog.Handler      { return w }

// TestAbandonedTaskWaitsForUnitsInFlight: a spread harvest was left
// unfinished (its waiting harvest stopped) while a daemon executes one of
// its units, and the site is then harvested whole (`run` from cron, which
// queues no units). The unit read a record before the source changed it;
// the whole harvest waits for the unit to stop before it writes, so the
// unit's older version never lands over the newer one the state records.
func TestAbandonedTaskWaitsForUnitsInFlight(t *testing.T) {
	ctx := t.Context()
	pg, stop, err := testbin.Postgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: 20, PageSize: 10})
	srv := httptest.NewServer(repo)
	defer srv.Close()
	mirror := filepath.Join(t.TempDir(), "mirror")
	st, err := state.Open(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sites, err := config.DecodeSites(strings.NewReader(`sites:
  - name: oai
    source: `+srv.URL+`/oai
    protocol: oai-pmh
    sinks: ["fs:`+mirror+`?shared=1"]
    schedule: every 1d
`), "sites.yaml", harvest.Settings(), harvest.SiteTargets)
	if err != nil {
		t.Fatal(err)
	}
	reg := site.Registry{Store: st}
	if _, err := reg.Apply(ctx, sites, true); err != nil {
		t.Fatal(err)
	}

	const victim = "0000005" // updated by the repository's next revision
	var (
		first        sync.Once
		taken        = make(chan struct{}, 1)
		release      = make(chan struct{})
		releaseOnce  sync.Once
		wholeVictim  = make(chan struct{})
		wholePutOnce sync.Once
	)
	open := func(ctx context.Context, arg string) (sink.Sink, error) {
		s, err := fs.Open(ctx, arg)
		if err != nil {
			return nil, err
		}
		return &heldSink{Sink: s, victim: victim, first: &first, taken: taken, release: release,
			putDone: func(string) { wholePutOnce.Do(func() { close(wholeVictim) }) }}, nil
	}
	waiting := &watchHandler{msg: "waiting for a unit of the abandoned harvest to stop", seen: make(chan struct{}), once: &sync.Once{}}
	h := &harvest.Harvester{Store: st, Sinks: sink.Registry{"fs": open}, Log: slog.New(waiting)}

	// The spread task, as a daemon divides it.
	s, err := reg.Site(ctx, "oai")
	if err != nil {
		t.Fatal(err)
	}
	j, err := harvest.SiteJob(s)
	if err != nil {
		t.Fatal(err)
	}
	opts, closeSinks, err := h.Options(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	d, err := pipeline.Divide(ctx, opts, src.Baseline, pipeline.Range{})
	if err != nil || d == nil {
		t.Fatalf("Divide: %+v, %v", d, err)
	}
	defer d.Close()
	closeSinks(ctx)
	run, err := st.BeginRun(ctx, state.Run{Mode: "baseline", Source: s.Source(), Site: s.Name})
	if err != nil {
		t.Fatal(err)
	}
	task := state.Task{Source: s.Source(), Site: s.Name, Mode: "baseline", RunID: run, Checkpoints: d.Checkpoints, Fresh: true}
	if task.ID, err = st.CreateTask(ctx, task, d.Parts, d.Plan, nil); err != nil {
		t.Fatal(err)
	}

	// A daemon executes the unit of the first part (the records), and
	// is delivering the victim's version 0.
	unitErr := make(chan error, 1)
	go func() {
		unitErr <- h.Unit(context.WithoutCancel(ctx), daemon.Unit{Site: s.Name, Task: task.ID, Part: d.Parts[0]}, false)
	}()
	select {
	case <-taken:
	case err := <-unitErr:
		t.Fatalf("the unit ended before delivering the victim: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the unit never delivered the victim")
	}
	// The unit goes on once the whole harvest waits for it (or, should
	// it not, once it delivered the victim).
	go func() {
		select {
		case <-wholeVictim:
		case <-waiting.seen:
		}
		releaseOnce.Do(func() { close(release) })
	}()

	// The source changes; the site is harvested whole (no units queued).
	repo.Advance()
	rep, err := h.Run(ctx, harvest.Sync, j)
	if err != nil {
		t.Fatalf("the whole harvest: %v", err)
	}
	t.Logf("the whole harvest: %s", rep.Summary())
	releaseOnce.Do(func() { close(release) })
	if err := <-unitErr; err != nil {
		t.Logf("the unit: %v", err)
	}

	// The mirror holds what the state records.
	inv, err := fs.New(mirror, fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close(ctx)
	var uri string
	if err := inv.Walk(ctx, func(u string) error {
		if strings.Contains(u, victim) {
			uri = u
		}
		return nil
	}); err != nil || uri == "" {
		t.Fatalf("the victim is not in the mirror (%v)", err)
	}
	rc, err := inv.Get(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	res, ok, err := st.Resource(ctx, j.Key(), uri)
	if err != nil || !ok {
		t.Fatalf("the victim's record in the state: %v, %v", ok, err)
	}
	sum := sha256.Sum256(body)
	if !bytes.Equal(sum[:], res.Hashes.SHA256) {
		title := body
		if i := bytes.Index(body, []byte("Record 5")); i >= 0 {
			title = body[i:min(len(body), i+len("Record 5, version 1"))]
		}
		t.Errorf("the mirror's %s (%q) is not the version the state records (its sha-256 %x, run %d)", uri, title, res.Hashes.SHA256, res.RunID)
	}
}
