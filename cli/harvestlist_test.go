package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
)

// TestHarvestListCommand: "gen --harvest-list" writes a site; a sync of
// its list (the protocol found by auto) fetches every document but the
// unreachable one, fails the element without a revision, skips the docid
// listed twice; a registry site of the list, harvested by "run --due"
// after the site moved on, fetches only what rose and reports the lower
// revision; "ls" shows the revisions held.
func TestHarvestListCommand(t *testing.T) {
	dir := t.TempDir()
	site := filepath.Join(dir, "site")
	if code, out, stderr := run(t, "gen", "--harvest-list", "--out", site, "--documents", "12"); code != ExitOK || !strings.Contains(out, "wrote a harvest list of 12 documents") {
		t.Fatalf("gen: exit %d\n%s%s", code, out, stderr)
	}
	srv, err := bench.Serve(t.Context(), site, "127.0.0.1:0", bench.ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	list := srv.URL + "harvestlist.xml"
	db := filepath.Join(dir, "s.db")
	code, out, stderr := run(t, "sync", "--source", list, "--sink", "fs:"+filepath.Join(dir, "m"), "--state", db, "--progress", "none", "--retries", "0")
	if code != ExitPartial || !strings.Contains(stderr, "protocol=harvest-list") ||
		!regexp.MustCompile(`resources: 11 written, 0 deleted, 0 unchanged, 2 failed, 1 skipped`).MatchString(out) || strings.Contains(out, "--require-hash") {
		t.Fatalf("sync: exit %d\n%s%s", code, out, stderr)
	}
	// Validated (and against a schema): three documents fewer stored.
	xsd := filepath.Join(dir, "eml.xsd")
	if err := os.WriteFile(xsd, []byte(bench.HarvestListSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = run(t, "baseline", "--source", list, "--protocol", "harvest-list", "--sink", "fs:"+filepath.Join(dir, "valid"), "--state", filepath.Join(dir, "v.db"),
		"--progress", "none", "--retries", "0", "--schema", bench.EMLNamespace+"="+xsd)
	if code != ExitPartial || !strings.Contains(out, "resources: 8 written, 0 deleted, 0 unchanged, 5 failed") || !strings.Contains(out, "invalid document") {
		t.Fatalf("baseline --schema: exit %d\n%s%s", code, out, stderr)
	}
	if code, _, stderr := run(t, "baseline", "--source", list, "--sink", "fs:"+filepath.Join(dir, "x"), "--state", filepath.Join(dir, "x.db"), "--schema", "nonsense"); code != ExitUsage || !strings.Contains(stderr, "--schema") {
		t.Errorf("--schema nonsense: exit %d\n%s", code, stderr)
	}
	registry := filepath.Join(dir, "sites.yaml")
	if err := os.WriteFile(registry, []byte(`sites:
  - {name: eml, source: "`+list+`", protocol: harvest-list, retries: 0, sinks: [fs:eml], schedule: every 1d}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	db = filepath.Join(dir, "sites.db") // the registry's own state
	if code, out, stderr := run(t, "sites", "apply", registry, "--state", db); code != ExitOK {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "run", "--due", "--state", db); code != ExitPartial || !strings.Contains(out, "11 written") {
		t.Fatalf("run --due: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "gen", "--harvest-list", "--out", site, "--documents", "12", "--round", "1"); code != ExitOK {
		t.Fatalf("gen --round 1: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = run(t, "run", "eml", "--state", db)
	if code != ExitPartial || !strings.Contains(out, "3 written, 0 deleted, 7 unchanged, 2 failed, 2 skipped") {
		t.Fatalf("run eml after the site moved on: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = run(t, "ls", "--state", db, "--site", "eml")
	if code != ExitOK || !strings.Contains(out, bench.HarvestListDocID(3)) || !regexp.MustCompile(`(?m)^\s+[1-9]\d*\s+[0-9a-f]{64}\s+\S+\s+2\s+`+regexp.QuoteMeta(bench.HarvestListDocID(3))+`$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^\s+[1-9]\d*\s+[0-9a-f]{64}\s+\S+\s+1\s+`+regexp.QuoteMeta(bench.HarvestListDocID(1))+`$`).MatchString(out) {
		t.Errorf("ls: exit %d\n%s%s", code, out, stderr)
	}
}
