//go:build unix

package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
)

// TestStateLockTwoProcesses: real processes started on one state file, as
// a crontab that overlaps itself starts them. While the first runs (its
// package downloads are held back by the server, its fs sink open with a
// temporary directory of its own), a second fails at once with exit 2 and
// a message naming the holder, leaving the first's temporary directory
// alone; one given a short --wait-lock fails the same way once it has
// waited; one interrupted while it waits exits 130; one given a long
// --wait-lock waits, and syncs once the first is done. The first is
// unaffected.
func TestStateLockTwoProcesses(t *testing.T) {
	bin := crashBuildBinary(t)
	gate := make(chan struct{})
	var once sync.Once
	reached := make(chan struct{})
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(gate) }) })
	hold := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, ".zip") {
				once.Do(func() { close(reached) })
				select {
				case <-gate:
				case <-r.Context().Done():
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
	srv := generatedSource(t, bench.GenOptions{Resources: 60, Packages: 2, Seed: 3, MeanSize: 1 << 10}, bench.ServeOptions{Wrap: hold})
	work := t.TempDir()
	db := filepath.Join(work, "state.db")
	mirror := filepath.Join(work, "mirror")
	args := func(extra ...string) []string {
		return append([]string{"baseline", "--source", srv.URL, "--sink", "fs:" + mirror,
			"--state", db, "--progress", "none", "--spool-dir", work}, extra...)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	start := func(a []string) (*exec.Cmd, *syncBuffer) {
		out := &syncBuffer{}
		cmd := exec.CommandContext(ctx, bin, a...)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, out
	}
	exitCode := func(cmd *exec.Cmd) int {
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	// waitFor waits (bounded by ctx) until out says s.
	waitFor := func(out *syncBuffer, s string) {
		t.Helper()
		for !strings.Contains(out.String(), s) {
			select {
			case <-ctx.Done():
				t.Fatalf("the run never said %q:\n%s", s, out)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}

	first, firstOut := start(args())
	select {
	case <-reached:
	case <-ctx.Done():
		t.Fatalf("the first run never asked for a package:\n%s", firstOut)
	}
	firstTmp, err := filepath.Glob(filepath.Join(mirror, ".rsharvest-tmp", fmt.Sprintf("%d-*", first.Process.Pid)))
	if err != nil || len(firstTmp) != 1 {
		t.Fatalf("the first run's temporary directory: %q, %v", firstTmp, err)
	}

	second, secondOut := start(args())
	if code := exitCode(second); code != ExitUsage {
		t.Fatalf("second run: exit %d, want %d\n%s", code, ExitUsage, secondOut)
	}
	host, _ := os.Hostname()
	for _, want := range []string{"state file " + db + " is in use by pid " + fmt.Sprint(first.Process.Pid), "on host " + host, "since 20", "(rsharvest baseline)", "use --wait-lock DURATION"} {
		if !strings.Contains(secondOut.String(), want) {
			t.Errorf("second run's message does not say %q:\n%s", want, secondOut)
		}
	}
	if _, err := os.Stat(firstTmp[0]); err != nil {
		t.Errorf("the first run's temporary directory went with the second run: %v", err)
	}

	short, shortOut := start(args("--wait-lock", "300ms"))
	if code := exitCode(short); code != ExitUsage {
		t.Fatalf("run with a short --wait-lock: exit %d, want %d\n%s", code, ExitUsage, shortOut)
	}
	for _, want := range []string{"waiting for the state file", "in use by pid " + fmt.Sprint(first.Process.Pid), "waited --wait-lock 300ms"} {
		if !strings.Contains(shortOut.String(), want) {
			t.Errorf("run with a short --wait-lock does not say %q:\n%s", want, shortOut)
		}
	}

	interrupted, intOut := start(args("--wait-lock", "2m"))
	waitFor(intOut, "waiting for the state file")
	if err := interrupted.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(interrupted); code != ExitInterrupted {
		t.Fatalf("run interrupted while waiting: exit %d, want %d\n%s", code, ExitInterrupted, intOut)
	}

	third, thirdOut := start(args("--wait-lock", "2m"))
	waitFor(thirdOut, "waiting for the state file")
	release.Do(func() { close(gate) })
	if code := exitCode(first); code != ExitOK {
		t.Fatalf("first run: exit %d\n%s", code, firstOut)
	}
	if !strings.Contains(firstOut.String(), "60 written") {
		t.Errorf("first run:\n%s", firstOut)
	}
	if code := exitCode(third); code != ExitOK {
		t.Fatalf("waiting run: exit %d\n%s", code, thirdOut)
	}
	if !strings.Contains(thirdOut.String(), "60 unchanged") {
		t.Errorf("the waiting run did not find the first run's work:\n%s", thirdOut)
	}
	entries, err := os.ReadDir(filepath.Join(mirror, ".rsharvest-tmp"))
	entries = slices.DeleteFunc(entries, func(e os.DirEntry) bool { return e.Name() == "%rsharvest-sink" }) // the sink's mark
	if err != nil || len(entries) != 0 {
		t.Errorf("after every run ended the temporary directory holds %v (%v)", entries, err)
	}
}
