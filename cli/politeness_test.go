package cli

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
)

// TestPolitenessAcrossWorkers: four daemons (processes) share a registry
// kept in PostgreSQL; its site asks for at most 4 requests a second. The
// origin counts the requests it receives in each second: never more than
// the site's rate, whichever daemons take the site's harvests (a site is
// harvested by one worker at a time, its lease, so its rate limit and
// connection cap hold for the whole cluster) — and when the site's harvest
// is spread over the daemons' units, at most one unit per slot of its
// task (a slot per daemon alive), each at its share of the rate.
func TestPolitenessAcrossWorkers(t *testing.T) {
	bin := crashBuildBinary(t)
	server := startPostgres(t)
	for _, tc := range []struct {
		name   string
		spread bool
	}{{"one worker at a time", false}, {"spread over the workers", true}} {
		t.Run(tc.name, func(t *testing.T) {
			politeness(t, bin, pgDatabase(t, server, "polite"+strconv.FormatBool(tc.spread)), tc.spread)
		})
	}
}

func politeness(t *testing.T, bin, pg string, spread bool) {
	const rate = 4
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: 60, PageSize: 5})
	var mu sync.Mutex
	var at []time.Time // when each request came
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		repo.ServeHTTP(w, r)
	}))
	defer origin.Close()
	mirror := filepath.Join(t.TempDir(), "mirror")
	args := []string{"sites", "add", "polite", "--source", origin.URL + "/oai", "--protocol", "oai-pmh", "--rate", "4",
		"--sink", "fs:" + mirror + "?shared=1", "--every", "1d", "--state", pg}
	if spread {
		args = append(args, "--spread")
	}
	if code, out, errb := run(t, args...); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, errb)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	for range 4 {
		d := startDaemon(t, ctx, bin, nil, "--state", pg, "--tick", "200ms", "--listen", "", "--log-level", "warn")
		defer d.stop()
	}
	waitFor(t, "the site harvested", func() bool { return siteStatus(t, pg, "polite") == "ok" })
	if spread {
		db, err := sql.Open("pgx", pg)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var parts int
		if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM task_parts WHERE done = 1").Scan(&parts); err != nil || parts < 4 {
			t.Errorf("the harvest's units done: %d, %v; want it spread", parts, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// The limiter is a bucket of rate tokens, refilled at rate a second:
	// between any two requests, those from the one to the other number at
	// most the bucket's burst and what it refilled meanwhile (one more for
	// the timers' jitter). Counting by calendar second instead splits the
	// first burst over a second's edge.
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	for i := range at {
		for j := i + 1; j < len(at); j++ {
			if n, limit := float64(j-i+1), rate+1+rate*at[j].Sub(at[i]).Seconds(); n > limit {
				t.Errorf("%.0f requests within %v from %v into the harvest: above the site's rate of %d a second (at most %.1f)",
					n, at[j].Sub(at[i]).Round(time.Millisecond), at[i].Sub(at[0]).Round(time.Millisecond), rate, limit)
				break
			}
		}
	}
	perSecond := map[int64]int{}
	for _, t := range at {
		perSecond[t.Unix()]++
	}
	t.Logf("requests per second: %v", perSecond)
	total := len(at)
	if total < 12 {
		t.Errorf("%d requests in all: the harvest did not run", total)
	}
	if n := countFiles(t, mirror); n != 60 {
		t.Errorf("the mirror holds %d records, want 60", n)
	}
}
