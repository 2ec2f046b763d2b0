package cli

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// TestRunDue: run --due harvests every due site of the registry — a
// ResourceSync source by its dumps, one by its lists, an OAI-PMH
// repository, and one that cannot be reached — at once, each on its own:
// the broken one fails alone (exit 1), the others hold every resource,
// and each site's harvest is recorded with its next harvest derived. Run
// again, nothing is due; run SITE harvests that site now.
func TestRunDue(t *testing.T) {
	dumps := generatedSource(t, bench.GenOptions{Resources: 40, Packages: 2, Seed: 3, MeanSize: 1 << 10}, bench.ServeOptions{})
	lists := generatedSource(t, bench.GenOptions{Resources: 30, Packages: 1, Seed: 4, MeanSize: 1 << 10, WriteResources: true}, bench.ServeOptions{})
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: 25, PageSize: 7})
	oai := httptest.NewServer(repo)
	defer oai.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	registry := filepath.Join(dir, "sites.yaml")
	err := os.WriteFile(registry, []byte(`sites:
  - {name: dumps, source: "`+dumps.URL+`", sinks: [fs:dumps], schedule: every 1d}
  - {name: lists, source: "`+lists.URL+`", prefer: list, sinks: [fs:lists], schedule: every 1d}
  - {name: oai, source: "`+oai.URL+`/oai", protocol: oai-pmh, sinks: [fs:oai], schedule: every 2w}
  - {name: broken, source: "http://127.0.0.1:1/resourcesync.xml", retries: 0, sinks: [fs:broken], schedule: every 1d}
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := run(t, "sites", "apply", registry, "--state", db); code != ExitOK {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr := run(t, "run", "--due", "--sites-concurrency", "3", "--state", db)
	if code != ExitPartial {
		t.Fatalf("run --due: exit %d, want %d\n%s%s", code, ExitPartial, out, stderr)
	}
	for _, name := range []string{"dumps", "lists", "oai", "broken"} {
		if !strings.Contains(out, "site "+name+": ") {
			t.Errorf("no summary of site %s:\n%s", name, out)
		}
	}
	// The lists name only the resources whose URIs can be file names.
	resp, err := http.Get(lists.URL + "resourcelist.xml")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	listed := strings.Count(string(body), "<url>")
	for name, want := range map[string]int{"dumps": 40, "lists": listed, "oai": 25} {
		if n := countFiles(t, filepath.Join(dir, name)); n != want {
			t.Errorf("site %s: %d files, want %d\n%s", name, n, want, out)
		}
	}
	st, err := state.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	sites, err := site.Registry{Store: st}.Sites(t.Context())
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sites {
		want, next := "ok", s.When.Next(s.Last, nil)
		if s.Name == "broken" {
			// Due again soon, not a period later (issue 30).
			want, next = "failed", s.RetryAfter(s.Last, 1, nil)
		}
		if s.LastStatus != want || s.Last.IsZero() || !s.NextHarvest(nil).Equal(next) {
			t.Errorf("site %s: last %v (%s), next %v; want status %s, next %v", s.Name, s.Last, s.LastStatus, s.NextHarvest(nil), want, next)
		}
	}
	if code, out, stderr := run(t, "run", "--due", "--state", db); code != ExitOK || !strings.Contains(out, "no site is due") {
		t.Errorf("run --due again: exit %d\n%s%s", code, out, stderr)
	}
	repo.Advance()
	if code, out, stderr := run(t, "run", "oai", "--state", db); code != ExitOK || !strings.Contains(out, "site oai: incremental") {
		t.Errorf("run oai: exit %d\n%s%s", code, out, stderr)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "zz"}, `site "zz": no such site`},
		{[]string{"run"}, "name the sites to harvest, or give --due"},
		{[]string{"run", "oai", "--due"}, "name the sites to harvest, or give --due"},
	} {
		if code, out, stderr := run(t, append(tc.args, "--state", db)...); code != ExitUsage || !strings.Contains(out+stderr, tc.want) {
			t.Errorf("%v: exit %d\n%s%s", tc.args, code, out, stderr)
		}
	}
}

// countFiles counts the files under dir, the fs sink's own directories
// left out.
func countFiles(t testing.TB, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".rsharvest") {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			n++
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return n
}

// TestMaxDeleteCommand: "sync --max-delete" stops a catch-up that would
// delete more than it allows before it deletes anything, exit 1, saying
// why and how many it would have deleted — a dry run too, after printing
// its whole plan; a larger bound lets it through.
func TestMaxDeleteCommand(t *testing.T) {
	srv := generatedSource(t, bench.GenOptions{Resources: 120, Packages: 2, Seed: 8, MeanSize: 1 << 10, ChangePackages: 2, ChangesPerPackage: 40, DeleteShare: 0.3}, bench.ServeOptions{})
	dir := t.TempDir()
	args := []string{"--source", srv.URL, "--sink", "fs:" + filepath.Join(dir, "m"), "--state", filepath.Join(dir, "s.db"), "--progress", "none"}
	srv.Handler.Publish(0)
	if code, out, stderr := run(t, append([]string{"sync"}, args...)...); code != ExitOK {
		t.Fatalf("first sync: exit %d\n%s%s", code, out, stderr)
	}
	held := countFiles(t, filepath.Join(dir, "m"))
	srv.Handler.Publish(2)
	// A dry run prints the whole plan, then says that the real run would
	// stop, and how many it would have deleted.
	code, out, stderr := run(t, append([]string{"sync", "--max-delete", "2", "--dry-run"}, args...)...)
	deletes := strings.Count(out, "would delete http")
	would := fmt.Sprintf("nothing was deleted: it would have deleted %d;", deletes)
	if code != ExitPartial || deletes <= 2 || !strings.Contains(out, "would write http") || !strings.Contains(stderr, "the real run would stop before deleting anything") || !strings.Contains(stderr, would) {
		t.Fatalf("--max-delete 2 --dry-run: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = run(t, append([]string{"sync", "--max-delete", "2"}, args...)...)
	if code != ExitPartial || !strings.Contains(stderr, "would delete more than --max-delete allows (2: at most 2 of the 120 resources held); nothing was deleted") || !strings.Contains(stderr, would) {
		t.Fatalf("--max-delete 2: exit %d\n%s%s", code, out, stderr)
	}
	if n := countFiles(t, filepath.Join(dir, "m")); n < held {
		t.Errorf("the mirror holds %d files, %d before: something was deleted", n, held)
	}
	if code, _, stderr := run(t, append([]string{"sync", "--max-delete", "x%"}, args...)...); code != ExitUsage || !strings.Contains(stderr, "--max-delete") {
		t.Errorf("--max-delete x%%: exit %d\n%s", code, stderr)
	}
	code, out, stderr = run(t, append([]string{"sync", "--max-delete", "50%"}, args...)...)
	if code != ExitOK || !strings.Contains(out, fmt.Sprintf(" written, %d deleted", deletes)) {
		t.Fatalf("--max-delete 50%%: exit %d\n%s%s", code, out, stderr)
	}
}

// TestDryRunCommand: "baseline --dry-run" with no state file prints what
// it would fetch and write, creates no state file and writes nothing;
// after a real baseline, "sync --dry-run" of the source's changes prints
// what it would write and delete, and changes neither the mirror nor the
// state (the next real sync does the same).
func TestDryRunCommand(t *testing.T) {
	srv := generatedSource(t, bench.GenOptions{Resources: 60, Packages: 2, Seed: 4, MeanSize: 1 << 10, ChangePackages: 2, ChangesPerPackage: 20, DeleteShare: 0.3}, bench.ServeOptions{})
	dir := t.TempDir()
	db, mirror := filepath.Join(dir, "s.db"), filepath.Join(dir, "m")
	args := []string{"--source", srv.URL, "--sink", "fs:" + mirror, "--state", db}
	srv.Handler.Publish(0)
	code, out, stderr := run(t, append([]string{"baseline", "--dry-run"}, args...)...)
	if code != ExitOK || strings.Count(out, "would write http") != 60 || strings.Count(out, "would fetch http") != 2 || !strings.Contains(out, "dry run (baseline)") || !strings.Contains(out, "would write 60") {
		t.Fatalf("baseline --dry-run: exit %d\n%s%s", code, out, stderr)
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("a dry run created the state file")
	}
	if n := countFiles(t, mirror); n != 0 {
		t.Errorf("a dry run wrote %d files", n)
	}
	if code, out, stderr := run(t, append([]string{"baseline", "--progress", "none"}, args...)...); code != ExitOK {
		t.Fatalf("baseline: exit %d\n%s%s", code, out, stderr)
	}
	srv.Handler.Publish(2)
	before := heldBodies(t, mirror)
	code, out, stderr = run(t, append([]string{"sync", "--dry-run"}, args...)...)
	deletes := strings.Count(out, "would delete http")
	if code != ExitOK || deletes == 0 || !strings.Contains(out, "dry run (incremental)") {
		t.Fatalf("sync --dry-run: exit %d\n%s%s", code, out, stderr)
	}
	if after := heldBodies(t, mirror); len(after) != len(before) {
		t.Errorf("the dry run changed the mirror: %d files, %d before", len(after), len(before))
	}
	code, out, stderr = run(t, append([]string{"sync", "--progress", "none"}, args...)...)
	if code != ExitOK || !strings.Contains(out, fmt.Sprintf(", %d deleted,", deletes)) {
		t.Errorf("the sync after the dry run (%d deletes said): exit %d\n%s%s", deletes, code, out, stderr)
	}
}
