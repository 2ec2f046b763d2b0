package notify_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/notify"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/state"
)

// fakeSMTP is a minimal SMTP server on 127.0.0.1 (no TLS, no auth). stall,
// when not "", is the command (its first word, upper case) after which the
// server goes silent for good; quitDrop makes it close the connection,
// without a reply, when told QUIT — after it took the message. It returns
// its address and a function counting the messages it accepted (the DATA
// it answered 250).
func fakeSMTP(t *testing.T, stall string, quitDrop bool) (string, func() int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		conns    []net.Conn
		accepted int
	)
	serve := func(c net.Conn) {
		r := bufio.NewReader(c)
		say := func(s string) { _, _ = c.Write([]byte(s + "\r\n")) }
		say("220 fake ESMTP")
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			cmd := strings.ToUpper(strings.Fields(strings.TrimSpace(line) + " x")[0])
			if stall != "" && cmd == stall {
				select {} // silent for good (the connection is closed at cleanup)
			}
			switch cmd {
			case "EHLO":
				say("250-fake")
				say("250 8BITMIME")
			case "DATA":
				say("354 go on")
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if l == ".\r\n" {
						break
					}
				}
				mu.Lock()
				accepted++
				mu.Unlock()
				say("250 queued as 1")
			case "QUIT":
				if quitDrop {
					c.Close()
					return
				}
				say("221 bye")
				c.Close()
				return
			default:
				say("250 ok")
			}
		}
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go serve(c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String(), func() int {
		mu.Lock()
		defer mu.Unlock()
		return accepted
	}
}

// TestReportTakenThenQuitLost: a server that took the message (250 after
// the data) and then lost the connection at QUIT has the report: a second
// attempt with the same key (the daily job retried, the daemon restarted
// the same date) does not send it again.
func TestReportTakenThenQuitLost(t *testing.T) {
	ctx := context.Background()
	addr, accepted := fakeSMTP(t, "", true)
	st, err := state.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := &notify.Sender{Admin: "admin@aggregator.example", Store: st,
		Mail: &notify.SMTP{Addr: addr, From: "rsharvest@aggregator.example", TLS: "none", Timeout: 10 * time.Second}}
	c := notify.Composite{Key: "day:2026-11-25", Title: "harvests of the day up to 2026-11-25 03:00 UTC",
		Harvests: []notify.Harvest{{Site: "a", Source: "http://a.example/rs", Status: "ok", Run: runreport.Report{RunID: 1, Mode: "incremental"}}}}
	var errs []error
	for range 2 {
		errs = append(errs, s.Composite(ctx, &c))
	}
	if n := accepted(); n != 1 {
		t.Errorf("the composite report %q was delivered %d times (errors of the attempts: %v); want once", c.Key, n, errs)
	}
}

// TestTimeoutBoundsWholeExchange: SMTP.Timeout bounds the whole exchange,
// which go-mail's own deadline, set again at each step, cannot extend: a
// server that goes silent at MAIL FROM is given up at the Timeout (1 s),
// not 30 s later (the bound here is on a hang).
func TestTimeoutBoundsWholeExchange(t *testing.T) {
	addr, _ := fakeSMTP(t, "MAIL", false)
	m := &notify.SMTP{Addr: addr, From: "rsharvest@aggregator.example", TLS: "none", Timeout: time.Second}
	done := make(chan error, 1)
	go func() {
		done <- m.Send(context.WithoutCancel(context.Background()), []string{"ops@a.example"}, "s", "text", "<p>html</p>")
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("sent through a server that went silent")
		}
	case <-time.After(20 * time.Second):
		t.Errorf("Send with a Timeout of 1s still waits on a silent server after 20s")
	}
}

// TestDocumentVersionEscaped: a document's versions are the source's
// text (an OAI-PMH datestamp as sent): the text report escapes them, so
// they cannot forge a line nor carry a terminal's control characters.
func TestDocumentVersionEscaped(t *testing.T) {
	h := notify.Harvest{Site: "a", Source: "http://a.example/oai", Status: "ok",
		Run: runreport.Report{RunID: 1, Mode: "incremental",
			Documents: []runreport.Document{{URI: "oai:a:1", Outcome: runreport.DocUpdated,
				Previous: "2026-11-24T00:00:00Z\u009b2J", Version: "2026-11-25T00:00:00Z\nNext harvest: never (the site is retired)"}}}}
	h.Run.Versions.Updated = 1
	text, _, err := h.Render()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, "\nNext harvest: never") {
		t.Errorf("a document's version forged a line of the text report:\n%s", text)
	}
	if strings.Contains(text, "\u009b") {
		t.Errorf("the text report holds a C1 CSI (U+009B, a character XML allows) from a document's previous version:\n%q", text)
	}
}

// TestNotBegunReportsSameSecond: two harvests of a site that fail before
// their run begins, within one second, are two reports and two files in
// the reports directory: the second does not overwrite the first.
func TestNotBegunReportsSameSecond(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := &notify.Sender{Dir: dir, Store: &memStore{}}
	t0 := time.Date(2026, 11, 25, 3, 0, 0, 100e6, time.UTC)
	for i, e := range []string{"first: ${S3_KEY} not set", "second: sink fs:/srv/a: no space left on device"} {
		h := notify.Harvest{Site: "a", Source: "http://a.example/rs", Status: "failed",
			Run: runreport.Report{Mode: "sync", Started: t0.Add(time.Duration(i) * 500 * time.Millisecond)}, Error: e}
		if err := s.Harvest(ctx, &h); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.txt"))
	var all string
	for _, f := range files {
		b, _ := os.ReadFile(f)
		all += string(b)
	}
	if !strings.Contains(all, "first: ") || !strings.Contains(all, "second: ") {
		t.Errorf("two reports written, %d file(s) hold them (%v): one was overwritten", len(files), files)
	}
}
