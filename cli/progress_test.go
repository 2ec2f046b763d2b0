package cli

import (
	"bytes"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/fetch"
)

// TestTerminalLogAboveTheDisplay: a log record written while the display
// is shown erases it first and draws it again below the record, in one
// write, so the two never share a line.
func TestTerminalLogAboveTheDisplay(t *testing.T) {
	var out bytes.Buffer
	term := newTerminal(&out)
	term.Write([]byte("before\n"))
	term.show("1.00 MiB / 2.00 MiB, 50%", "retrying http://x/: EOF")
	term.Write([]byte("level=WARN msg=hello\n"))
	term.show("2.00 MiB / 2.00 MiB, 100%")
	term.Write([]byte("level=INFO msg=done\n"))
	term.end("2.00 MiB / 2.00 MiB, 100%; written 3")
	term.Write([]byte("after\n"))
	want := "before\n" +
		"1.00 MiB / 2.00 MiB, 50%\nretrying http://x/: EOF" +
		"\r\x1b[1A\x1b[J" + "level=WARN msg=hello\n" + "1.00 MiB / 2.00 MiB, 50%\nretrying http://x/: EOF" +
		"\r\x1b[1A\x1b[J" + "2.00 MiB / 2.00 MiB, 100%" +
		"\r\x1b[J" + "level=INFO msg=done\n" + "2.00 MiB / 2.00 MiB, 100%" +
		"\r\x1b[J" + "2.00 MiB / 2.00 MiB, 100%; written 3\n" +
		"after\n"
	if out.String() != want {
		t.Fatalf("terminal holds\n%q\nwant\n%q", out.String(), want)
	}
}

// TestTerminalCutsToWidth: display lines are cut to the terminal's width,
// so that a line redrawn in place never wraps; log records are not.
func TestTerminalCutsToWidth(t *testing.T) {
	var out bytes.Buffer
	term := newTerminal(&out)
	term.width = func() int { return 10 }
	term.show("0123456789abc")
	term.Write([]byte("a long log record stays whole\n"))
	want := "01234567…" + "\r\x1b[J" + "a long log record stays whole\n" + "01234567…"
	if out.String() != want {
		t.Fatalf("terminal holds %q, want %q", out.String(), want)
	}
}

// TestOnRetryWithoutDisplay: with no live display, a retry is a warning
// naming the URL once, with the attempt and the wait; with one, it goes to
// the display's status line and not to the log.
func TestOnRetryWithoutDisplay(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	a := &app{}
	const u = "http://127.0.0.1:9/cl.xml"
	r := fetch.Retry{URL: u, Attempt: 2, Attempts: 6, Wait: 1200 * time.Millisecond,
		Err: errorString("GET " + u + ": dial tcp 127.0.0.1:9: connect: connection refused")}
	a.onRetry(log)(r)
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
	a.retries.Store(b)
	a.onRetry(log)(r)
	if logs.Len() > 0 {
		t.Errorf("with the display, the retry was logged: %s", logs.String())
	}
	if l := b.line(time.Now(), 0); !strings.Contains(l, "retrying "+u+": dial tcp") {
		t.Errorf("status line %q", l)
	}
}

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

type errorString string

func (e errorString) Error() string { return string(e) }
