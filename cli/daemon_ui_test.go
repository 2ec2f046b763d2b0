package cli

import (
	"context"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/internal/browsertest"
)

// TestDaemonHarvestNow: on the daemon's status page in Chromium, an
// operator's "harvest now" on a site not due starts its harvest at once;
// the site's page shows it running with its counts so far (the source
// holds its second page until then), then done; the harvest log says who
// asked.
func TestDaemonHarvestNow(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	defer open()
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: 30, PageSize: 7})
	oai := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("resumptionToken") != "" {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		repo.ServeHTTP(w, r)
	}))
	defer oai.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	if code, out, stderr := run(t, "sites", "add", "oai", "--state", db, "--source", oai.URL+"/oai", "--protocol", "oai-pmh",
		"--sink", "fs:"+filepath.Join(dir, "oai"), "--every", "1w", "--next", "2099-01-01T00:00:00Z"); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	t.Setenv("RSHARVEST_STATUS_USER", "admin")
	t.Setenv("RSHARVEST_STATUS_PASSWORD", "op-pw")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		// A tick of an hour: only the operator's action starts a harvest.
		done <- Main(ctx, []string{"daemon", "--state", db, "--tick", "1h", "--listen", addr}, &out, &errb)
	}()
	page := "http://" + addr + "/site/oai"
	b := browsertest.New(t, "Basic "+base64.StdEncoding.EncodeToString([]byte("admin:op-pw")))
	// stateUntil reloads the site's page until its state line holds want.
	stateUntil := func(want string) string {
		t.Helper()
		var s string
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			if err := chromedp.Run(b, chromedp.Navigate(page), chromedp.Text("#state", &s)); err == nil && strings.Contains(s, want) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("the site's page never showed %q; last %q\n%s", want, s, errb.String())
			}
		}
	}
	if s := stateUntil("never harvested"); strings.Contains(s, "running") {
		t.Fatalf("harvesting before asked: %q", s)
	}
	// Clicked, and the page the POST leads to loaded (a document not
	// marked as the old one).
	if err := chromedp.Run(b, chromedp.Evaluate(`document.body.dataset.old = "1"`, nil), chromedp.Click("#harvest-now"),
		chromedp.WaitVisible("body:not([data-old])")); err != nil {
		t.Fatal(err)
	}
	// Its counts so far: the first page's records (written every 5 s).
	running := stateUntil("running since")
	if !strings.Contains(running, "7 written") {
		running = stateUntil("7 written")
	}
	open()
	final := stateUntil("last harvest ok")
	if !strings.Contains(final, "30 written") {
		t.Errorf("after the harvest: %q (running: %q)", final, running)
	}
	var log string
	if err := chromedp.Run(b, chromedp.Text("#events", &log)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log, "harvest now, asked by admin (operator)") {
		t.Errorf("the site's harvest log: %q", log)
	}
	stopDaemon(t, cancel, done, &out, &errb)
	if n := countFiles(t, filepath.Join(dir, "oai")); n != 30 {
		t.Errorf("%d files, want 30", n)
	}
}
