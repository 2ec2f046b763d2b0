package cli

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
)

// serveGenerated serves the source gen wrote in dir where it was
// generated for, until the test ends, and returns its base URL.
func serveGenerated(t *testing.T, dir string) string {
	t.Helper()
	base, err := bench.BaseOf(dir)
	if err != nil || base == "" {
		t.Fatalf("no base recorded in %s: %v", dir, err)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := bench.Serve(t.Context(), dir, u.Host, bench.ServeOptions{BaseURL: base})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return base
}

// serveCommand runs "rsharvest serve" with args until the test ends and
// returns what it printed once it serves.
func serveCommand(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- Main(ctx, append([]string{"serve"}, args...), &out, &errb) }()
	t.Cleanup(func() { cancel(); <-done })
	if servedURL(&out, `at (http://127\.0\.0\.1:[0-9]+/\S*)`) == "" {
		t.Fatalf("serve %s did not start:\n%s%s", strings.Join(args, " "), out.String(), errb.String())
	}
	return out.String()
}

// TestSyntheticSourcesAreReal: gen writes a source with the URIs of the
// address serve serves it at — each source its own, so that two harvested
// into one mirror never share a URI — and cat by that URI reads the body
// held; serve refuses another address for it. A harvest list is served
// without a ResourceSync Source Description advertised, and a later round
// keeps its address.
func TestSyntheticSourcesAreReal(t *testing.T) {
	dir := t.TempDir()
	db, mirror := filepath.Join(dir, "s.db"), "fs:"+filepath.Join(dir, "m")
	var bases []string
	for _, name := range []string{"a", "b"} {
		out := filepath.Join(dir, name)
		if code, stdout, stderr := run(t, "gen", "--out", out, "--resources", "12", "--packages", "2", "--size", "500"); code != ExitOK {
			t.Fatalf("gen: exit %d\n%s%s", code, stdout, stderr)
		}
		printed := serveCommand(t, "--dir", out)
		base := regexp.MustCompile(`serving \S+ at (\S+)`).FindStringSubmatch(printed)[1]
		if b, _ := bench.BaseOf(out); b != base || !strings.Contains(printed, "source description: ") {
			t.Fatalf("serve printed %q; gen recorded %s", printed, b)
		}
		if code, stdout, stderr := run(t, "sync", "--source", base, "--sink", mirror, "--state", db, "--progress", "none"); code != ExitOK || !strings.Contains(stdout, "12 written") {
			t.Fatalf("sync %s: exit %d\n%s%s", base, code, stdout, stderr)
		}
		bases = append(bases, base)
	}
	if bases[0] == bases[1] {
		t.Fatalf("two sources at one base, %s", bases[0])
	}
	if n := countFiles(t, filepath.Join(dir, "m")); n != 24 {
		t.Errorf("the mirror holds %d files, want the 24 of two sources", n)
	}
	_, ls, _ := run(t, "ls", "--source", bases[0], "--state", db)
	uris := regexp.MustCompile(`(?m)^\s*\d+\s+\S+\s+\S+\s+\S+\s+(.+)$`).FindAllStringSubmatch(ls, -1)
	if len(uris) != 12 || strings.Contains(ls, "PORTX") {
		t.Fatalf("ls --source %s:\n%s", bases[0], ls)
	}
	for _, m := range uris {
		if !strings.HasPrefix(m[1], bases[0]) {
			t.Errorf("%s is not a URI of the address the source is served at, %s", m[1], bases[0])
		}
	}
	if code, body, stderr := run(t, "cat", uris[0][1], "--sink", mirror, "--state", db); code != ExitOK || body == "" {
		t.Errorf("cat %s: exit %d\n%s", uris[0][1], code, stderr)
	}
	if code, _, stderr := run(t, "serve", "--dir", filepath.Join(dir, "a"), "--listen", "127.0.0.1:0"); code != ExitUsage || !strings.Contains(stderr, "was generated for "+bases[0]) {
		t.Errorf("serve at another address: exit %d\n%s", code, stderr)
	}

	// A harvest list: no Source Description advertised, nor served; a
	// later round at the same address.
	hl := filepath.Join(dir, "hl")
	if code, out, stderr := run(t, "gen", "--harvest-list", "--out", hl, "--documents", "5"); code != ExitOK {
		t.Fatalf("gen --harvest-list: exit %d\n%s%s", code, out, stderr)
	}
	first, _ := bench.BaseOf(hl)
	if code, out, stderr := run(t, "gen", "--harvest-list", "--out", hl, "--documents", "5", "--round", "1"); code != ExitOK || !strings.Contains(out, first+"harvestlist.xml") {
		t.Fatalf("gen --harvest-list --round 1: exit %d\n%s%s", code, out, stderr)
	}
	printed := serveCommand(t, "--dir", hl)
	if !strings.Contains(printed, "harvest list: "+first+"harvestlist.xml") || strings.Contains(printed, "well-known") {
		t.Errorf("serve of a harvest list printed:\n%s", printed)
	}
	root := regexp.MustCompile(`^http://[^/]+/`).FindString(first)
	if resp, err := http.Get(root + ".well-known/resourcesync"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("a harvest list's server answers /.well-known/resourcesync: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if _, err := os.Stat(filepath.Join(hl, "harvestlist.xml")); err != nil {
		t.Fatal(err)
	}
}
