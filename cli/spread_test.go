package cli

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/bench/harness"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// spreadSite adds the site "big" to the registry at pg: an OAI-PMH
// repository of records, served on 127.0.0.1 until t ends with 150 ms a
// response (each unit lasts a while, so that a fault finds one under
// way), spread over the daemons, into an fs sink declared shared. It
// returns the repository, its URL and the mirror's directory.
func spreadSite(t *testing.T, pg string, records int) (repo *bench.OAIRepository, source, mirror string) {
	t.Helper()
	repo = bench.NewOAIRepository(bench.OAIOptions{Records: records, PageSize: 10})
	slow := httptest.NewServer(harness.Wrap(0, 150*time.Millisecond)(repo))
	t.Cleanup(slow.Close)
	source, mirror = slow.URL+"/oai", filepath.Join(t.TempDir(), "mirror")
	if code, out, errb := run(t, "sites", "add", "big", "--source", source, "--protocol", "oai-pmh", "--sink", "fs:"+mirror+"?shared=1",
		"--every", "1d", "--spread", "--state", pg); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, errb)
	}
	return repo, source, mirror
}

// TestSpreadHarvest: a site with --spread, its registry in PostgreSQL,
// harvested by two daemons (processes): its harvest is divided into units
// (the OAI-PMH date windows), River jobs that both daemons execute; one
// daemon is killed with SIGKILL while it executes a unit, after it did
// others, and the other daemon does that unit again (--rescue-after);
// the checkpoint is set once, when the last unit has committed. Every
// record is in the mirror, each record's change recorded once. The next
// harvest (incremental) is spread too, and brings the repository's
// changes.
func TestSpreadHarvest(t *testing.T) {
	bin := crashBuildBinary(t)
	pg := pgDatabase(t, startPostgres(t), "spread")
	const records = 400
	repo, source, mirror := spreadSite(t, pg, records)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	start := func() *daemonProc {
		return startDaemon(t, ctx, bin, nil, "--state", pg, "--tick", "200ms", "--rescue-after", "1s", "--units", "2", "--listen", "", "--log-level", "info")
	}
	daemons := []*daemonProc{start(), start()}
	db, err := sql.Open("pgx", pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	// Kill a daemon that has done a unit and is executing another.
	var killed, survivor *daemonProc
	waitFor(t, "a daemon that did a unit executing another", func() bool {
		for i, d := range daemons {
			if !strings.Contains(d.out.String(), "unit done") {
				continue
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM leases WHERE key LIKE 'part %' AND holder LIKE $1", fmt.Sprintf(`%%"pid":%d,%%`, d.cmd.Process.Pid)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				killed, survivor = d, daemons[1-i]
				return true
			}
		}
		return false
	})
	killed.kill()
	waitFor(t, "the spread harvest finished by the other daemon", func() bool { return siteStatus(t, pg, "big") == "ok" })

	if n := countFiles(t, mirror); n != records {
		t.Errorf("the mirror holds %d records, want %d", n, records)
	}
	if !strings.Contains(survivor.out.String(), "unit done") {
		t.Errorf("the surviving daemon did no unit:\n%s", survivor.out.String())
	}
	var tasks, parts, done int
	if err := db.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM tasks WHERE closed = 1), (SELECT count(*) FROM task_parts), (SELECT count(*) FROM task_parts WHERE done = 1)").Scan(&tasks, &parts, &done); err != nil {
		t.Fatal(err)
	}
	t.Logf("units: %d; the killed daemon did %d, the other %d", parts, strings.Count(killed.out.String(), "unit done"), strings.Count(survivor.out.String(), "unit done"))
	if tasks != 1 || parts < 4 || done != parts {
		t.Errorf("%d tasks closed, %d of %d parts done; want 1 task, every part done (at least 4)", tasks, done, parts)
	}
	var changes, twice int
	if err := db.QueryRowContext(ctx, "SELECT count(*), count(*) - count(DISTINCT uri) FROM changes").Scan(&changes, &twice); err != nil {
		t.Fatal(err)
	}
	if changes != records || twice != 0 {
		t.Errorf("%d changes recorded, %d of them a second time; want %d, each once", changes, twice, records)
	}
	st, err := state.Open(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	set := "metadataPrefix=oai_dc"
	cp, ok, err := st.Checkpoint(ctx, source, set)
	if err != nil || !ok || !cp.Next.Equal(repo.Now()) {
		t.Errorf("checkpoint = %+v, %v, %v; want next %v", cp, ok, err, repo.Now())
	}
	// The site's run is the task's: the sum of its units, one killed.
	s, err := site.Registry{Store: st}.Site(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Run(ctx, s.LastRunID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(r.Report), `"written":`) || r.Site != "big" {
		t.Errorf("the site's run: %+v", r)
	}
	var interrupted int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM runs WHERE status = 'interrupted' AND site = ''").Scan(&interrupted); err != nil {
		t.Fatal(err)
	}
	if interrupted < 1 {
		t.Errorf("no unit's run marked interrupted: the killed daemon's")
	}

	// The next harvest is incremental, spread too.
	repo.Advance()
	if code, out, errb := run(t, "sites", "edit", "big", "--next", "now", "--state", pg); code != ExitOK {
		t.Fatalf("sites edit: exit %d\n%s%s", code, out, errb)
	}
	waitFor(t, "the incremental harvest", func() bool {
		cp, ok, err := st.Checkpoint(ctx, source, set)
		return err == nil && ok && cp.Next.Equal(repo.Now()) && siteStatus(t, pg, "big") == "ok"
	})
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM tasks WHERE closed = 1 AND mode = 'incremental'").Scan(&tasks); err != nil || tasks != 1 {
		t.Errorf("incremental tasks closed: %d, %v; want 1", tasks, err)
	}
	survivor.stop()
}

