package cli

import (
	"fmt"
	"net/http"
	"net/http/httptest"
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

// progressLine is the live display's bar (progressbar/v3's), whole: a
// line that another overwrote in part does not match it. finalLine is
// the line it gives way to at the end.
var (
	progressLine = regexp.MustCompile(`^\s*\d+% \|[█ ]*\| \(\d+/\d+, \d+ resources/(s|min|hr)\) ETA (-|~?(\d+s|\d+m\d\ds|\d+h\d\dm)); ` + countsRE + `$`)
	finalLine    = regexp.MustCompile(`^resources \d+( of ~?\d+, \d+%(, ETA (-|\d+s|\d+m\d\ds|\d+h\d\dm))?)?; ` + countsRE + `$`)
)

const countsRE = `written \d+, unchanged \d+, failed \d+(, deleted \d+)?; received \d+(\.\d+)? (B|KiB|MiB|GiB), verified \d+(\.\d+)? (B|KiB|MiB|GiB)(; packages \d+/\d+)?`

// checkNotGarbled fails when a line of the screen holds a fragment of the
// display after something else, or a display line with text after it.
func checkNotGarbled(t *testing.T, lines []string) {
	t.Helper()
	for _, l := range lines {
		garbled := (strings.Contains(l, "retrying ") && !strings.HasPrefix(l, "retrying ")) ||
			((strings.Contains(l, "; written ") || strings.Contains(l, "resources/")) && !progressLine.MatchString(l) && !finalLine.MatchString(l)) ||
			strings.Count(l, "resources/") > 1
		if garbled {
			t.Errorf("garbled line on the screen: %q\n%s", l, strings.Join(lines, "\n"))
		}
	}
}

// TestTerminalUnavailableSource: against a source that answers 503, the
// screen says at once, on a status line under the progress line, what is
// being retried and why; the final error appears once and names the source
// once. (A source that refuses connections is not retried:
// TestUnreachableSource.)
func TestTerminalUnavailableSource(t *testing.T) {
	bin := crashBuildBinary(t)
	work := t.TempDir()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	src := down.URL + "/capabilitylist.xml"
	s := newScreen(t, bin, "baseline", "--source", src, "--sink", "fs:"+filepath.Join(work, "m"),
		"--state", filepath.Join(work, "s.db"), "--progress", "bars", "--retries", "3")
	retry := regexp.MustCompile(`^retrying ` + regexp.QuoteMeta(src) + `: HTTP 503 Service Unavailable \(attempt [2-4] of 4, next in [0-9.]+m?s\)$`)
	lines := s.waitFor(retry)
	checkNotGarbled(t, lines)
	for i, l := range lines {
		if retry.MatchString(l) && (i == 0 || !progressLine.MatchString(lines[i-1])) {
			t.Errorf("the retry line is not under the progress line:\n%s", strings.Join(lines, "\n"))
		}
	}

	lines = s.waitFor(regexp.MustCompile(`^EXIT=`))
	screenText := strings.Join(lines, "\n")
	checkNotGarbled(t, lines)
	if !strings.Contains(screenText, "EXIT=3") {
		t.Errorf("exit code not 3:\n%s", screenText)
	}
	var final []string
	for _, l := range lines {
		if strings.HasPrefix(l, "rsharvest: ") {
			final = append(final, l)
		}
	}
	if len(final) != 1 || !strings.Contains(final[0], "503") {
		t.Fatalf("want one final error saying 503:\n%s", screenText)
	}
	if n := strings.Count(final[0], src); n != 1 {
		t.Errorf("the final error names the source %d times: %q", n, final[0])
	}
	if n := strings.Count(screenText, "giving up after"); n != 1 {
		t.Errorf("the screen shows the error %d times, want once:\n%s", n, screenText)
	}
	for _, twice := range []string{"source " + src + ": source", src + ": " + src, "source unreadable: source unreadable"} {
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
// comes over a slow link, one bar shows the resources finished of the
// total, their rate, the time left, the outcomes so far and the bytes
// received and verified; at the end a last line, complete, stays above
// the summary.
func TestTerminalProgress(t *testing.T) {
	bin := crashBuildBinary(t)
	srv := generatedSource(t, bench.GenOptions{Resources: 300, Packages: 3, Seed: 9, MeanSize: 20 << 10, NoOddNames: true}, bench.ServeOptions{Wrap: slowly})
	work := t.TempDir()
	s := newScreen(t, bin, "baseline", "--source", srv.URL, "--sink", "fs:"+filepath.Join(work, "m"),
		"--state", filepath.Join(work, "s.db"), "--progress", "bars", "--concurrency", "1")
	during := regexp.MustCompile(`^\s*\d+% \|[█ ]*\| \((\d+)/(\d+), \d+ resources/(s|min|hr)\) ETA ~?\d+s; written \d+, unchanged \d+, failed \d+; received \d+\.\d+ MiB, verified \d+(\.\d+)? (B|KiB|MiB); packages [0-3]/3$`)
	lines := s.waitFor(during)
	checkNotGarbled(t, lines)
	shown := 0
	for _, l := range lines {
		if progressLine.MatchString(l) {
			shown++
			if m := during.FindStringSubmatch(l); m != nil && m[2] == "300" && m[1] == "300" {
				t.Errorf("the bar says done before the run is: %q", l)
			}
		}
	}
	if shown != 1 {
		t.Errorf("%d bars on the screen, want one:\n%s", shown, strings.Join(lines, "\n"))
	}

	lines = s.waitFor(regexp.MustCompile(`^EXIT=`))
	checkNotGarbled(t, lines)
	screenText := strings.Join(lines, "\n")
	end := regexp.MustCompile(`(?m)^resources 300 of 300, 100%, ETA 0s; written 300, unchanged 0, failed 0; received (\d+\.\d+ MiB), verified \d+\.\d+ MiB; packages 3/3$`)
	if !strings.Contains(screenText, "EXIT=0") || !strings.Contains(screenText, "300 written") || !end.MatchString(screenText) {
		t.Errorf("the screen at the end:\n%s", screenText)
	}
}
