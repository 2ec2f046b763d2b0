package harvest_test

import (
	"cmp"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/daemon"
	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// runDaemon runs h's daemon with o until the test ends (or stop is
// called), its schedule quick: a tick of 200 ms.
func runDaemon(t *testing.T, h *harvest.Harvester, o harvest.DaemonOptions) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o.Schedule.Tick = cmp.Or(o.Schedule.Tick, 200*time.Millisecond)
	o.Schedule.SitesConcurrency = cmp.Or(o.Schedule.SitesConcurrency, 2)
	o.Command = "rsharvest daemon (test)"
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := h.Daemon(ctx, o); err != nil && ctx.Err() == nil {
			t.Errorf("daemon: %v", err)
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// siteRuns is how many runs of site the harvest log holds.
func siteRuns(t *testing.T, st *state.Store, name string) int {
	t.Helper()
	runs, err := st.RunsSince(context.Background(), time.Time{}, name)
	if err != nil {
		t.Fatal(err)
	}
	return len(runs)
}

// TestDaemonNoSecondHarvestWhilePublishing: after a site's harvest the
// daemon republishes (DaemonOptions.Publish) and sends its report, its job
// still running. The daemons' rescue takes a running harvest job whose
// site lease is free for a dead worker's; the lease is held until the job
// ends, so the site, harvested a moment ago and not due, is not harvested
// a second time.
func TestDaemonNoSecondHarvestWhilePublishing(t *testing.T) {
	srv, _ := source(t)
	st, _ := registry(t, `sites:
  - name: demo
    source: `+srv.URL+`
    sinks: [fs:`+filepath.Join(t.TempDir(), "mirror")+`]
    schedule: every 1d
`)
	h := &harvest.Harvester{Store: st, Sinks: sink.Registry{"fs": fs.Open}, Log: slog.New(slog.DiscardHandler)}
	var published atomic.Int32
	stop := runDaemon(t, h, harvest.DaemonOptions{
		Schedule: daemon.Options{RescueAfter: rescueAfter},
		Publish: func(ctx context.Context) error {
			if published.Add(1) == 1 {
				// A republication that takes a while (a large set).
				select {
				case <-ctx.Done():
				case <-time.After(3 * time.Second):
				}
			}
			return nil
		},
	})
	deadline := time.Now().Add(20 * time.Second)
	for published.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if published.Load() == 0 {
		t.Fatal("the site was never harvested")
	}
	time.Sleep(5 * time.Second) // the publication, then time for a second harvest
	stop()
	if n := siteRuns(t, st, "demo"); n != 1 {
		t.Errorf("site demo, due once (every 1d), was harvested %d times: its job was rescued while the harvest was publishing", n)
	}
}

// TestDaemonPausedSiteNotRetried: a site whose harvest failed temporarily
// is paused by its operator; River's retry of its harvest job finds it
// paused and does not harvest it.
func TestDaemonPausedSiteNotRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/"
	ln.Close() // connection refused: a temporary failure (fetch.ErrUnreachable)
	st, reg := registry(t, `sites:
  - name: down
    source: `+down+`
    sinks: [fs:`+filepath.Join(t.TempDir(), "m")+`]
    schedule: every 1d
`)
	h := &harvest.Harvester{Store: st, Sinks: sink.Registry{"fs": fs.Open}, Log: slog.New(slog.DiscardHandler)}
	var harvested atomic.Int32
	stop := runDaemon(t, h, harvest.DaemonOptions{
		Done: func(s *site.Site, rep *runreport.Report, err, recordErr error) {
			if harvested.Add(1) == 1 {
				// The operator pauses the failing site.
				if err := reg.Pause(context.Background(), s.Name); err != nil {
					t.Error(err)
				}
			}
		},
	})
	time.Sleep(12 * time.Second) // River's first retry: about 1 s, then its scheduler
	stop()
	if n := harvested.Load(); n != 1 {
		t.Errorf("paused site harvested %d times, want 1 (the harvest before the pause)", n)
	}
}

// TestEditDuringHarvestKeepsNext: "sites edit" makes a site due at once
// (its Next set to now). Edited while a harvest of its old definition
// runs, the site stays due at once when that harvest ends: SiteHarvested
// clears only an explicit next harvest set before the harvest began.
func TestEditDuringHarvestKeepsNext(t *testing.T) {
	srv, _ := source(t)
	target, _ := url.Parse(srv.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	_, reg, done, release := heldHarvest(t, proxy, target.Path)
	ctx := context.Background()
	// The operator edits the site meanwhile (sites edit: due at once).
	ns, err := reg.Site(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	ns.Contact = "new@example.org"
	edited := time.Now().UTC()
	ns.Next = edited
	if err := reg.Put(ctx, ns); err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("harvest: %v", err)
	}
	after, err := reg.Site(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	if after.Contact != "new@example.org" {
		t.Fatalf("the edit is lost: contact %q", after.Contact)
	}
	if next := after.NextHarvest(time.Local); next.After(edited.Add(time.Minute)) {
		t.Errorf("site edited during a harvest of its old definition: next harvest %v, want the edit's (%v, due at once)", next, edited)
	}
}

// heldHarvest starts a harvest of site "demo", whose source answer
// serves at path on 127.0.0.1 but holds the first request until release
// is called, and returns once that request came: the harvester, the
// registry, and where the harvest's error comes.
func heldHarvest(t *testing.T, answer http.Handler, path string) (*harvest.Harvester, site.Registry, <-chan error, func()) {
	t.Helper()
	entered, release := make(chan struct{}), make(chan struct{})
	var first, freed sync.Once
	free := func() { freed.Do(func() { close(release) }) }
	t.Cleanup(free)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first.Do(func() { close(entered); <-release })
		answer.ServeHTTP(w, r)
	})}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	st, reg := registry(t, `sites:
  - name: demo
    source: http://`+ln.Addr().String()+path+`
    sinks: [fs:`+filepath.Join(t.TempDir(), "mirror")+`]
    schedule: every 1d
`)
	h := &harvest.Harvester{Store: st, Sinks: sink.Registry{"fs": fs.Open}, Log: slog.New(slog.DiscardHandler)}
	s, err := reg.Site(context.Background(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := h.One(context.Background(), s, "", nil, nil, nil); done <- err }()
	<-entered
	return h, reg, done, free
}

// rescueAfter is the daemons' RescueAfter in these tests: a harvest job
// running longer is looked at as a dead worker's.
const rescueAfter = 300 * time.Millisecond
