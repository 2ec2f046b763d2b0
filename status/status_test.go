package status_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/rsharvest/rsharvest/internal/browsertest"
	"github.com/rsharvest/rsharvest/state"
	"github.com/rsharvest/rsharvest/status"
)

// fixture is a state with two sites: good (harvested, ok) and bad (its
// harvest failed, with a failure in its detail log).
func fixture(t *testing.T) *state.Store {
	t.Helper()
	ctx := context.Background()
	st, err := state.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	t0 := time.Now().Add(-time.Hour).UTC()
	for _, s := range []struct {
		name, status, report string
		fail                 *state.Failure
	}{
		{"good", "ok", `{"resources":{"written":40,"deleted":2,"unchanged":5,"failed":0},"bytes":{"written":4096}}`, nil},
		{"bad", "partial", `{"resources":{"written":1,"failed":1},"error":""}`, &state.Failure{URI: "http://bad.example/r/7", Stage: "download", Error: "HTTP 503 Service Unavailable"}},
		{"down", "failed", `{"resources":{},"error":"source unreadable: connection refused"}`, nil},
	} {
		def := "name: " + s.name + "\nschedule: every 1d\nsource: http://" + s.name + ".example/\nsinks:\n  - fs:/tmp/" + s.name + "\n"
		if err := st.PutSite(ctx, state.Site{Name: s.name, Definition: def}); err != nil {
			t.Fatal(err)
		}
		id, err := st.BeginRun(ctx, state.Run{Mode: "baseline", Source: "http://" + s.name + ".example/", Site: s.name, Started: t0})
		if err != nil {
			t.Fatal(err)
		}
		if s.fail != nil {
			s.fail.RunID = id
			if err := st.AddFailures(ctx, []state.Failure{*s.fail}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.FinishRun(ctx, id, t0.Add(time.Minute), s.status, json.RawMessage(s.report)); err != nil {
			t.Fatal(err)
		}
		if err := st.SiteHarvested(ctx, s.name, t0, s.status, id); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// TestAuthAndMetrics: every page but /healthz needs the token or the user
// and password; without credentials configured, /healthz alone answers
// (a liveness probe needs no secret); the metrics count the harvests.
func TestAuthAndMetrics(t *testing.T) {
	bare, err := status.Handler(status.Options{Store: fixture(t)})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"/healthz": 200, "/": 403, "/metrics": 403, "/site/x": 403} {
		rec := httptest.NewRecorder()
		bare.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want || (want == 200 && rec.Body.String() != "ok\n") {
			t.Errorf("without credentials, GET %s: %d %q, want %d", path, rec.Code, rec.Body.String(), want)
		}
	}
	h, err := status.Handler(status.Options{Store: fixture(t), Operator: status.Credentials{Token: "t0k3n", User: "admin", Password: "pw"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string, set func(*http.Request)) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if set != nil {
			set(req)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	token := func(r *http.Request) { r.Header.Set("Authorization", "Bearer t0k3n") }
	for _, tt := range []struct {
		path string
		set  func(*http.Request)
		code int
		want string
	}{
		{"/healthz", nil, 200, "ok"},
		{"/", nil, 401, "authentication required"},
		{"/metrics", nil, 401, ""},
		{"/site/good", nil, 401, ""},
		{"/run/1", nil, 401, ""},
		{"/", func(r *http.Request) { r.Header.Set("Authorization", "Bearer wrong") }, 401, ""},
		{"/", func(r *http.Request) { r.SetBasicAuth("admin", "wrong") }, 401, ""},
		{"/", func(r *http.Request) { r.SetBasicAuth("admin", "pw") }, 200, `data-site="good"`},
		{"/", token, 200, `data-site="bad"`},
		{"/site/nope", token, 404, ""},
		{"/run/99", token, 404, ""},
		{"/metrics", token, 200, `rsharvest_site_runs_total{site="good",status="ok"} 1`},
		{"/metrics", token, 200, `rsharvest_site_resources_total{outcome="written",site="good"} 40`},
		{"/metrics", token, 200, `rsharvest_site_bytes_written_total{site="good"} 4096`},
		{"/metrics", token, 200, `rsharvest_site_last_run_duration_seconds{site="bad"} 60`},
		{"/metrics", token, 200, `rsharvest_site_running{site="good"} 0`},
		{"/metrics", token, 200, `rsharvest_site_last_run_resources{outcome="deleted",site="good"} 2`},
		{"/metrics", token, 200, `rsharvest_site_last_success_timestamp_seconds{site="good"} `},
		{"/metrics", token, 200, "\ngo_goroutines "},
		{"/metrics", token, 200, "\nprocess_cpu_seconds_total "},
	} {
		code, body := get(tt.path, tt.set)
		if code != tt.code || !strings.Contains(body, tt.want) {
			t.Errorf("GET %s: %d, want %d with %q\n%s", tt.path, code, tt.code, tt.want, body)
		}
	}
}

// TestPageInBrowser drives the status page in a real headless browser
// (Debian's chromium, through chromedp): the sites appear, a partial one
// with its status, a failed one with its error; its page lists its run, and the run's page its detail
// log; without credentials the page is refused.
func TestPageInBrowser(t *testing.T) {
	h, err := status.Handler(status.Options{Store: fixture(t), Operator: status.Credentials{User: "admin", Password: "pw"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx := browsertest.New(t, "")

	// Without credentials the browser is refused (it gives up at the
	// server's demand for a password).
	var refused string
	err = chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.Text("body", &refused))
	if (err == nil || !strings.Contains(err.Error(), "ERR_INVALID_AUTH_CREDENTIALS")) && !strings.Contains(refused, "authentication required") {
		t.Errorf("without credentials: %v, the page shows %q", err, refused)
	}
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:pw"))
	var sites, good, bad, down, runs, detail string
	err = chromedp.Run(ctx,
		network.Enable(),
		network.SetExtraHTTPHeaders(network.Headers{"Authorization": auth}),
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible("#sites"),
		chromedp.Text("#sites", &sites),
		chromedp.Text(`tr[data-site="good"]`, &good),
		chromedp.Text(`tr[data-site="bad"]`, &bad),
		chromedp.Text(`tr[data-site="down"]`, &down),
		chromedp.Click(`tr[data-site="bad"] a`),
		chromedp.WaitVisible("#runs"),
		chromedp.Text("#runs", &runs),
		chromedp.Click("#runs a"),
		chromedp.WaitVisible("#failures"),
		chromedp.Text("#failures", &detail),
	)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(good, "ok") || !strings.Contains(good, "40") || !strings.Contains(good, "every 1d") {
		t.Errorf("site good's row: %q", good)
	}
	if !strings.Contains(bad, "partial") {
		t.Errorf("site bad's row: %q", bad)
	}
	if !strings.Contains(down, "failed") || !strings.Contains(down, "source unreadable: connection refused") {
		t.Errorf("the failed site's row does not show its error: %q", down)
	}
	if !strings.Contains(runs, "baseline") || !strings.Contains(runs, "partial") {
		t.Errorf("site bad's runs: %q", runs)
	}
	if !strings.Contains(detail, "http://bad.example/r/7") || !strings.Contains(detail, "HTTP 503 Service Unavailable") || !strings.Contains(detail, "temporary") {
		t.Errorf("the run's detail log: %q", detail)
	}
}

// queueCounts is a queue's counts as daemon.Queue gives them.
type queueCounts map[string]int

func (q queueCounts) Counts(context.Context) (map[string]int, error) { return q, nil }

// TestRunningHarvest: a harvest under way shows on the page as running
// (not as the last one's status) with its counts so far and how many of
// its units of work are done of those planned (and, spread over the
// workers, its units done of all), in /metrics too, and the
// page refreshes itself; the workers alive (from their leases) show with
// what each is doing, and the queue's depth.
func TestRunningHarvest(t *testing.T) {
	st := fixture(t)
	id, err := st.BeginRun(context.Background(), state.Run{Mode: "incremental", Source: "http://good.example/", Site: "good", Started: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RunProgress(context.Background(), id, []byte(`{"resources":{"written":7,"failed":1},"planned":20,"units":{"done":3,"total":16}}`)); err != nil {
		t.Fatal(err)
	}
	// A daemon alive (its worker lease), harvesting the site.
	for _, k := range []string{state.WorkerLease(), state.SiteLease("good"), state.PartLease(1, "set=&from=2024")} {
		l, err := st.Lease(context.Background(), k, "rsharvest daemon", 0)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
	}
	h, err := status.Handler(status.Options{Store: st, Operator: status.Credentials{Token: "t0k3n"},
		Queue: queueCounts{"available": 3, "running": 1}})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) string {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer t0k3n")
		h.ServeHTTP(rec, req)
		return rec.Body.String()
	}
	page := get("/")
	row := page[strings.Index(page, `data-site="good"`):]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, "running since") || !strings.Contains(row, "units 3 of 16 done, 8 of at least 20 done") || !strings.Contains(row, "7 written") || !strings.Contains(row, "1 failed") || !strings.Contains(page, `http-equiv="refresh"`) {
		t.Errorf("the page does not show good's harvest running, or does not refresh:\n%s", page)
	}
	host, _ := os.Hostname()
	workers := page[strings.Index(page, `<table id="workers">`):]
	if !strings.Contains(workers, "<td>"+host+"</td><td>"+strconv.Itoa(os.Getpid())+"</td><td>rsharvest daemon</td>") || !strings.Contains(workers, "site good</td>") ||
		!strings.Contains(page, "<td>available</td><td>3</td>") {
		t.Errorf("the page does not show the worker, what it does, or the queue:\n%s", page)
	}
	m := get("/metrics")
	for _, want := range []string{`rsharvest_site_running{site="good"} 1`, `rsharvest_site_running{site="bad"} 0`,
		`rsharvest_site_running_resources_planned{site="good"} 20`, `rsharvest_site_running_resources_done{site="good"} 8`,
		"\nrsharvest_workers 1\n", `rsharvest_worker_harvests{host="` + host + `",pid="` + strconv.Itoa(os.Getpid()) + `"} 1`,
		`rsharvest_jobs{state="available"} 3`, `rsharvest_site_running_units{site="good",units="all"} 16`, `rsharvest_site_running_units{site="good",units="done"} 3`,
		`rsharvest_worker_units{host="` + host + `",pid="` + strconv.Itoa(os.Getpid()) + `"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, m)
		}
	}
}

// TestPageHidesSourcePassword: a source given with a password in its URL
// is shown without it on every page — the sites, the site's and its
// run's, which show the source (even a run recorded with the password,
// before sources lost theirs) — and in /metrics.
func TestPageHidesSourcePassword(t *testing.T) {
	ctx := context.Background()
	st := fixture(t)
	def := "name: pw\nschedule: every 1d\nsource: http://user:s3cret@pw.example/\nsinks:\n  - fs:/tmp/pw\n"
	if err := st.PutSite(ctx, state.Site{Name: "pw", Definition: def}); err != nil {
		t.Fatal(err)
	}
	id, err := st.BeginRun(ctx, state.Run{Mode: "baseline", Source: "http://user:s3cret@pw.example/", Site: "pw", Started: time.Now().Add(-time.Minute)})
	if err == nil {
		err = st.AddFailures(ctx, []state.Failure{{RunID: id, URI: "http://pw.example/r", Stage: "download", Error: "HTTP 500"}})
	}
	if err == nil {
		err = st.FinishRun(ctx, id, time.Now(), "partial", json.RawMessage(`{"resources":{"failed":1}}`))
	}
	if err == nil {
		err = st.SiteHarvested(ctx, "pw", time.Now(), "partial", id)
	}
	if err != nil {
		t.Fatal(err)
	}
	h, err := status.Handler(status.Options{Store: st, Operator: status.Credentials{Token: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/site/pw", fmt.Sprintf("/run/%d", id), "/metrics"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer t")
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, rec.Code)
		}
		if body := rec.Body.String(); strings.Contains(body, "s3cret") {
			t.Errorf("GET %s shows the password:\n%s", path, body)
		} else if (strings.HasPrefix(path, "/site/") || strings.HasPrefix(path, "/run/")) && !strings.Contains(body, "pw.example") {
			t.Errorf("GET %s does not show the source at all:\n%s", path, body)
		}
	}
}
