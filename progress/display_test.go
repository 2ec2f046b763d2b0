package progress

import (
	"bytes"
	"log/slog"
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
	term := NewTerminal(&out)
	term.Write([]byte("before\n"))
	term.Show("1.00 MiB / 2.00 MiB, 50%", "retrying http://x/: EOF")
	term.Write([]byte("level=WARN msg=hello\n"))
	term.Show("2.00 MiB / 2.00 MiB, 100%")
	term.Write([]byte("level=INFO msg=done\n"))
	term.End("2.00 MiB / 2.00 MiB, 100%; written 3")
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
	term := NewTerminal(&out)
	term.width = func() int { return 10 }
	term.Show("0123456789abc")
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
