package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
)

// cutWriter cancels a context once the bodies it wrote reach limit bytes
// and the harvest has written something (written reports it): the
// harvest is interrupted in the middle of its packages.
type cutWriter struct {
	http.ResponseWriter
	sent    *atomic.Int64
	limit   int64
	written func() bool
	cancel  context.CancelFunc
}

func (w cutWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	if w.sent.Add(int64(n)) >= w.limit {
		for deadline := time.Now().Add(time.Minute); !w.written() && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		w.cancel()
	}
	return n, err
}

// TestInterruptedCounts: a run interrupted while it downloads packages
// says, in its summary and its report, the bytes it received (not 0) and
// the resources it wrote (as many as the mirror holds) — "sync" and
// "run SITE" alike, which both say how to resume, and neither "context
// canceled".
func TestInterruptedCounts(t *testing.T) {
	for _, how := range []string{"sync", "run SITE"} {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var sent atomic.Int64
			dir := t.TempDir()
			db, mirror, rp := filepath.Join(dir, "s.db"), filepath.Join(dir, "m"), filepath.Join(dir, "report.json")
			wroteSome := func() bool { // in the server's goroutines: no t.Fatal
				found := false
				_ = filepath.WalkDir(mirror, func(_ string, d os.DirEntry, err error) error {
					if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), ".rsharvest") {
						return filepath.SkipDir
					}
					found = found || err == nil && !d.IsDir()
					return nil
				})
				return found
			}
			cut := func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if strings.HasSuffix(r.URL.Path, ".zip") {
						w = cutWriter{ResponseWriter: w, sent: &sent, limit: 800 << 10, written: wroteSome, cancel: cancel}
					}
					h.ServeHTTP(w, r)
				})
			}
			srv := generatedSource(t, bench.GenOptions{Resources: 400, Packages: 4, Seed: 9, MeanSize: 4 << 10, CompressibleShare: 0.01, NoOddNames: true}, bench.ServeOptions{Wrap: cut})
			args := []string{"sync", "--source", srv.URL, "--sink", "fs:" + mirror, "--state", db, "--progress", "none", "--report", rp, "--concurrency", "1"}
			if how == "run SITE" {
				if code, out, stderr := run(t, "sites", "add", "one", "--source", srv.URL, "--sink", "fs:"+mirror, "--every", "1d", "--concurrency", "1", "--state", db); code != ExitOK {
					t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
				}
				args = []string{"run", "one", "--state", db, "--progress", "none", "--report-dir", filepath.Join(dir, "reports")}
			}
			var out, errb bytes.Buffer
			code := Main(ctx, args, &out, &errb)
			if code != ExitInterrupted || !strings.Contains(out.String(), ": interrupted in") || !strings.Contains(errb.String(), "interrupted: run the same command again to resume") ||
				strings.Contains(out.String()+errb.String(), "context canceled") {
				t.Fatalf("exit %d, want %d, interrupted and how to resume:\n%s%s", code, ExitInterrupted, out.String(), errb.String())
			}
			m := regexp.MustCompile(`(\d+) written, .*\n.*bytes: +(\d+) downloaded`).FindStringSubmatch(out.String())
			if m == nil {
				t.Fatalf("no counts in the summary:\n%s", out.String())
			}
			written, _ := strconv.Atoi(m[1])
			downloaded, _ := strconv.ParseInt(m[2], 10, 64)
			// Written is what the state records written (the mirror may hold
			// a few bodies more, delivered but not yet committed: the next
			// run finds them).
			_, ls, _ := run(t, "ls", "--source", srv.URL, "--state", db)
			if recorded, held := strings.Count(ls, "\n"), countFiles(t, mirror); written != recorded || written == 0 || held < written || downloaded == 0 {
				t.Errorf("the summary says %d written, %d bytes downloaded; the state records %d, the mirror holds %d:\n%s", written, downloaded, recorded, held, out.String())
			}
			if how == "sync" {
				var rep struct {
					Bytes struct{ Downloaded int64 }
				}
				if b, err := os.ReadFile(rp); err != nil || json.Unmarshal(b, &rep) != nil || rep.Bytes.Downloaded != downloaded {
					t.Errorf("the report says %d bytes downloaded, the summary %d (%v)", rep.Bytes.Downloaded, downloaded, err)
				}
			}
		})
	}
}

// TestRunTakesRunSettings: "run SITE" takes the settings of how a harvest
// goes, laid over the site's own for that run: --dry-run prints the
// site's plan and changes nothing (no document stored, no run, no last
// harvest recorded); --validate=false stores what the site's validation
// would refuse, and the site keeps its own settings; --progress and
// --bwlimit are taken. While a daemon holds the state file, "run SITE"
// hands the site to it, which harvests it at once.
func TestRunTakesRunSettings(t *testing.T) {
	dir := t.TempDir()
	srv := harvestListSite(t, filepath.Join(dir, "site"), 10)
	db, store := filepath.Join(dir, "s.db"), filepath.Join(dir, "eml")
	if code, out, stderr := run(t, "sites", "add", "eml", "--state", db, "--source", srv.URL+"harvestlist.xml", "--protocol", "harvest-list",
		"--sink", "fs:"+store, "--every", "1d", "--retries", "0"); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr := run(t, "run", "eml", "--dry-run", "--state", db)
	if code == ExitUsage || !strings.Contains(out, "site eml: would write ") || !strings.Contains(out, "dry run (baseline)") {
		t.Fatalf("run --dry-run: exit %d\n%s%s", code, out, stderr)
	}
	if n := countFiles(t, store); n != 0 || siteStatus(t, db, "eml") != "" {
		t.Errorf("the dry run stored %d documents, recorded status %q", n, siteStatus(t, db, "eml"))
	}
	code, out, stderr = run(t, "run", "eml", "--validate=false", "--progress", "log", "--bwlimit", "10M", "--state", db)
	if code != ExitPartial || !strings.Contains(out, "9 written") {
		t.Fatalf("run --validate=false: exit %d\n%s%s", code, out, stderr)
	}
	if _, show, _ := run(t, "sites", "show", "eml", "--state", db); strings.Contains(show, "validate") {
		t.Errorf("the run's flag changed the site:\n%s", show)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var dout, derr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"daemon", "--state", db, "--tick", "1h", "--listen", ""}, &dout, &derr)
	}()
	log := func() string { _, l, _ := run(t, "log", "--state", db); return l }
	waitFor(t, "the daemon to start", func() bool { return strings.Contains(log(), "harvester started  rsharvest daemon") })
	code, out, stderr = run(t, "run", "eml", "--state", db)
	if code != ExitOK || !strings.Contains(out, "site eml: handed to the daemon that holds the state file") {
		t.Fatalf("run eml under the daemon: exit %d\n%s%s", code, out, stderr)
	}
	waitFor(t, "the daemon's harvest of eml", func() bool { return strings.Contains(log(), "eml  harvest ended      run 2: ") })
	stopDaemon(t, cancel, done, &dout, &derr)
	if l := log(); !strings.Contains(l, "eml  action             harvest now, asked by rsharvest run") {
		t.Errorf("the harvest log:\n%s", l)
	}
}
