package cli

import (
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
)

// screen runs the binary in a detached tmux session as a person would in a
// terminal of 250 columns, and reads what the terminal shows.
type screen struct {
	t       *testing.T
	tmux    string
	session string
}

func newScreen(t *testing.T, bin string, args ...string) *screen {
	t.Helper()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal("tmux not found: the terminal tests read the screen through it; install it (apt-get install tmux)")
	}
	s := &screen{t: t, tmux: tmux, session: fmt.Sprintf("rsharvest-test-%d", time.Now().UnixNano())}
	quoted := []string{bin}
	for _, a := range args {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	// The shell stays after the command so that its last screen can be read.
	cmd := strings.Join(quoted, " ") + `; echo "EXIT=$?"; sleep 600`
	if out, err := exec.Command(tmux, "new-session", "-d", "-s", s.session, "-x", "250", "-y", "60", cmd).CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command(tmux, "kill-session", "-t", s.session).Run() })
	return s
}

// capture returns the screen's lines, as shown.
func (s *screen) capture() []string {
	out, err := exec.Command(s.tmux, "capture-pane", "-p", "-t", s.session).Output()
	if err != nil {
		s.t.Fatalf("tmux capture-pane: %v", err)
	}
	return strings.Split(strings.TrimRight(string(out), "\n"), "\n")
}

// waitFor polls the screen until a line matches re (bounded: a minute),
// and returns the screen then.
func (s *screen) waitFor(re *regexp.Regexp) []string {
	s.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		lines := s.capture()
		for _, l := range lines {
			if re.MatchString(l) {
				return lines
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the screen never showed %q:\n%s", re, strings.Join(lines, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTerminalRefusedSource: against a source that refuses connections,
// the screen says at once what is being retried, on lines of their own, and
// the final error names the source once.
func TestTerminalRefusedSource(t *testing.T) {
	bin := crashBuildBinary(t)
	work := t.TempDir()
	src := "http://127.0.0.1:9/capabilitylist.xml"
	s := newScreen(t, bin, "baseline", "--source", src, "--sink", "fs:"+filepath.Join(work, "m"),
		"--state", filepath.Join(work, "s.db"), "--progress", "bars", "--retries", "3")
	lines := s.waitFor(regexp.MustCompile(`request failed; retrying.*connection refused`))
	for _, l := range lines {
		if strings.Contains(l, "retrying") && !strings.HasPrefix(l, "time=") {
			t.Errorf("a retry record shares its line with something else (garbled): %q", l)
		}
		if strings.Contains(l, "retrying") && !strings.Contains(l, "url="+src) {
			t.Errorf("the retry record does not name what is retried: %q", l)
		}
	}
	lines = s.waitFor(regexp.MustCompile(`^EXIT=`))
	screenText := strings.Join(lines, "\n")
	if !strings.Contains(screenText, "EXIT=3") {
		t.Errorf("exit code not 3:\n%s", screenText)
	}
	var final string
	for _, l := range lines {
		if strings.HasPrefix(l, "rsharvest: ") {
			final = l
		}
	}
	if final == "" || !strings.Contains(final, "connection refused") {
		t.Fatalf("no final error on the screen:\n%s", screenText)
	}
	if n := strings.Count(final, src); n != 1 {
		t.Errorf("the final error names the source %d times: %q", n, final)
	}
	for _, twice := range []string{"source " + src + ": source", src + ": " + src} {
		if strings.Contains(screenText, twice) {
			t.Errorf("the screen repeats a prefix (%q):\n%s", twice, screenText)
		}
	}
}

// slowly sends package bodies in small writes with a pause between them,
// about 2 MB/s, so that a progress line has time to show.
func slowly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".zip") {
			w = &slowWriter{ResponseWriter: w}
		}
		next.ServeHTTP(w, r)
	})
}

type slowWriter struct{ http.ResponseWriter }

func (s *slowWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), 16<<10)
		m, err := s.ResponseWriter.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		if f, ok := s.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		p = p[k:]
		time.Sleep(8 * time.Millisecond)
	}
	return n, nil
}

func (s *slowWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// TestTerminalProgress: while a dump whose package lengths are declared
// downloads, one progress line shows the bytes done of the total, the
// percentage, the rate and the time left, and the resources written,
// unchanged and failed so far; the summary follows.
func TestTerminalProgress(t *testing.T) {
	bin := crashBuildBinary(t)
	srv := generatedSource(t, bench.GenOptions{Resources: 300, Packages: 3, Seed: 9, MeanSize: 20 << 10, NoOddNames: true}, bench.ServeOptions{Wrap: slowly})
	work := t.TempDir()
	s := newScreen(t, bin, "baseline", "--source", srv.URL, "--sink", "fs:"+filepath.Join(work, "m"),
		"--state", filepath.Join(work, "s.db"), "--progress", "bars", "--concurrency", "1")
	progress := regexp.MustCompile(`\d+% \|.*\| \(\d+(\.\d+)? ?[KM]iB/\d+(\.\d+)? ?MiB, \d+(\.\d+)? ?[KM]iB/s\) \[\d+s:\d+s\] written \d+, unchanged \d+, failed \d+; packages \d+/3`)
	lines := s.waitFor(progress)
	bars := 0
	for _, l := range lines {
		if progress.MatchString(l) {
			bars++
		}
	}
	if bars != 1 {
		t.Errorf("%d progress lines on the screen, want one:\n%s", bars, strings.Join(lines, "\n"))
	}
	lines = s.waitFor(regexp.MustCompile(`^EXIT=`))
	screenText := strings.Join(lines, "\n")
	if !strings.Contains(screenText, "EXIT=0") || !strings.Contains(screenText, "300 written") ||
		!regexp.MustCompile(`100% \|.*written 300, unchanged 0, failed 0; packages 3/3`).MatchString(screenText) {
		t.Errorf("the screen at the end:\n%s", screenText)
	}
}
