package cli

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// TestRetryLoggedInLogMode: in log mode each retry of an unavailable source
// (503) is a warning as it happens, naming the URL once; the run's error is
// printed once, on standard error, and not again in the summary.
func TestRetryLoggedInLogMode(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	src := down.URL + "/capabilitylist.xml"
	dir := t.TempDir()
	code, out, stderr := run(t, "baseline", "--source", src, "--sink", "fs:"+filepath.Join(dir, "m"),
		"--state", filepath.Join(dir, "s.db"), "--progress", "log", "--retries", "2")
	if code != ExitSource {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, ExitSource, out, stderr)
	}
	var warnings, finals []string
	for _, l := range strings.Split(stderr, "\n") {
		switch {
		case strings.Contains(l, `level=WARN msg="retrying request"`):
			warnings = append(warnings, l)
		case strings.HasPrefix(l, "rsharvest: "):
			finals = append(finals, l)
		}
	}
	if len(warnings) != 2 {
		t.Errorf("%d retry warnings, want 2:\n%s", len(warnings), stderr)
	}
	for i, w := range warnings {
		if strings.Count(w, src) != 1 || !strings.Contains(w, "503") || !strings.Contains(w, "attempt="+string(rune('2'+i))+" of=3") {
			t.Errorf("warning %q", w)
		}
	}
	if len(finals) != 1 || strings.Count(finals[0], src) != 1 || strings.Contains(out, "HTTP 503") { // (not "503": a duration may read 1.503s)
		t.Errorf("the error is not printed once, naming the source once:\nstdout:\n%s\nstderr:\n%s", out, stderr)
	}
}
