package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/bench/harness"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// TestDaemonsShareRegistry: two daemons (processes) on one registry kept
// in PostgreSQL harvest its sites between them, each site once; "run" from
// cron skips a site a daemon is harvesting (its lease); the daemon
// harvesting a site is killed with SIGKILL in the middle, and the other
// takes the harvest up (--rescue-after) and finishes it from where it
// stopped: every record in the mirror, no site harvested twice at once.
func TestDaemonsShareRegistry(t *testing.T) {
	bin := crashBuildBinary(t)
	pg := pgDatabase(t, startPostgres(t), "shared")
	dir := t.TempDir()
	const records, pageSize, holdAt = 200, 20, 4
	held := newHeldOAI(t, bench.NewOAIRepository(bench.OAIOptions{Records: records, PageSize: pageSize}), holdAt)
	sites := map[string]string{"held": held.URL + "/oai"}
	for i := range 3 {
		srv := httptest.NewServer(bench.NewOAIRepository(bench.OAIOptions{Records: 30 + i, PageSize: 10}))
		t.Cleanup(srv.Close)
		sites[fmt.Sprintf("quick%d", i)] = srv.URL + "/oai"
	}
	for name, u := range sites {
		if code, out, errb := run(t, "sites", "add", name, "--source", u, "--protocol", "oai-pmh", "--sink", "fs:"+filepath.Join(dir, name)+"?shared=1", "--every", "1d", "--state", pg); code != ExitOK {
			t.Fatalf("sites add %s: exit %d\n%s%s", name, code, out, errb)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	start := func() *daemonProc {
		return startDaemon(t, ctx, bin, nil, "--state", pg, "--tick", "200ms", "--rescue-after", "1s", "--listen", "", "--log-level", "warn")
	}
	daemons := []*daemonProc{start(), start()}
	waitFor(t, "the quick sites harvested and the held one's page held", func() bool {
		for name := range sites {
			if name != "held" && siteStatus(t, pg, name) != "ok" {
				return false
			}
		}
		return held.held() && len(readProgress(t, pg, sites["held"], "metadataPrefix=oai_dc")) > 0
	})

	// cron's run skips the site a daemon is harvesting.
	code, out, errb := run(t, "run", "held", "--state", pg)
	if code != ExitOK || !strings.Contains(out, "site held: skipped: site held is being harvested by pid") || !strings.Contains(out, "rsharvest daemon") {
		t.Errorf("run held while a daemon harvests it: exit %d\n%s%s", code, out, errb)
	}

	// Both daemons are workers alive; one harvests the held site.
	st, err := state.Open(t.Context(), pg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if workers, err := st.Workers(t.Context()); err != nil || workers != 2 {
		t.Errorf("workers alive: %d, %v; want two", workers, err)
	}

	// Kill the daemon holding the site's lease; the other takes it up.
	holder := leaseHolder(t, pg, state.SiteLease("held"))
	var killed, survivor *daemonProc
	for i, d := range daemons {
		if d.cmd.Process.Pid == holder.PID {
			killed, survivor = d, daemons[1-i]
		}
	}
	if killed == nil {
		t.Fatalf("the lease of site held is %+v: neither daemon's", holder)
	}
	killed.kill()
	held.free()
	waitFor(t, "the held site's harvest taken up by the other daemon and finished", func() bool { return siteStatus(t, pg, "held") == "ok" })
	survivor.stop()

	if !strings.Contains(survivor.out.String(), "site held:") {
		t.Errorf("the surviving daemon did not finish site held:\n%s", survivor.out.String())
	}
	for name, want := range map[string]int{"held": records, "quick0": 30, "quick1": 31, "quick2": 32} {
		if n := countFiles(t, filepath.Join(dir, name)); n != want {
			t.Errorf("the mirror of %s holds %d records, want %d", name, n, want)
		}
	}
	// Each quick site harvested once; the held one twice (killed, then
	// taken up), never at the same time.
	runs, err := st.Runs(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string][]state.Run{}
	for _, r := range runs {
		count[r.Site] = append(count[r.Site], r)
	}
	for name := range sites {
		want := 1
		if name == "held" {
			want = 2
		}
		if len(count[name]) != want {
			t.Errorf("site %s: %d runs, want %d: %+v", name, len(count[name]), want, count[name])
		}
	}
	if h := count["held"]; len(h) == 2 && (h[1].Status != state.StatusInterrupted || h[1].Finished.After(h[0].Started)) {
		t.Errorf("site held's runs overlap or the killed one is not interrupted: %+v", h)
	}
}

// leaseHolder reads who holds lease key in the store kept in the database
// at pg.
func leaseHolder(t *testing.T, pg, key string) state.Holder {
	t.Helper()
	db, err := sql.Open("pgx", pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var b []byte
	if err := db.QueryRowContext(t.Context(), "SELECT holder FROM leases WHERE key = $1", key).Scan(&b); err != nil {
		t.Fatalf("lease %s: %v", key, err)
	}
	var h state.Holder
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestDaemonPostgresRestart: PostgreSQL restarted in the middle of a
// harvest (every session ended, the server away for a second): the
// daemon reconnects, its harvest — failed for the lost connection, a
// temporary failure — is tried again, resumes from its progress marks and
// finishes; every record is in the mirror.
func TestDaemonPostgresRestart(t *testing.T) {
	server, pg := restartablePostgres(t, "restart")
	const records = 400
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: records, PageSize: 10})
	// A slow server: the harvest lasts several seconds.
	slow := httptest.NewServer(harness.Wrap(0, 300*time.Millisecond)(repo))
	defer slow.Close()
	source := slow.URL + "/oai"
	mirror := filepath.Join(t.TempDir(), "mirror")
	if code, out, errb := run(t, "sites", "add", "held", "--source", source, "--protocol", "oai-pmh", "--sink", "fs:"+mirror+"?shared=1", "--every", "1d", "--state", pg); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, errb)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan int, 1)
	out, errb := &syncBuffer{}, &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the daemon's output:\n%s%s", out.String(), errb.String())
		}
	})
	go func() {
		done <- Main(ctx, []string{"daemon", "--state", pg, "--tick", "200ms", "--listen", ""}, out, errb)
	}()
	waitFor(t, "a progress mark committed", func() bool {
		return len(readProgress(t, pg, source, "metadataPrefix=oai_dc")) > 0
	})
	if err := server.Restart(t.Context(), time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the harvest tried again and finished", func() bool { return siteStatus(t, pg, "held") == "ok" })
	stopDaemon(t, cancel, done, out, errb)
	if n := countFiles(t, mirror); n != records {
		t.Errorf("the mirror holds %d records, want %d\n%s", n, records, errb.String())
	}
	st, err := state.Open(t.Context(), pg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.Runs(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	// The harvest taken up wrote only what the first had not committed.
	if len(runs) < 2 || runs[0].Status != "ok" {
		t.Fatalf("runs %+v: want an ok run after the one the restart ended", runs)
	}
	var rep runreport.Report
	if err := json.Unmarshal(runs[0].Report, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Resources.Written == 0 || rep.Resources.Written+rep.Resources.Unchanged >= records {
		t.Errorf("the harvest tried again: %d written, %d unchanged of %d: not resumed", rep.Resources.Written, rep.Resources.Unchanged, records)
	}
	t.Logf("%d runs; the last wrote %d, found %d unchanged", len(runs), rep.Resources.Written, rep.Resources.Unchanged)
}

// TestSpreadPostgresRestart: PostgreSQL restarted in the middle of a
// spread harvest (every session ended, the server away for a second),
// while two daemons execute its units: the daemons reconnect, the units
// and the harvest waiting for them fail as temporary failures and are
// tried again, the harvest takes up its task left open, and every unit is
// done once; every record is in the mirror, each change recorded once,
// the checkpoint set.
func TestSpreadPostgresRestart(t *testing.T) {
	bin := crashBuildBinary(t)
	server, pg := restartablePostgres(t, "spreadrestart")
	const records = 400
	repo, source, mirror := spreadSite(t, pg, records)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	var daemons []*daemonProc
	for range 2 {
		daemons = append(daemons, startDaemon(t, ctx, bin, nil, "--state", pg, "--tick", "200ms", "--rescue-after", "1s", "--units", "2", "--listen", "", "--log-level", "info"))
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, d := range daemons {
				t.Logf("daemon %d:\n%s", i, d.out.String())
			}
		}
	})
	unitsDone := func() int {
		n := 0
		for _, d := range daemons {
			n += strings.Count(d.out.String(), "unit done")
		}
		return n
	}
	waitFor(t, "a unit done", func() bool { return unitsDone() > 0 })
	if err := server.Restart(t.Context(), time.Second); err != nil {
		t.Fatal(err)
	}
	before := unitsDone()
	var status string
	for deadline := time.Now().Add(3 * time.Minute); status != "ok"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the spread harvest did not finish after the restart (status %q)", status)
		}
		st, err := state.Open(ctx, pg)
		if err != nil {
			continue // the server is still away
		}
		if s, err := (site.Registry{Store: st}).Site(ctx, "big"); err == nil {
			status = s.LastStatus
		}
		st.Close()
	}
	for _, d := range daemons {
		d.stop()
	}
	t.Logf("%d units done before the restart, %d in all", before, unitsDone())
	if before >= unitsDone() {
		t.Errorf("no unit done after the restart: %d before, %d in all", before, unitsDone())
	}
	if n := countFiles(t, mirror); n != records {
		t.Errorf("the mirror holds %d records, want %d", n, records)
	}
	db, err := sql.Open("pgx", pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tasks, parts, done, changes, twice int
	if err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM tasks WHERE closed = 1), (SELECT count(*) FROM task_parts),
		(SELECT count(*) FROM task_parts WHERE done = 1), (SELECT count(*) FROM changes), (SELECT count(*) - count(DISTINCT uri) FROM changes)`).
		Scan(&tasks, &parts, &done, &changes, &twice); err != nil {
		t.Fatal(err)
	}
	if tasks != 1 || done != parts || changes != records || twice != 0 {
		t.Errorf("%d tasks closed, %d of %d parts done, %d changes (%d twice); want 1 task, every part done, %d changes each once", tasks, done, parts, changes, twice, records)
	}
	st, err := state.Open(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if cp, ok, err := st.Checkpoint(ctx, source, "metadataPrefix=oai_dc"); err != nil || !ok || !cp.Next.Equal(repo.Now()) {
		t.Errorf("checkpoint = %+v, %v, %v; want next %v", cp, ok, err, repo.Now())
	}
}
