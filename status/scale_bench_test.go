package status_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/internal/testbin"
	"github.com/rsharvest/rsharvest/state"
	"github.com/rsharvest/rsharvest/status"
)

// scaleStore builds, at where (a file, or a PostgreSQL URL), a registry of
// sites sites and a harvest log of runs runs (runs/sites each, the last
// of each site recorded as its last harvest; every 50th site failing,
// every 7th due, every 97th paused), writing the runs directly with SQL:
// what years of harvests leave.
func scaleStore(b testing.TB, where, driver string, sites, runs int) {
	b.Helper()
	ctx := context.Background()
	st, err := state.Open(ctx, where)
	if err != nil {
		b.Fatal(err)
	}
	st.Close()
	db, err := sql.Open(driver, where)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ph := func(n int) string { // placeholders of a row of n values
		if driver == "sqlite" {
			return "?"
		}
		return "$" + strconv.Itoa(n)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	insRun, err := tx.PrepareContext(ctx, fmt.Sprintf("INSERT INTO runs (id, mode, source, status, started, finished, report, site) VALUES (%s, 'incremental', %s, %s, %s, %s, %s, %s)",
		ph(1), ph(2), ph(3), ph(4), ph(5), ph(6), ph(7)))
	if err != nil {
		b.Fatal(err)
	}
	insSite, err := tx.PrepareContext(ctx, fmt.Sprintf("INSERT INTO sites (name, definition, next, last, last_status, last_run_id, updated, paused) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
		ph(1), ph(2), ph(3), ph(4), ph(5), ph(6), ph(7), ph(8)))
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now().Add(-time.Duration(runs/sites) * 24 * time.Hour).UTC()
	const layout = "2006-01-02T15:04:05.000000000Z"
	per := runs / sites
	id := 0
	for i := range sites {
		name := fmt.Sprintf("site-%05d", i)
		src := "http://127.0.0.1:1/" + name + "/"
		last, lastStatus := t0, "ok"
		for k := range per {
			id++
			status := "ok"
			if i%50 == 0 && k == per-1 {
				status = "failed"
			}
			started := t0.Add(time.Duration(k) * 24 * time.Hour)
			report := fmt.Sprintf(`{"mode":"incremental","status":%q,"resources":{"written":%d,"deleted":1,"unchanged":100,"failed":0},"bytes":{"written":%d}}`, status, k%13, 4096*(k%13))
			if _, err := insRun.ExecContext(ctx, id, src, status, started.Format(layout), started.Add(time.Minute).Format(layout), report, name); err != nil {
				b.Fatal(err)
			}
			last, lastStatus = started, status
		}
		var next any
		if i%7 == 0 {
			next = time.Now().Add(-time.Hour).UTC().Format(layout) // due
		}
		def := "name: " + name + "\nschedule: every 1d\nsource: " + src + "\nsinks:\n    - fs:/srv/rsharvest/" + name + "\n"
		if _, err := insSite.ExecContext(ctx, name, def, next, last.Format(layout), lastStatus, id, last.Format(layout), boolInt(i%97 == 0)); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	if driver == "pgx" {
		if _, err := db.ExecContext(ctx, "SELECT setval(pg_get_serial_sequence('runs', 'id'), $1)", id); err != nil {
			b.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
			b.Fatal(err)
		}
	} else if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
		b.Fatal(err)
	}
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

// BenchmarkScale: the status page, a site's page and /metrics, with a
// registry of RSHARVEST_SCALE_SITES sites (10,000) and a harvest log of
// RSHARVEST_SCALE_RUNS runs (1,000,000), on SQLite and on PostgreSQL:
// each request's server time (ms/op) and the bytes it answers.
func BenchmarkScale(b *testing.B) {
	sites, runs := envInt(b, "RSHARVEST_SCALE_SITES", 10_000), envInt(b, "RSHARVEST_SCALE_RUNS", 1_000_000)
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			where, driver := filepath.Join(b.TempDir(), "state.db"), "sqlite"
			if kind == "postgres" {
				server, stop, err := testbin.Postgres(b.Context())
				if err != nil {
					b.Fatal(err)
				}
				defer stop()
				where, driver = server, "pgx"
			}
			built := time.Now()
			scaleStore(b, where, driver, sites, runs)
			b.Logf("%s: %d sites, %d runs built in %s", kind, sites, runs, time.Since(built).Round(time.Millisecond))
			st, err := state.Open(b.Context(), where)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			h, err := status.Handler(status.Options{Store: st, Operator: status.Credentials{Token: "t"}})
			if err != nil {
				b.Fatal(err)
			}
			for _, page := range []string{"/", "/site/site-00050", "/metrics"} {
				b.Run(page, func(b *testing.B) {
					var n int
					for b.Loop() {
						rec := httptest.NewRecorder()
						req := httptest.NewRequest(http.MethodGet, page, nil)
						req.Header.Set("Authorization", "Bearer t")
						h.ServeHTTP(rec, req)
						if rec.Code != http.StatusOK {
							b.Fatalf("%s: %d %s", page, rec.Code, rec.Body.String()[:min(rec.Body.Len(), 300)])
						}
						n = rec.Body.Len()
					}
					b.ReportMetric(float64(n), "bytes")
				})
			}
			b.Run("prune", func(b *testing.B) { benchPrune(b, st) })
		})
	}
}

// benchPrune thins the harvest log to its last 90 days once (the log of
// scaleStore spans a day a run), while a writer records a log line every
// 10 ms: it reports the prune's time, the runs thinned, and the longest
// the writer waited for a line (what a harvest's commit would).
func benchPrune(b *testing.B, st *state.Store) {
	ctx := b.Context()
	stop := make(chan struct{})
	var (
		worst time.Duration
		lines int
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			t0 := time.Now()
			if err := st.AddEvent(ctx, state.Event{Operation: "bench", Message: "a line while pruning"}); err != nil {
				b.Error(err)
				return
			}
			worst, lines = max(worst, time.Since(t0)), lines+1
		}
	})
	t0 := time.Now()
	p, err := st.PruneLog(ctx, state.LogKeep{Age: 90 * 24 * time.Hour}, time.Now(), 0)
	took := time.Since(t0)
	close(stop)
	wg.Wait()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
	}
	b.ReportMetric(took.Seconds(), "prune-s")
	b.ReportMetric(float64(p.Runs), "runs-thinned")
	b.ReportMetric(float64(worst.Microseconds())/1000, "writer-max-ms")
	b.ReportMetric(float64(lines), "writer-lines")
}

func envInt(b *testing.B, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("%s=%q: %v", name, v, err)
		}
		return n
	}
	return def
}
