package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// TestPostgresState: every command takes a PostgreSQL database as its
// --state (and a config file's state:) as it takes a file — sync twice
// (the second finds everything unchanged), ls, log, publish, the registry (sites
// add, run), a run refused while another harvest of its source holds the
// source's lease, or waiting for it (--wait-lock) — and never prints the
// password.
func TestPostgresState(t *testing.T) {
	pg := pgDatabase(t, startPostgres(t), "commands")
	withPassword := strings.Replace(pg, "postgres@", "postgres:pw-s3cret@", 1) // trust: any password is accepted
	srv := generatedSource(t, bench.GenOptions{Resources: 30, Packages: 1, Seed: 3, MeanSize: 1 << 10}, bench.ServeOptions{})
	dir := t.TempDir()
	var printed strings.Builder
	runOK := func(want string, args ...string) string {
		t.Helper()
		code, out, errb := run(t, args...)
		printed.WriteString(out + errb)
		if code != ExitOK || !strings.Contains(out, want) {
			t.Fatalf("%s: exit %d, want %q\n%s\n%s", args[0], code, want, out, errb)
		}
		return out
	}
	args := []string{"sync", "--source", srv.URL, "--sink", "fs:" + filepath.Join(dir, "m"), "--state", withPassword, "--progress", "none"}
	runOK("30 written", args...)
	// A config file naming the database: the same store.
	config := filepath.Join(dir, "rsharvest.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, "source: %s\nsink: fs:%s\nstate: %s\nprogress: none\n", srv.URL, filepath.Join(dir, "m"), pg), 0o600); err != nil {
		t.Fatal(err)
	}
	runOK("30 unchanged", "sync", "--config", config)
	if out := runOK("", "ls", "--state", pg, "--source", srv.URL); strings.Count(out, "\n") < 30 {
		t.Errorf("ls lists %d lines, want the 30 resources:\n%s", strings.Count(out, "\n"), out)
	}
	runOK("baseline", "log", "--state", pg)
	// publish republishes what the database holds.
	pub := filepath.Join(dir, "pub")
	runOK("", "publish", "--state", withPassword, "--out", pub, "--base-url", "http://127.0.0.1:1/rs")
	if n := publishedResources(t, pub); n != 30 {
		t.Errorf("publish from the database: %d resources listed, want 30", n)
	}

	// The registry in the database (a source of its own: the state keys
	// records by source).
	other := generatedSource(t, bench.GenOptions{Resources: 30, Packages: 1, Seed: 4, MeanSize: 1 << 10}, bench.ServeOptions{})
	runOK("", "sites", "add", "gen", "--source", other.URL, "--sink", "fs:"+filepath.Join(dir, "site")+"?shared=1", "--every", "1d", "--state", pg)
	runOK("", "run", "--due", "--state", pg)
	if got := siteStatus(t, pg, "gen"); got != "ok" {
		t.Errorf("site status %q after run --due, want ok", got)
	}
	if n := countFiles(t, filepath.Join(dir, "site")); n != 30 {
		t.Errorf("the site's mirror holds %d files, want 30", n)
	}
	// A directory not declared shared is refused for a site any machine
	// may harvest: by sites add, and by the harvest of a site an older
	// version let in.
	if code, out, errb := run(t, "sites", "add", "local", "--source", other.URL, "--sink", "fs:"+filepath.Join(dir, "local"), "--every", "1d", "--state", pg); code != ExitUsage || !strings.Contains(errb, "declare it on storage every machine mounts (fs:DIR?shared=1)") {
		t.Errorf("sites add of a site with a local fs sink: exit %d\n%s%s", code, out, errb)
	}
	putSite(t, pg, "{name: local, source: '"+other.URL+"', sinks: ['fs:"+filepath.Join(dir, "local")+"'], schedule: every 1d}")
	if code, out, errb := run(t, "run", "local", "--state", pg); code == ExitOK || !strings.Contains(out+errb, "declare it on storage every machine mounts (fs:DIR?shared=1)") {
		t.Errorf("run of a site with a local fs sink: exit %d\n%s%s", code, out, errb)
	}

	// One harvest of a source at a time: its lease.
	st, err := state.Open(t.Context(), pg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lease, err := st.Lease(t.Context(), state.SourceLease(srv.URL), "a test holding the source", 0)
	if err != nil {
		t.Fatal(err)
	}
	code, _, errb := run(t, args...)
	if code != ExitUsage || !strings.Contains(errb, "source "+srv.URL+" is being harvested by pid") ||
		!strings.Contains(errb, "(a test holding the source); use --wait-lock DURATION") {
		t.Errorf("sync while the source is leased: exit %d\n%s", code, errb)
	}
	printed.WriteString(errb)
	go func() {
		time.Sleep(300 * time.Millisecond)
		lease.Release()
	}()
	code, _, errb = run(t, append(args, "--wait-lock", "1m")...)
	if code != ExitOK {
		t.Errorf("sync waiting for the lease: exit %d\n%s", code, errb)
	}
	printed.WriteString(errb)
	if strings.Contains(printed.String(), "pw-s3cret") {
		t.Errorf("the database's password was printed:\n%s", printed.String())
	}
}

// putSite writes the site def (a registry file's, in YAML) into the
// registry of the state store at where as it is, unchecked: as an older
// version may have left it.
func putSite(t *testing.T, where, def string) {
	t.Helper()
	sites, err := config.DecodeSites(strings.NewReader("sites:\n  - "+def+"\n"), "old.yaml", harvest.Settings(), harvest.SiteTargets)
	if err != nil {
		t.Fatal(err)
	}
	s, err := site.New(sites[0])
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Open(t.Context(), where)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := (site.Registry{Store: st}).Put(t.Context(), s); err != nil {
		t.Fatal(err)
	}
}
