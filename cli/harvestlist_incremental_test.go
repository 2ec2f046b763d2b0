package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
)

// TestHarvestListIncrementalThenSync: a harvest list has no changes to
// follow: every harvest reads it whole. After an incremental run of a
// list (the incremental command, or sync --from), which records a
// checkpoint, and so makes every later sync incremental, what the list no
// longer names is still looked for: removed by --delete-unlisted.
func TestHarvestListIncrementalThenSync(t *testing.T) {
	for _, first := range [][]string{{"sync"} /* control: passes */, {"incremental"}, {"sync", "--from", "2020-01-01"}} {
		t.Run(strings.Join(first, " "), func(t *testing.T) {
			dir := t.TempDir()
			site := filepath.Join(dir, "site")
			srv := harvestListSite(t, site, 10)
			list := srv.URL + "harvestlist.xml"
			db, mirror := filepath.Join(dir, "s.db"), "fs:"+filepath.Join(dir, "m")
			args := func(a ...string) []string {
				return append(a, "--source", list, "--protocol", "harvest-list", "--sink", mirror, "--state", db, "--progress", "none", "--retries", "0", "--validate=false")
			}
			if code, out, stderr := run(t, args("sync")...); code != ExitPartial {
				t.Fatalf("sync: exit %d\n%s%s", code, out, stderr)
			}
			if code, out, stderr := run(t, args(first...)...); code != ExitPartial {
				t.Fatalf("%v: exit %d\n%s%s", first, code, out, stderr)
			}
			// The site drops its last two documents from the list.
			if err := bench.GenerateHarvestList(t.Context(), bench.HarvestListOptions{Dir: site, Documents: 10, Seed: 1, Odd: true, Drop: 2}); err != nil {
				t.Fatal(err)
			}
			code, out, stderr := run(t, args("sync", "--delete-unlisted")...)
			if !strings.Contains(out, "2 deleted") {
				t.Errorf("sync --delete-unlisted after the list dropped 2 documents: exit %d\n%s%s", code, out, stderr)
			}
		})
	}
}
