package cli

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestRetryLoggedInLogMode: in log mode each retry of a refusing source is
// a warning as it happens, naming the URL once; the run's error is printed
// once, on standard error, and not again in the summary.
func TestRetryLoggedInLogMode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	src := "http://" + ln.Addr().String() + "/capabilitylist.xml"
	ln.Close()
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
		if strings.Count(w, src) != 1 || !strings.Contains(w, "connection refused") || !strings.Contains(w, "attempt="+string(rune('2'+i))+" of=3") {
			t.Errorf("warning %q", w)
		}
	}
	if len(finals) != 1 || strings.Count(finals[0], src) != 1 || strings.Contains(out, "connection refused") {
		t.Errorf("the error is not printed once, naming the source once:\nstdout:\n%s\nstderr:\n%s", out, stderr)
	}
}
