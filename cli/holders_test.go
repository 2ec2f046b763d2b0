package cli

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
)

// mirrorFiles reads every file under dir, by its path below dir.
func mirrorFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTwoSitesOfOneSource: two sites of one source, with sinks of their
// own, each hold the whole source: the second's first harvest is a
// baseline into its sinks, not an incremental run from the first's
// checkpoint; so is a sync of the source into another mirror. A sink added
// to a site is filled from the copies the others hold.
func TestTwoSitesOfOneSource(t *testing.T) {
	srv := generatedSource(t, bench.GenOptions{Resources: 60, Packages: 2, Seed: 11, MeanSize: 256, NoOddNames: true,
		ChangePackages: 2, ChangesPerPackage: 10, ClosedLast: true}, bench.ServeOptions{})
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	mirror := func(name string) string { return filepath.Join(dir, name) }
	must := func(args ...string) string {
		t.Helper()
		code, out, stderr := run(t, append(args, "--state", db)...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, stderr)
		}
		return out + stderr
	}
	for _, s := range []string{"a", "b"} {
		must("sites", "add", s, "--source", srv.URL, "--sink", "fs:"+mirror(s), "--every", "1d")
	}
	// a: a baseline, then the changes; b likewise, after a.
	must("run", "a")
	must("run", "a")
	must("run", "b")
	must("run", "b")
	want := mirrorFiles(t, mirror("a"))
	if len(want) < 60 {
		t.Fatalf("site a holds %d files", len(want))
	}
	if got := mirrorFiles(t, mirror("b")); !maps.EqualFunc(want, got, bytes.Equal) {
		t.Errorf("site b holds %d files, site a %d: not the same", len(got), len(want))
	}
	// A sync of the source into a third mirror, twice.
	must("sync", "--source", srv.URL, "--sink", "fs:"+mirror("c"))
	must("sync", "--source", srv.URL, "--sink", "fs:"+mirror("c"))
	if got := mirrorFiles(t, mirror("c")); !maps.EqualFunc(want, got, bytes.Equal) {
		t.Errorf("the sync into c holds %d files, site a %d: not the same", len(got), len(want))
	}
	// A sink added to site a is filled from a's copies.
	must("sites", "edit", "a", "--sink", "fs:"+mirror("a"), "--sink", "fs:"+mirror("a2"))
	out := must("run", "a")
	if got := mirrorFiles(t, mirror("a2")); !maps.EqualFunc(want, got, bytes.Equal) {
		t.Errorf("the sink added to a holds %d files, a %d\n%s", len(got), len(want), out)
	}
	// ls of each site lists what it holds.
	for _, s := range []string{"a", "b"} {
		if n := strings.Count(must("ls", "--site", s), "\n"); n != len(want) {
			t.Errorf("ls --site %s: %d lines, want %d", s, n, len(want))
		}
	}
}

// TestTwoSitesOfOneSourceAtOnce: two sites of one source harvested by one
// run, at once, each hold the whole source: the second to take the
// source finds what the first recorded, and makes its own first harvest a
// baseline (not an incremental run from the first's checkpoint into an
// empty mirror).
func TestTwoSitesOfOneSourceAtOnce(t *testing.T) {
	srv := generatedSource(t, bench.GenOptions{Resources: 80, Packages: 2, Seed: 12, MeanSize: 256, NoOddNames: true,
		ChangePackages: 1, ChangesPerPackage: 10, ClosedLast: true}, bench.ServeOptions{})
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	for _, s := range []string{"a", "b"} {
		if code, out, stderr := run(t, "sites", "add", s, "--source", srv.URL, "--sink", "fs:"+filepath.Join(dir, s), "--every", "1d", "--state", db); code != ExitOK {
			t.Fatalf("sites add %s: exit %d\n%s%s", s, code, out, stderr)
		}
	}
	if code, out, stderr := run(t, "run", "a", "b", "--sites-concurrency", "2", "--state", db); code != ExitOK {
		t.Fatalf("run a b: exit %d\n%s%s", code, out, stderr)
	}
	a, b := mirrorFiles(t, filepath.Join(dir, "a")), mirrorFiles(t, filepath.Join(dir, "b"))
	if len(a) < 80 || !maps.EqualFunc(a, b, bytes.Equal) {
		t.Errorf("site a holds %d files, site b %d: want the whole source in each", len(a), len(b))
	}
}
