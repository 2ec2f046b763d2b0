package notify_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/notify"
	"github.com/rsharvest/rsharvest/runreport"
)

// silentSMTP is an SMTP server that accepts connections and never says a
// word (a hung relay, a firewall that lets the SYN through): it returns its
// address, and closes every connection when the test ends.
func silentSMTP(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
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
	return l.Addr().String()
}

// TestSMTPHangingServer: a server that accepts the connection and never
// greets does not hold a report's sending (and so the harvest that sends
// it, under its site's lease; the harvest passes a context without
// cancellation) for ever: Send gives up at its Timeout, or when its
// context ends, with an error.
func TestSMTPHangingServer(t *testing.T) {
	addr := silentSMTP(t)
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		ctx     func() (context.Context, context.CancelFunc)
	}{
		{"the timeout, no deadline (as the harvest sends)", 200 * time.Millisecond, func() (context.Context, context.CancelFunc) {
			return context.WithoutCancel(context.Background()), func() {}
		}},
		{"the context's deadline", time.Hour, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &notify.SMTP{Addr: addr, From: "rsharvest@aggregator.example", TLS: "none", Timeout: tc.timeout}
			ctx, cancel := tc.ctx()
			defer cancel()
			if err := m.Send(ctx, []string{"ops@a.example"}, "s", "text", "<p>html</p>"); err == nil {
				t.Errorf("sent through a server that never greeted")
			}
		})
	}
}

// recMailer records the messages sent.
type recMailer struct {
	mu sync.Mutex
	to [][]string
}

func (m *recMailer) Send(_ context.Context, to []string, _, _, _ string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.to = append(m.to, to)
	return nil
}

// memStore is a notify.Store in memory.
type memStore struct {
	mu   sync.Mutex
	keys map[string]string
}

func (s *memStore) ClaimReport(_ context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil {
		s.keys = map[string]string{}
	}
	if _, ok := s.keys[key]; ok {
		return false, nil
	}
	s.keys[key] = "sending"
	return true, nil
}

func (s *memStore) ReportSent(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[key] = "sent"
	return nil
}

func (s *memStore) ReleaseReport(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys[key] == "sending" {
		delete(s.keys, key)
	}
	return nil
}

// TestWriteFailureStillMails: the report directory cannot be written (the
// disk is full — which is often why the harvest failed — or the
// directory's path is wrong). The site's failure notice is still mailed to
// its contact: writing the copy to the directory and mailing it are two
// ways of telling, and one failing does not silence the other.
func TestWriteFailureStillMails(t *testing.T) {
	ctx := context.Background()
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mailer := &recMailer{}
	s := &notify.Sender{Dir: filepath.Join(notDir, "reports"), Mail: mailer, Store: &memStore{}, Admin: "admin@aggregator.example"}
	h := notify.Harvest{Site: "a", Source: "http://a.example/rs", Contact: "ops@a.example", Notify: "on_error", Status: "failed",
		Run: runreport.Report{RunID: 7, Mode: "incremental", Started: time.Now()}, Error: "sink fs:/srv/a: no space left on device"}
	err := s.Harvest(ctx, &h)
	c := notify.Composite{Key: "run:x", Title: "run --due", Harvests: []notify.Harvest{h}}
	cerr := s.Composite(ctx, &c)
	if len(mailer.to) != 2 {
		t.Errorf("the report directory could not be written (%v; %v), and %d of the 2 reports were mailed (want the contact's failure notice and the administrator's composite, whatever the directory)", err, cerr, len(mailer.to))
	}
}

// TestCompositeSize: the composite report stays under Postfix's default
// message_size_limit (10240000 bytes) whatever the harvests: here a day of
// 500 harvests that failed in part, each with MaxListed failures (a
// registry of a few thousand sites), and then 10,000 harvests in full.
func TestCompositeSize(t *testing.T) {
	const harvests, limit = 500, 10240000
	c := notify.Composite{Key: "day:2026-11-25", Title: "harvests of the day up to 2026-11-25 03:00 UTC"}
	for i := range harvests {
		h := notify.Harvest{Site: fmt.Sprintf("site-%04d", i), Source: fmt.Sprintf("https://repo%d.example/oai/request", i), Contact: "ops@x.example",
			Status: "partial", Run: runreport.Report{RunID: int64(i + 1), Mode: "incremental", Resources: runreport.Resources{Written: 10, Failed: 5000}}, MoreFailures: 4900}
		for j := range notify.MaxListed {
			h.Failures = append(h.Failures, runreport.Failure{URI: fmt.Sprintf("https://repo%d.example/bitstreams/%08d/content", i, j), Stage: "download",
				Error: "HTTP 503 Service Unavailable: the server is temporarily unable to service your request"})
		}
		c.Harvests = append(c.Harvests, h)
	}
	for range 10000 {
		c.Harvests = append(c.Harvests, notify.Harvest{Site: "ok", Source: "https://ok.example/", Status: "ok",
			Run: runreport.Report{RunID: 1, Mode: "incremental", Resources: runreport.Resources{Written: 1}}})
	}
	text, html, err := c.Render()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(text) + len(html); n > limit/2 {
		t.Errorf("composite report of %d harvests: %d bytes of text and HTML (%d + %d) before encoding, too near a 10 MB message limit", len(c.Harvests), n, len(text), len(html))
	}
	if !strings.Contains(text, "more harvests, not detailed") {
		t.Errorf("the report does not say what it left out:\n%s", text[max(0, len(text)-300):])
	}
}

// TestReportTextControlChars: a failure's URI and error come from the
// source. The text report (mailed, and written to the directory) shows them
// escaped, as the run's summary does (runreport.Printable): a record's name
// cannot forge lines of the report (a "Next harvest" line, a failure that
// is not one) nor carry terminal escapes to whoever cats the .txt file.
func TestReportTextControlChars(t *testing.T) {
	h := notify.Harvest{Site: "a", Source: "http://a.example/rs", Status: "partial",
		Run: runreport.Report{RunID: 1, Mode: "incremental", Resources: runreport.Resources{Failed: 1}},
		Failures: []runreport.Failure{{URI: "http://a.example/r/1\nNext harvest: never (the site is retired)", Stage: "download",
			Error: "HTTP 404 \x1b]0;owned\x07\x1b[2J"}}}
	text, _, err := h.Render()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, "\nNext harvest: never") {
		t.Errorf("a failure's URI forged a line of the text report:\n%s", text)
	}
	if i := strings.IndexFunc(text, func(r rune) bool { return r < 0x20 && r != '\n' }); i >= 0 {
		t.Errorf("the text report holds control character %q from a failure's error", text[i])
	}
}
