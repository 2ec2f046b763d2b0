package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/notify/mailtest"
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
	list := serveGenerated(t, site) + "harvestlist.xml"
	db := filepath.Join(dir, "s.db")
	// Without flags, every document is validated: the two that are not
	// what they say (malformed, of another namespace) are failures, and
	// are not stored.
	code, out, stderr := run(t, "sync", "--source", list, "--sink", "fs:"+filepath.Join(dir, "m"), "--state", db, "--progress", "none", "--retries", "0")
	if code != ExitPartial || !strings.Contains(stderr, "protocol=harvest-list") ||
		!regexp.MustCompile(`resources: 9 written, 0 deleted, 0 unchanged, 4 failed, 1 skipped`).MatchString(out) || strings.Contains(out, "--require-hash") ||
		!strings.Contains(out, bench.HarvestListDocID(bench.HarvestListMalformed)+": fs: put") || !strings.Contains(out, "invalid document") {
		t.Fatalf("sync: exit %d\n%s%s", code, out, stderr)
	}
	if n := countFiles(t, filepath.Join(dir, "m")); n != 9 {
		t.Errorf("%d documents stored, want the 9 valid ones", n)
	}
	// --validate=false stores them unchecked.
	code, out, stderr = run(t, "sync", "--source", list, "--sink", "fs:"+filepath.Join(dir, "unchecked"), "--state", filepath.Join(dir, "u.db"), "--progress", "none", "--retries", "0", "--validate=false")
	if code != ExitPartial || !strings.Contains(out, "resources: 11 written, 0 deleted, 0 unchanged, 2 failed, 1 skipped") {
		t.Fatalf("sync --validate=false: exit %d\n%s%s", code, out, stderr)
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
  - {name: eml, source: "`+list+`", protocol: harvest-list, validate: false, retries: 0, sinks: [fs:eml], schedule: every 1d}
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

// harvestListSite generates a harvest list site of n documents (with what
// real ones hold) in dir, and serves it.
func harvestListSite(t *testing.T, dir string, n int) *bench.Server {
	t.Helper()
	if err := bench.GenerateHarvestList(t.Context(), bench.HarvestListOptions{Dir: dir, Documents: n, Seed: 1, Odd: true}); err != nil {
		t.Fatal(err)
	}
	srv, err := bench.Serve(t.Context(), dir, "127.0.0.1:0", bench.ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// TestHarvestListReports: a harvest list site's reports, read back from
// Mailpit, say per document what was inserted, updated (old → new
// revision) and held, what failed and why (an invalid document with the
// validator's reason), what was left out (a lower revision, a docid listed
// twice, what is no longer listed), and when the next harvest is; the
// administrator's composite sums them.
func TestHarvestListReports(t *testing.T) {
	mp := mailtest.Start(t)
	dir := t.TempDir()
	site := filepath.Join(dir, "site")
	srv := harvestListSite(t, site, 10)
	db, registry := filepath.Join(dir, "s.db"), filepath.Join(dir, "sites.yaml")
	if err := os.WriteFile(registry, []byte(`sites:
  - {name: eml, source: "`+srv.URL+`harvestlist.xml", protocol: harvest-list, validate: true, retries: 0, sinks: [fs:eml], schedule: every 1d, contact: data@site.example}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := run(t, "sites", "apply", registry, "--state", db); code != ExitOK {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	t.Setenv("RSHARVEST_SMTP_PASSWORD", mp.Password)
	mailArgs := []string{"--state", db, "--report-dir", filepath.Join(dir, "reports"), "--smtp", mp.SMTP, "--smtp-from", "rsharvest@aggregator.example",
		"--smtp-user", mp.Username, "--smtp-ca", mp.CAFile, "--admin", "admin@aggregator.example"}
	if code, out, stderr := run(t, append([]string{"run", "--due"}, mailArgs...)...); code != ExitPartial {
		t.Fatalf("run --due: exit %d\n%s%s", code, out, stderr)
	}
	// The site moves on, and drops its last document from the list.
	if err := bench.GenerateHarvestList(t.Context(), bench.HarvestListOptions{Dir: site, Documents: 10, Round: 1, Seed: 1, Odd: true, Drop: 1}); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := run(t, append([]string{"run", "eml"}, mailArgs...)...); code != ExitPartial {
		t.Fatalf("run eml: exit %d\n%s%s", code, out, stderr)
	}
	msgs, err := mp.Messages(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var site2, admin []mailtest.Message
	for _, m := range msgs {
		switch strings.Join(m.To, ",") {
		case "data@site.example":
			site2 = append(site2, m)
		case "admin@aggregator.example":
			admin = append(admin, m)
		}
	}
	if len(site2) != 2 || len(admin) != 2 {
		t.Fatalf("%d site reports, %d composite ones; want 2 and 2", len(site2), len(admin))
	}
	first, second := site2[0].Text, site2[1].Text
	for _, want := range []string{"Documents:   7 inserted, 0 updated, 0 held", bench.HarvestListDocID(3) + ": inserted at 1",
		bench.HarvestListDocID(bench.HarvestListMalformed) + " (validate, permanent): ", "not well-formed XML",
		bench.HarvestListDocID(0) + ": docid listed twice", "Next harvest: "} {
		if !strings.Contains(first, want) {
			t.Errorf("the first report lacks %q:\n%s", want, first)
		}
	}
	for _, want := range []string{bench.HarvestListDocID(3) + ": updated 1 → 2", ": held at 1", "Documents:   0 inserted, 2 updated,",
		bench.HarvestListDocID(bench.HarvestListLower) + ": listed at version 0, older than the version 1 held",
		bench.HarvestListDocID(9) + ": no longer listed"} {
		if !strings.Contains(second, want) {
			t.Errorf("the second report lacks %q:\n%s", want, second)
		}
	}
	if !strings.Contains(admin[1].Text, "In all: ") || !strings.Contains(admin[1].Text, "documents 0 inserted, 2 updated,") {
		t.Errorf("the composite report:\n%s", admin[1].Text)
	}
}

// TestDaemonHarvestList: the daemon harvests a registry site of
// protocol harvest-list as any other: every reachable document that is valid stored,
// the harvest partial (the unreachable one), in the harvest log.
func TestDaemonHarvestList(t *testing.T) {
	dir := t.TempDir()
	site := filepath.Join(dir, "site")
	srv := harvestListSite(t, site, 10)
	db := filepath.Join(dir, "s.db")
	if code, out, stderr := run(t, "sites", "add", "eml", "--state", db, "--source", srv.URL+"harvestlist.xml", "--protocol", "harvest-list",
		"--sink", "fs:"+filepath.Join(dir, "eml"), "--every", "1d"); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"daemon", "--state", db, "--tick", "200ms", "--listen", ""}, &out, &errb)
	}()
	waitFor(t, "site eml harvested", func() bool { return siteStatus(t, db, "eml") != "" })
	stopDaemon(t, cancel, done, &out, &errb)
	if s := siteStatus(t, db, "eml"); s != "partial" {
		t.Errorf("site eml: %s, want partial (one document unreachable)", s)
	}
	if n := countFiles(t, filepath.Join(dir, "eml")); n != 7 {
		t.Errorf("%d documents stored, want 7 (the valid ones)", n)
	}
	if _, log, _ := run(t, "log", "--state", db, "--site", "eml"); !regexp.MustCompile(`eml  harvest ended +run 1: partial: 7 written`).MatchString(log) {
		t.Errorf("the harvest log:\n%s", log)
	}
}
