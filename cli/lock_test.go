package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
)

// TestStateLockTwoProcesses: two real processes started on one state file,
// as a crontab that overlaps itself starts them. While the first runs (its
// package downloads are held back by the server), a second fails at once
// with exit 2 and a message naming the holder; a third given --wait-lock
// waits, and syncs once the first is done. The first is unaffected.
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
	args := func(extra ...string) []string {
		return append([]string{"baseline", "--source", srv.URL, "--sink", "fs:" + filepath.Join(work, "mirror"),
			"--state", db, "--progress", "none", "--spool-dir", work}, extra...)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	start := func(a []string) (*exec.Cmd, *bytes.Buffer) {
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, a...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &out
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

	first, firstOut := start(args())
	select {
	case <-reached:
	case <-ctx.Done():
		t.Fatalf("the first run never asked for a package:\n%s", firstOut)
	}

	second, secondOut := start(args())
	if code := exitCode(second); code != ExitUsage {
		t.Fatalf("second run: exit %d, want %d\n%s", code, ExitUsage, secondOut)
	}
	host, _ := os.Hostname()
	msg := secondOut.String()
	for _, want := range []string{"in use by pid " + fmt.Sprint(first.Process.Pid), "on host " + host, "since ", "rsharvest baseline", "--wait-lock"} {
		if !strings.Contains(msg, want) {
			t.Errorf("second run's message does not say %q:\n%s", want, msg)
		}
	}

	third, thirdOut := start(args("--wait-lock", "2m"))
	time.Sleep(500 * time.Millisecond) // let it find the lock taken (not a timed assertion)
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
}
