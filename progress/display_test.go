package progress

import (
	"bytes"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/pipeline"
)

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls out until it holds want (bounded: a minute).
func waitFor(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(out.String(), want); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the display never showed %q:\n%q", want, out.String())
		}
	}
}

// TestLiveDisplay: the bar shows the resources finished of the run's
// total with the outcomes and bytes; a retry shows on a detail row under
// it; a log record erases the bar (and the row) first, then the bar is
// drawn again below it; every line drawn stays narrower than the
// terminal; at the end the bar gives way to a last line that stays.
func TestLiveDisplay(t *testing.T) {
	var out syncBuffer
	d := New(&out)
	d.term.width = func() int { return 200 }
	log := slog.New(slog.NewTextHandler(d.Writer(), nil))
	var c pipeline.Counts
	c.Planned.Store(10)
	c.PlanRead.Store(true)
	c.Written.Store(3)
	c.BytesWritten.Store(3 * kib)
	stop := d.Start(t.Context(), "bars", &c, log)
	waitFor(t, &out, "(3/10, ")
	waitFor(t, &out, "; written 3, unchanged 0, failed 0; received 0 B, verified 3.00 KiB")
	d.OnRetry(log)(fetch.Retry{URL: "http://x/cl.xml", Attempt: 2, Attempts: 4, Wait: time.Second, Err: errorString("EOF")})
	waitFor(t, &out, "retrying http://x/cl.xml: EOF (attempt 2 of 4, next in 1s)")
	log.Info("hello")
	waitFor(t, &out, "msg=hello")
	c.Written.Store(10)
	waitFor(t, &out, "(10/11, ") // the bar ends with the run, not before
	stop()

	got := out.String()
	i := strings.Index(got, "level=INFO msg=hello")
	if j := strings.LastIndex(got[:i], "time="); j < 0 || !strings.HasSuffix(got[:j], erase) {
		t.Errorf("the record does not erase the display first:\n%q", got[max(0, i-80):i])
	}
	if after := got[i:]; !strings.Contains(after, "|") || !strings.Contains(after, "retrying http://x/cl.xml") {
		t.Errorf("the bar and its detail row are not drawn again after the record:\n%q", after)
	}
	if want := erase + "resources 10 of 10, 100%, ETA 0s; written 10, unchanged 0, failed 0; received 0 B, verified 3.00 KiB\n"; !strings.HasSuffix(got, want) {
		t.Errorf("the display ends\n%q\nwant\n%q", got[max(0, len(got)-200):], want)
	}
	for _, l := range strings.FieldsFunc(got, func(r rune) bool { return r == '\r' || r == '\n' }) {
		if n := utf8.RuneCountInString(stripANSI(l)); n >= 200 {
			t.Errorf("a line of %d columns on a terminal of 200: %q", n, l)
		}
	}
}

// stripANSI removes the escape sequences a line holds.
func stripANSI(s string) string { return ansi.ReplaceAllString(s, "") }

var ansi = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

// TestOnRetryWithoutDisplay: with no live display, a retry is a warning
// naming the URL once, with the attempt and the wait; with one, it goes to
// the display's status line and not to the log.
func TestOnRetryWithoutDisplay(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	d := New(&bytes.Buffer{})
	const u = "http://127.0.0.1:9/cl.xml"
	r := fetch.Retry{URL: u, Attempt: 2, Attempts: 6, Wait: 1200 * time.Millisecond,
		Err: errorString("GET " + u + ": dial tcp 127.0.0.1:9: connect: connection refused")}
	d.OnRetry(log)(r)
	got := logs.String()
	for _, want := range []string{"level=WARN", "url=" + u, `reason="dial tcp 127.0.0.1:9: connect: connection refused"`, "attempt=2 of=6 in=1.2s"} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q lacks %q", got, want)
		}
	}
	if n := strings.Count(got, u); n != 1 {
		t.Errorf("the warning names the URL %d times: %s", n, got)
	}

	logs.Reset()
	b := newRetryBoard()
	d.retries.Store(b)
	d.OnRetry(log)(r)
	if logs.Len() > 0 {
		t.Errorf("with the display, the retry was logged: %s", logs.String())
	}
	if l := b.line(time.Now(), 0); !strings.Contains(l, "retrying "+u+": dial tcp") {
		t.Errorf("status line %q", l)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
