package status_test

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/harvestlog"
	"github.com/rsharvest/rsharvest/internal/browsertest"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
	"github.com/rsharvest/rsharvest/status"
)

// actServer serves the status page of the fixture's state with an
// operator (user admin) and a viewer (user guest), acting as the
// harvester does.
func actServer(t *testing.T) (*httptest.Server, *state.Store) {
	t.Helper()
	st := fixture(t)
	h := &harvest.Harvester{Store: st}
	hd, err := status.Handler(status.Options{Store: st, Act: h.Act,
		Operator: status.Credentials{User: "admin", Password: "op-pw"},
		Viewer:   status.Credentials{User: "guest", Password: "view-pw", Token: "v13w"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hd)
	t.Cleanup(srv.Close)
	return srv, st
}

// regSite reads site name of st's registry.
func regSite(t *testing.T, st *state.Store, name string) *site.Site {
	t.Helper()
	s, err := site.Registry{Store: st}.Site(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// actions returns the harvest log's actions on site name.
func actions(t *testing.T, st *state.Store, name string) []string {
	t.Helper()
	evs, err := st.Events(t.Context(), time.Time{}, name)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Operation == harvestlog.Action {
			out = append(out, e.Message)
		}
	}
	return out
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestActions: an operator's POSTs act (each written to the harvest log
// with who asked) when they carry the token of the forms served to that
// operator; a viewer's are refused whatever they carry, and so is a POST
// without the token, or from another origin; every response forbids
// framing and scripts; failed logins are rate limited.
func TestActions(t *testing.T) {
	srv, st := actServer(t)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path, user, pw string, form url.Values, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, srv.URL+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if user != "" {
			req.SetBasicAuth(user, pw)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, pageHTML := do("GET", "/site/good", "admin", "op-pw", nil, nil)
	m := csrfField.FindStringSubmatch(pageHTML)
	if resp.StatusCode != 200 || m == nil || !strings.Contains(pageHTML, `id="harvest-now"`) {
		t.Fatalf("the operator's page has no forms: %d\n%s", resp.StatusCode, pageHTML)
	}
	token := m[1]
	for _, h := range []string{"Content-Security-Policy", "X-Frame-Options", "X-Content-Type-Options"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("no %s header", h)
		}
	}
	if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("framing allowed: %v", resp.Header)
	}
	if len(resp.Cookies()) != 0 {
		t.Errorf("cookies set: %v", resp.Cookies())
	}
	if _, viewerPage := do("GET", "/site/good", "guest", "view-pw", nil, nil); strings.Contains(viewerPage, "csrf") || strings.Contains(viewerPage, "<form") {
		t.Errorf("the viewer's page offers actions:\n%s", viewerPage)
	}

	for _, tt := range []struct {
		name, path, user, pw string
		form                 url.Values
		hdr                  map[string]string
		code                 int
		want                 string
	}{
		{"viewer", "/site/good/pause", "guest", "view-pw", url.Values{"csrf": {token}}, nil, 403, "a viewer cannot act"},
		{"viewer token", "/site/good/pause", "", "", url.Values{"csrf": {token}}, map[string]string{"Authorization": "Bearer v13w"}, 403, "a viewer cannot act"},
		{"no credentials", "/site/good/pause", "", "", url.Values{"csrf": {token}}, nil, 401, ""},
		{"no token", "/site/good/pause", "admin", "op-pw", url.Values{}, nil, 403, "token"},
		{"wrong token", "/site/good/pause", "admin", "op-pw", url.Values{"csrf": {token + "x"}}, nil, 403, "token"},
		{"cross-site", "/site/good/pause", "admin", "op-pw", url.Values{"csrf": {token}}, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "cross-origin"},
		{"other origin", "/site/good/pause", "admin", "op-pw", url.Values{"csrf": {token}}, map[string]string{"Origin": "http://evil.example"}, 403, "cross-origin"},
		{"unknown site", "/site/nope/pause", "admin", "op-pw", url.Values{"csrf": {token}}, nil, 404, ""},
		{"unknown action", "/site/good/explode", "admin", "op-pw", url.Values{"csrf": {token}}, nil, 400, "no action"},
		{"bad schedule", "/site/good/schedule", "admin", "op-pw", url.Values{"csrf": {token}, "schedule": {"every blue moon"}}, nil, 400, "schedule"},
	} {
		if resp, body := do("POST", tt.path, tt.user, tt.pw, tt.form, tt.hdr); resp.StatusCode != tt.code || !strings.Contains(body, tt.want) {
			t.Errorf("%s: %d %q, want %d with %q", tt.name, resp.StatusCode, body, tt.code, tt.want)
		}
	}
	if s := regSite(t, st, "good"); s.Paused || len(actions(t, st, "good")) != 0 {
		t.Fatalf("a refused POST acted: paused %v, log %q", s.Paused, actions(t, st, "good"))
	}

	// The operator's actions, each logged with who asked.
	for _, a := range []struct {
		path string
		form url.Values
		ok   func(*site.Site) bool
	}{
		{"/site/good/pause", nil, func(s *site.Site) bool { return s.Paused }},
		{"/site/good/resume", nil, func(s *site.Site) bool { return !s.Paused }},
		{"/site/good/schedule", url.Values{"schedule": {"every 2w"}}, func(s *site.Site) bool { return s.When.String() == "every 2w" }},
		{"/site/good/harvest", nil, func(s *site.Site) bool { return s.Due(time.Now(), time.Local) }},
	} {
		form := url.Values{"csrf": {token}}
		for k, v := range a.form {
			form[k] = v
		}
		resp, body := do("POST", a.path, "admin", "op-pw", form, nil)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/site/good" {
			t.Errorf("POST %s: %d %s", a.path, resp.StatusCode, body)
		}
		if !a.ok(regSite(t, st, "good")) {
			t.Errorf("POST %s did not act: %+v", a.path, regSite(t, st, "good"))
		}
	}
	got := actions(t, st, "good")
	want := []string{"pause, asked by admin (operator)", "resume, asked by admin (operator)", "schedule every 2w (was every 1d), asked by admin (operator)", "harvest now, asked by admin (operator)"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the harvest log's actions: %q, want %q", got, want)
	}
	if _, p := do("GET", "/site/good", "admin", "op-pw", nil, nil); !strings.Contains(p, "harvest now, asked by admin (operator)") {
		t.Errorf("the site's page does not show its harvest log:\n%s", p)
	}

	// Failed logins: after a burst, refused whatever is sent.
	codes := []int{}
	for range 12 {
		resp, _ := do("GET", "/", "admin", "guess", nil, nil)
		codes = append(codes, resp.StatusCode)
	}
	if codes[0] != 401 || codes[len(codes)-1] != 429 {
		t.Errorf("failed logins answered %v: want 401 then 429", codes)
	}
	if resp, _ := do("GET", "/", "admin", "op-pw", nil, nil); resp.StatusCode != 429 {
		t.Errorf("right credentials after too many failures: %d, want 429", resp.StatusCode)
	}
	if resp, _ := do("GET", "/healthz", "", "", nil, nil); resp.StatusCode != 200 {
		t.Errorf("/healthz after too many failures: %d", resp.StatusCode)
	}
}

// TestActInBrowser drives the actions in Chromium: an operator pauses a
// site and changes its schedule from its page, which then shows them and
// its harvest log; a viewer's page has no actions, and a form the viewer
// submits anyway is refused by the server; a page of another site that
// posts to the status page, the operator's credentials sent with it, is
// refused.
func TestActInBrowser(t *testing.T) {
	srv, st := actServer(t)
	basic := func(u, p string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p)) }

	op := browsertest.New(t, basic("admin", "op-pw"))
	var next, state, log string
	err := chromedp.Run(op,
		chromedp.Navigate(srv.URL+"/site/good"),
		chromedp.WaitVisible("#pause"),
		chromedp.Click("#pause"),
		chromedp.WaitVisible("#resume"),
		chromedp.Text("#next", &next),
		chromedp.SetValue("#schedule", "every 3d"),
		chromedp.Click("#set-schedule"),
		chromedp.WaitVisible(`#schedule[value="every 3d"]`), // the page after the POST

		chromedp.Text("#events", &log),
		chromedp.Text("#state", &state),
	)
	if err != nil {
		t.Fatal(err)
	}
	if next != "paused" || !strings.Contains(log, "pause, asked by admin (operator)") || !strings.Contains(log, "schedule every 3d (was every 1d), asked by admin (operator)") {
		t.Errorf("after pause and a schedule: next %q, log %q", next, log)
	}
	if !strings.Contains(state, "last harvest ok") || !strings.Contains(state, "40 written") {
		t.Errorf("the site's state: %q", state)
	}
	if s := regSite(t, st, "good"); !s.Paused || s.When.String() != "every 3d" {
		t.Errorf("the registry: paused %v, schedule %s", s.Paused, s.When)
	}

	// A viewer: no actions on the page; a form submitted anyway (a script
	// run in the page, CSP bypassed) is refused by the server.
	viewer := browsertest.New(t, basic("guest", "view-pw"))
	var forms int
	var refused string
	err = chromedp.Run(viewer,
		page.SetBypassCSP(true),
		chromedp.Navigate(srv.URL+"/site/bad"),
		chromedp.WaitVisible("#runs"),
		chromedp.Evaluate(`document.querySelectorAll("form").length`, &forms),
		chromedp.Evaluate(`(() => { const f = document.createElement("form"); f.method = "post"; f.action = "/site/bad/pause";
			const i = document.createElement("input"); i.name = "csrf"; i.value = "anything"; f.appendChild(i); document.body.appendChild(f); f.submit(); return true })()`, nil),
		chromedp.WaitVisible("pre"), // the answer, as text
		chromedp.Text("pre", &refused),
	)
	if err != nil {
		t.Fatal(err)
	}
	if forms != 0 || !strings.Contains(refused, "a viewer cannot act") {
		t.Errorf("viewer: %d forms; the POST answered %q", forms, refused)
	}
	if regSite(t, st, "bad").Paused {
		t.Error("the viewer paused site bad")
	}

	// Another site's page posting to the status page, the operator's
	// credentials going with it (as a browser sends them): refused.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<!doctype html><body><form id="f" method="post" action="`+srv.URL+`/site/down/pause"><input name="x" value="1"></form>
<script>document.getElementById("f").submit()</script></body>`)
	}))
	defer evil.Close()
	// The other site is reached by another name, as it would be (a
	// different origin: localhost, not 127.0.0.1).
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
	var crossed string
	err = chromedp.Run(op,
		chromedp.Navigate(evilURL),
		chromedp.WaitVisible("pre"), // the answer, as text
		chromedp.Text("pre", &crossed),
	)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.ToLower(crossed), "cross-origin") {
		t.Errorf("the cross-site POST answered %q", crossed)
	}
	if regSite(t, st, "down").Paused || len(actions(t, st, "down")) != 0 {
		t.Error("a cross-site POST acted")
	}
}
