package daemon_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/rsharvest/rsharvest/daemon"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// storeWithSites is a fresh state store on a temporary file, holding sites
// (name → schedule), never harvested.
func storeWithSites(t *testing.T, sites map[string]string) *state.Store {
	t.Helper()
	ctx := context.Background()
	st, err := state.OpenExclusive(ctx, filepath.Join(t.TempDir(), "state.db"), "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for name, sched := range sites {
		if err := st.PutSite(ctx, state.Site{Name: name, Definition: "name: " + name + "\nschedule: " + sched + "\nsource: http://127.0.0.1:1/\nsinks: [fs:/tmp/x]\n"}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// TestStopWhileStarting: a stop (SIGTERM) that comes while the daemon
// starts is a stop asked for: Run returns nil.
func TestStopWhileStarting(t *testing.T) {
	st := storeWithSites(t, map[string]string{"a": "every 1d"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := daemon.Run(ctx, daemon.Options{Store: st, Tick: 100 * time.Millisecond,
		Harvest: func(ctx context.Context, s *site.Site) error { return nil }})
	if err != nil {
		t.Errorf("Run stopped by its context as it starts: %v, want nil", err)
	}
}

// TestDailyBesideTheSchedule: while the daily job runs (the composite
// report, whose mail may take minutes to give up, and the pruning of the
// harvest log), a site that comes due, and is asked for at once, is
// harvested.
func TestDailyBesideTheSchedule(t *testing.T) {
	ctx := context.Background()
	st := storeWithSites(t, map[string]string{"a": "every 1d"})
	start := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	if err := st.SiteHarvested(ctx, "a", start.Add(-time.Hour), "ok", 0); err != nil {
		t.Fatal(err)
	}
	var clock atomic.Pointer[time.Time]
	clock.Store(&start)
	dailyIn, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	harvested := make(chan string, 10)
	wake := make(chan struct{}, 1)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(runCtx, daemon.Options{Store: st, Tick: 100 * time.Millisecond, Wake: wake, Loc: time.UTC,
			Now: func() time.Time { return *clock.Load() },
			Harvest: func(ctx context.Context, s *site.Site) error {
				harvested <- s.Name
				return st.SiteHarvested(context.WithoutCancel(ctx), s.Name, *clock.Load(), "ok", 0)
			},
			Daily: func(ctx context.Context) error {
				once.Do(func() { close(dailyIn) })
				select { // the administrator's mail server is slow to answer
				case <-release:
				case <-ctx.Done():
				}
				return nil
			}})
	}()
	defer func() {
		close(release)
		stop()
		<-done
	}()
	<-dailyIn
	later := start.Add(48 * time.Hour) // site a is due
	clock.Store(&later)
	wake <- struct{}{} // and an operator asks for it at once
	select {
	case name := <-harvested:
		t.Logf("harvested %s", name)
	case <-time.After(time.Minute): // 600 ticks
		t.Errorf("site a, due (and asked for), not harvested while the daily job runs")
	}
}

// harvestJob is the daemon's harvest job, as River stores it.
type harvestJob struct {
	Site string `json:"site" river:"unique"`
}

func (harvestJob) Kind() string { return "rsharvest_harvest" }

// TestHarvestNowWhileRetryWaits: a site whose source was down has its
// harvest job waiting for River's backoff (256 s after a 4th failure).
// The operator fixes the source and asks for a harvest now (the site's
// next harvest set to now, the daemon woken): the waiting job is brought
// forward, and the site harvested at once.
func TestHarvestNowWhileRetryWaits(t *testing.T) {
	ctx := context.Background()
	st := storeWithSites(t, map[string]string{"a": "every 1d"})
	if err := st.SiteHarvested(ctx, "a", time.Now().Add(-time.Minute), "failed", 0); err != nil {
		t.Fatal(err)
	}
	// The job as River left it after the 4th failure: retryable, 256 s on.
	db, err := st.JobDB()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	driver := riversqlite.New(db)
	m, err := rivermigrate.New(driver, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatal(err)
	}
	ins, err := river.NewClient(driver, &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ins.Insert(ctx, harvestJob{Site: "a"}, &river.InsertOpts{Queue: "harvest", ScheduledAt: time.Now().Add(256 * time.Second),
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
			rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "UPDATE river_job SET state = 'retryable', attempt = 4 WHERE id = ?", res.Job.ID); err != nil {
		t.Fatal(err)
	}
	// The operator's "harvest now": the site due now, the daemon woken.
	if err := st.SetSiteNext(ctx, "a", time.Now()); err != nil {
		t.Fatal(err)
	}
	wake := make(chan struct{}, 1)
	wake <- struct{}{}
	harvested := make(chan string, 10)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(runCtx, daemon.Options{Store: st, Tick: 100 * time.Millisecond, Wake: wake,
			Harvest: func(ctx context.Context, s *site.Site) error {
				harvested <- s.Name
				return st.SiteHarvested(context.WithoutCancel(ctx), s.Name, time.Now(), "ok", 0)
			}})
	}()
	defer func() { stop(); <-done }()
	select {
	case <-harvested:
	case <-time.After(time.Minute): // 600 ticks, within the backoff
		t.Errorf("harvest now of site a, whose job waits for River's backoff: not harvested")
	}
}

// TestUnreadableSiteBesideOthers: a site whose definition cannot be read
// here keeps no other due site from being harvested.
func TestUnreadableSiteBesideOthers(t *testing.T) {
	st := storeWithSites(t, map[string]string{"a": "every 1d", "b": "CRON_TZ=Nowhere/Atlantis 0 3 * * *"})
	harvested := make(chan string, 10)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(runCtx, daemon.Options{Store: st, Tick: 100 * time.Millisecond,
			Harvest: func(ctx context.Context, s *site.Site) error {
				harvested <- s.Name
				return st.SiteHarvested(context.WithoutCancel(ctx), s.Name, time.Now(), "ok", 0)
			}})
	}()
	defer func() { stop(); <-done }()
	select {
	case name := <-harvested:
		if name != "a" {
			t.Errorf("harvested %s", name)
		}
	case <-time.After(time.Minute):
		t.Errorf("site a, due beside an unreadable site, not harvested")
	}
}