// TestSpreadResourceSync: a ResourceSync site spread over a daemon's units
// — its baseline divided into its packages, then its catch-up from the
// Change Dump into its change packages with their winners — leaves the
// mirror a sync of the same source in one process leaves, sets the
// checkpoint once the last unit has committed, and reads the source's
// documents once a harvest — each unit runs from its own plan — and each
// package once: a unit of a first load does not read its package by Range
// because other units have committed meanwhile.
func TestSpreadResourceSync(t *testing.T) {
	bin := crashBuildBinary(t)
	pg := pgDatabase(t, startPostgres(t), "spreadrs")
	srv := generatedSource(t, bench.GenOptions{Resources: 120, Packages: 6, Seed: 3, MeanSize: 1 << 10, ChangePackages: 3, ChangesPerPackage: 30, DeleteShare: 0.2}, bench.ServeOptions{})
	srv.Handler.Publish(0)
	dir := t.TempDir()
	spread, whole := filepath.Join(dir, "spread"), filepath.Join(dir, "whole")
	if code, out, errb := run(t, "sites", "add", "rs", "--source", srv.URL, "--protocol", "resourcesync", "--sink", "fs:"+spread+"?shared=1",
		"--every", "1d", "--spread", "--state", pg); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, errb)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	d := startDaemon(t, ctx, bin, nil, "--state", pg, "--tick", "200ms", "--units", "2", "--listen", "", "--log-level", "info")
	defer d.stop()
	db, err := sql.Open("pgx", pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	closed := func(mode string) int {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM tasks WHERE closed = 1 AND mode = $1", mode).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	sync := func() {
		t.Helper()
		if code, o, errb := run(t, "sync", "--source", srv.URL, "--sink", "fs:"+whole, "--state", filepath.Join(dir, "whole.db"), "--progress", "none"); code != ExitOK {
			t.Fatalf("sync: exit %d\n%s%s", code, o, errb)
		}
	}
	waitFor(t, "the spread baseline", func() bool { return closed("baseline") == 1 && siteStatus(t, pg, "rs") == "ok" })
	// Planned once: each unit ran from its own plan, not reading the
	// source's documents again.
	var seen map[string]int
	plannedOnce := func(what string) {
		t.Helper()
		now := srv.Handler.Stats().ByPath
		for p, n := range now {
			if n -= seen[p]; n > 1 && !strings.Contains(p, "manifest") {
				t.Errorf("the spread %s requested %s %d times, want once", what, p, n)
			}
		}
		seen = now
	}
	plannedOnce("baseline")
	sync()
	if got, want := treeSums(t, spread), treeSums(t, whole); len(want) != 120 || !maps.Equal(got, want) {
		t.Errorf("after the baseline the spread mirror holds %d files, one process's %d, not the same", len(got), len(want))
	}
	var parts int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM task_parts").Scan(&parts); err != nil || parts != 6 {
		t.Errorf("the baseline's units: %d, %v; want its 6 packages", parts, err)
	}

	srv.Handler.Publish(3)
	seen = srv.Handler.Stats().ByPath
	if code, o, errb := run(t, "sites", "edit", "rs", "--next", "now", "--state", pg); code != ExitOK {
		t.Fatalf("sites edit: exit %d\n%s%s", code, o, errb)
	}
	waitFor(t, "the spread catch-up", func() bool { return closed("incremental") == 1 && siteStatus(t, pg, "rs") == "ok" })
	plannedOnce("catch-up")
	sync()
	if got, want := treeSums(t, spread), treeSums(t, whole); !maps.Equal(got, want) {
		t.Errorf("after the catch-up the spread mirror holds %d files, one process's %d, not the same", len(got), len(want))
	}
	st, err := state.Open(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if ok, err := st.HasCheckpoint(ctx, srv.URL); err != nil || !ok {
		t.Errorf("no checkpoint after the spread harvests: %v, %v\n%s", ok, err, d.out.String())
	}
}

// treeSums maps every file under dir (but the sink's own) to its sha-256.
func treeSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			if d != nil && d.IsDir() && strings.HasPrefix(d.Name(), ".rsharvest") {
				return filepath.SkipDir
			}
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[strings.TrimPrefix(p, dir)] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}
