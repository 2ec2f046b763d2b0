package status

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/rsharvest/rsharvest/state"
)

// registryOf is a state on a temp SQLite file with the sites named,
// each with a well-formed definition.
func registryOf(t *testing.T, names ...string) *state.Store {
	t.Helper()
	st, err := state.Open(t.Context(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, n := range names {
		putSite(t, st, n, "every 1d")
	}
	return st
}

func putSite(t *testing.T, st *state.Store, name, schedule string) {
	t.Helper()
	def := "name: " + name + "\nschedule: " + schedule + "\nsource: http://" + name + ".example/\nsinks:\n  - fs:/tmp/" + name + "\n"
	if err := st.PutSite(t.Context(), state.Site{Name: name, Definition: def}); err != nil {
		t.Fatal(err)
	}
}

// blockingQueue is a Queue whose Counts waits for its context to end (a
// slow or stuck job table), or for release.
type blockingQueue struct{ release chan struct{} }

func (q blockingQueue) Counts(ctx context.Context) (map[string]int, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-q.release:
		return map[string]int{"available": 1}, nil
	}
}

// TestMetricsWithinTheRequest: a scrape whose client gave up (Prometheus's
// scrape timeout) does not keep the server working on it: its reads end
// with its request.
func TestMetricsWithinTheRequest(t *testing.T) {
	st := registryOf(t, "a")
	q := blockingQueue{release: make(chan struct{})}
	t.Cleanup(func() { close(q.release) })
	h, err := Handler(Options{Store: st, Operator: Credentials{Token: "t"}, Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil).WithContext(ctx)
	req.Header.Set("Authorization", "Bearer t")
	done := make(chan int, 1)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		done <- rec.Code
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("/metrics still running after its request's context ended")
	}
}

// TestUnreadableSiteKeepsPagesUp: a site whose stored definition this
// machine cannot read (a schedule's zone it lacks: the daemon harvests the
// others) does not take the sites page and /metrics down with it.
func TestUnreadableSiteKeepsPagesUp(t *testing.T) {
	st := registryOf(t, "good")
	putSite(t, st, "bad", "CRON_TZ=Nowhere/Atlantis 0 3 * * *")
	h, err := Handler(Options{Store: st, Operator: Credentials{Token: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"/", "/metrics"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, page, nil)
		req.Header.Set("Authorization", "Bearer t")
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "good") {
			t.Errorf("GET %s with one unreadable site: %d %.200q, want 200 listing the good site", page, rec.Code, rec.Body.String())
		}
	}
}

// TestHugePageNumber: a page number so large that its offset would
// overflow does not show the first page's sites under its number.
func TestHugePageNumber(t *testing.T) {
	st := registryOf(t, "a", "b", "c")
	h, err := Handler(Options{Store: st, Operator: Credentials{Token: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	page := math.MaxInt/pageSize + 2 // (page-1)*pageSize overflows
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/?page="+strconv.Itoa(page), nil)
	req.Header.Set("Authorization", "Bearer t")
	h.ServeHTTP(rec, req)
	body := rec.Body.String()
	if rec.Code == http.StatusOK && strings.Contains(body, `data-site="a"`) && !strings.Contains(body, "page 1 of 1") {
		t.Errorf("page %d of a registry of 3 sites lists the first page's sites (offset overflowed): %s",
			page, regexp.MustCompile(`<p id="pages">[^\n]*`).FindString(body))
	}
}

// TestIPv6PrefixesShareALimit: one customer's IPv6 /48 (the usual
// allocation) holds 65,536 /64s; cycling through more of them than the
// table remembers, each spending its allowance, does not win fresh
// allowances: the second round of guesses is answered 429.
func TestIPv6PrefixesShareALimit(t *testing.T) {
	st := registryOf(t)
	h, err := Handler(Options{Store: st, Operator: Credentials{Token: "right"}})
	if err != nil {
		t.Fatal(err)
	}
	guess := func(i int) int {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = fmt.Sprintf("[2001:db8:0:%x::1]:4242", i)
		req.Header.Set("Authorization", "Bearer wrong")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	prefixes := maxClients + 1
	var guessed [2]int
	for round := range 2 {
		for i := range prefixes {
			for range failureBurst {
				if guess(i) == http.StatusUnauthorized {
					guessed[round]++
				}
			}
		}
	}
	// The second round comes seconds after the first: at most one more
	// failure per prefix has been refilled (one every failureEvery).
	if guessed[1] > prefixes {
		t.Errorf("one /48: %d guesses answered 401 in the first round, %d in the second (want at most %d: the allowances were spent)",
			guessed[0], guessed[1], prefixes)
	}
}

// TestConcurrentFailuresWithinBurst: wrong guesses sent at once by one
// client are answered 401 at most failureBurst times (the rest 429): a
// failure is reserved before the credentials are compared.
func TestConcurrentFailuresWithinBurst(t *testing.T) {
	st := registryOf(t)
	h, err := Handler(Options{Store: st, Operator: Credentials{User: "admin", Password: "right"}})
	if err != nil {
		t.Fatal(err)
	}
	// A wrong password long enough that checking it takes a while (the
	// header is decoded before it is compared).
	hdr := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+strings.Repeat("x", 3<<20)))
	const n = 24
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		guessed int
		start   = make(chan struct{})
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.RemoteAddr = "192.0.2.7:4242"
			req.Header.Set("Authorization", hdr)
			rec := httptest.NewRecorder()
			<-start
			h.ServeHTTP(rec, req)
			if rec.Code == http.StatusUnauthorized {
				mu.Lock()
				guessed++
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if guessed > failureBurst {
		t.Errorf("%d of %d concurrent wrong guesses from one client answered 401, want at most %d (the rest 429)", guessed, n, failureBurst)
	}
}

// TestConstMetricNotUTF8: a label value that is not UTF-8 (a machine's
// host name is bytes, as is a state written by hand) neither panics the
// scrape nor meets another value: its other bytes are escaped.
func TestConstMetricNotUTF8(t *testing.T) {
	for _, tc := range []struct{ host, want string }{
		{"h1", `host="h1"`},
		{"caf\xe9", `host="caf\\xe9"`},
		{"caf\xe9-2", `host="caf\\xe9-2"`},
		{"ok-é", `host="ok-é"`},
	} {
		var m prometheus.Metric
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("host %q: panicked: %v", tc.host, p)
				}
			}()
			m = constMetric(descHarvests, prometheus.GaugeValue, 1, tc.host, "7")
		}()
		var out dto.Metric
		if err := m.Write(&out); err != nil {
			t.Fatalf("host %q: %v", tc.host, err)
		}
		got := ""
		for _, l := range out.GetLabel() {
			if l.GetName() == "host" {
				got = `host="` + strings.ReplaceAll(l.GetValue(), `\`, `\\`) + `"`
			}
		}
		if got != tc.want {
			t.Errorf("host %q: label %s, want %s", tc.host, got, tc.want)
		}
	}
}
