// Package status serves what the daemon does, over HTTP:
// a small HTML status page — the sites with their last status, counts and
// next harvest, a harvest under way with its counts so far; a site's
// recent runs and harvest log, with an operator's actions (harvest now,
// pause, resume, change the schedule); a run's detail log — behind
// authentication (an operator's or a viewer's bearer token, or user and
// password), the Prometheus metrics of the harvests at /metrics (behind
// it too), and /healthz. Everything is read from the state store at each
// request.
package status

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rsharvest/rsharvest/internal/httpserve"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// Options configure Handler. Operator or Viewer credentials are
// required: the pages are never served without authentication.
type Options struct {
	Store *state.Store
	// Operator may see everything and act (Act); Viewer may only see.
	Operator, Viewer Credentials
	// Act does what an operator asks of a site (the harvest library's Harvester.Act,
	// and the daemon woken); nil: the pages offer no actions.
	Act func(ctx context.Context, a site.Action) error
	// Loc is the zone schedules are read in (default time.Local).
	Loc *time.Location
	// Queue, when set, counts the daemons' jobs by state (daemon.Queue):
	// the queue's depth, on the sites page and in /metrics.
	Queue interface {
		Counts(ctx context.Context) (map[string]int, error)
	}
	// MetricsSites is the size of registry up to which every site has its
	// own series in /metrics (0: DefaultMetricsSites); a larger registry
	// gives them for the sites marked metrics: true alone, so that a scrape
	// stays small and quick whatever the registry holds.
	MetricsSites int
}

// HasAuth reports whether opts configure credentials: without them only
// /healthz is served.
func (opts Options) HasAuth() bool { return opts.Operator.IsSet() || opts.Viewer.IsSet() }

// Handler returns the status page's handler. /healthz answers "ok"
// without credentials (a liveness probe needs no secret) and says nothing
// else; without credentials configured every other page answers 403.
//
// An operator's POSTs to /site/NAME/ACTION (harvest, pause, resume,
// schedule) act through opts.Act; they need the CSRF token of the forms
// served to that operator, and a cross-origin one is refused
// (http.CrossOriginProtection); a viewer's are refused. Every response
// forbids framing and scripts (Content-Security-Policy, X-Frame-Options);
// credentials are compared in constant time, and a client's failed
// attempts are rate limited.
func Handler(opts Options) (http.Handler, error) {
	health := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) }
	if !opts.HasAuth() {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /healthz", health)
		mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "the status page is not served: no credentials are configured", http.StatusForbidden)
		})
		return secure(mux), nil
	}
	if opts.Loc == nil {
		opts.Loc = time.Local
	}
	p := &pages{opts: opts, secret: make([]byte, 32)}
	if _, err := rand.Read(p.secret); err != nil {
		return nil, err
	}
	process := prometheus.NewRegistry()
	process.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	scrapes := make(chan struct{}, 2) // scrapes at once: more wait, or end with their requests
	metrics := func(w http.ResponseWriter, r *http.Request) {
		select {
		case scrapes <- struct{}{}:
			defer func() { <-scrapes }()
		case <-r.Context().Done():
			return
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(&collector{p: p, ctx: r.Context()})
		promhttp.HandlerFor(prometheus.Gatherers{process, reg}, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", health)
	mux.HandleFunc("GET /style.css", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		_, _ = w.Write([]byte(style))
	})
	mux.Handle("GET /metrics", p.auth(http.HandlerFunc(metrics)))
	mux.Handle("GET /{$}", p.auth(http.HandlerFunc(p.sites)))
	mux.Handle("GET /site/{name}", p.auth(http.HandlerFunc(p.site)))
	mux.Handle("GET /run/{id}", p.auth(http.HandlerFunc(p.run)))
	mux.Handle("POST /site/{name}/{action}", http.NewCrossOriginProtection().Handler(p.auth(http.HandlerFunc(p.act))))
	return secure(mux), nil
}

type pages struct {
	opts Options
	// secret keys the CSRF tokens; made anew for each handler.
	secret   []byte
	failures failures
}

// runView is a run as the pages show it: a running run's counts are
// those it has recorded so far.
type runView struct {
	state.Run
	Written, Deleted, Unchanged, Failed int64
	Bytes                               int64
	Error                               string
	// Done and Planned are a running run's units of work (resources)
	// done and named by its plan so far; PlanRead says Planned is the
	// total.
	Done, Planned int64
	PlanRead      bool
	// UnitsDone and Units are a running harvest's units done of all, for
	// a harvest spread over the workers (0: not spread).
	UnitsDone, Units int64
}

// newRunView reads the run's counts from its report (runreport.Report).
func newRunView(r state.Run) runView {
	v := runView{Run: r}
	v.Source = state.SourceKey(r.Source) // a run recorded before sources lost their passwords
	if rep, ok := runreport.Read(r.Report); ok {
		v.Written, v.Deleted, v.Unchanged, v.Failed = rep.Resources.Written, rep.Resources.Deleted, rep.Resources.Unchanged, rep.Resources.Failed
		v.Bytes, v.Error = rep.Bytes.Written, rep.Error
		v.Done = rep.Resources.Written + rep.Resources.Deleted + rep.Resources.Unchanged + rep.Resources.Failed + rep.Resources.Skipped
		v.Planned, v.PlanRead = rep.Planned, rep.PlanRead
		if u := rep.Units; u != nil {
			v.UnitsDone, v.Units = u.Done, u.Total
		}
	}
	return v
}

// siteView is a site as the pages show it.
type siteView struct {
	*site.Site
	// Source is the site's source without its password.
	Source  string
	Next    time.Time
	LastRun *runView
	// Running is a harvest of the site under way, begun since its last
	// one, with its counts so far (nil: none).
	Running *runView
	// Unreadable says why the site's stored definition cannot be read
	// here ("": it can): the page lists it by name, with the reason.
	Unreadable string
}

// view returns s as the pages show it: its harvest under way (running:
// whether to look for one) and its last, each an index's read.
func (p *pages) view(ctx context.Context, s *site.Site, running bool) (siteView, error) {
	v := siteView{Site: s, Source: state.SourceKey(s.Source()), Next: s.NextHarvest(p.opts.Loc)}
	if running {
		r, ok, err := p.opts.Store.RunningRun(ctx, s.Name)
		if err != nil {
			return v, err
		}
		if ok && !r.Started.Before(s.Last) {
			rv := newRunView(r)
			v.Running = &rv
		}
	}
	if s.LastRunID > 0 {
		if r, err := p.opts.Store.Run(ctx, s.LastRunID); err == nil {
			rv := newRunView(r)
			v.LastRun = &rv
		}
	}
	return v, nil
}

// pageSize is how many sites, or runs, a page lists.
const pageSize = 50

// sitesQuery is the query of the sites page: the sites whose name holds
// q, in state (one of state.SiteStates, "" for any), the page-th page of
// them (from 1).
type sitesQuery struct {
	Q, State string
	Page     int
}

// URL is the page's address for query c with page n.
func (c sitesQuery) URL(n int) string {
	v := url.Values{}
	if c.Q != "" {
		v.Set("q", c.Q)
	}
	if c.State != "" {
		v.Set("state", c.State)
	}
	if n > 1 {
		v.Set("page", strconv.Itoa(n))
	}
	if len(v) == 0 {
		return "/"
	}
	return "/?" + v.Encode()
}

// stateCount is a state's count of sites, with the page that lists them.
type stateCount struct {
	State string
	Sites int
	URL   string
	Shown bool
}

// siteViews returns the page of sites the query asks for (see
// state.Store.SitePage: one scan of the registry, whatever the harvest
// log holds), each with its last harvest and, when running, the harvest
// under way.
func (p *pages) siteViews(ctx context.Context, q sitesQuery) ([]siteView, state.SitePage, error) {
	page, err := p.opts.Store.SitePage(ctx, state.SiteQuery{Search: q.Q, State: q.State, Limit: pageSize, Offset: (max(q.Page, 1) - 1) * pageSize, Now: time.Now()})
	if err != nil {
		return nil, page, err
	}
	out := make([]siteView, 0, len(page.Sites))
	for _, row := range page.Sites {
		s, err := site.FromRow(row.Site)
		if err != nil {
			// One site this machine cannot read (a schedule's zone it
			// lacks) keeps the page of the others.
			out = append(out, siteView{Site: site.Unreadable(row.Site), Unreadable: err.Error()})
			continue
		}
		v, err := p.view(ctx, s, row.State == state.SiteRunning)
		if err != nil {
			return nil, page, err
		}
		out = append(out, v)
	}
	return out, page, nil
}

// chartHours is how far back the sites page charts the harvests.
const chartHours = 72

func (p *pages) sites(w http.ResponseWriter, r *http.Request) {
	q := sitesQuery{Q: r.URL.Query().Get("q"), State: r.URL.Query().Get("state")}
	if !slices.Contains(state.SiteStates, q.State) {
		q.State = ""
	}
	q.Page, _ = strconv.Atoi(r.URL.Query().Get("page"))
	q.Page = min(max(q.Page, 1), math.MaxInt/pageSize) // (page-1)*pageSize never overflows
	views, page, err := p.siteViews(r.Context(), q)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	counts := []stateCount{{State: "all", URL: sitesQuery{Q: q.Q}.URL(1), Shown: q.State == ""}}
	for _, st := range state.SiteStates {
		counts[0].Sites += page.Counts[st]
		counts = append(counts, stateCount{State: st, Sites: page.Counts[st], URL: sitesQuery{Q: q.Q, State: st}.URL(1), Shown: q.State == st})
	}
	hours, err := p.opts.Store.RunsPerHour(r.Context(), time.Now().Add(-chartHours*time.Hour))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	pages := (page.Total + pageSize - 1) / pageSize
	nav := map[string]any{"Page": q.Page, "Pages": max(pages, 1)}
	if q.Page > 1 {
		nav["Prev"] = q.URL(q.Page - 1)
	}
	if q.Page < pages {
		nav["Next"] = q.URL(q.Page + 1)
	}
	workers, err := p.workers(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var queue []queueState
	if p.opts.Queue != nil {
		counts, err := p.opts.Queue.Counts(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		for _, st := range slices.Sorted(maps.Keys(counts)) {
			queue = append(queue, queueState{st, counts[st]})
		}
	}
	render(w, "sites", map[string]any{"Sites": views, "Workers": workers, "Queue": queue, "Who": who(r),
		"Query": q, "States": state.SiteStates, "Counts": counts, "Nav": nav, "Chart": hourChart(hours, time.Now(), chartHours)})
}

// queueState is how many jobs of the queue are in a state.
type queueState struct {
	State string
	Jobs  int
}

// workerView is a worker alive (a daemon holding its lease, or a run
// holding the lease of what it harvests) and what it is doing.
type workerView struct {
	Host    string
	PID     int
	Command string
	Since   time.Time
	// Doing are the leases it holds but its worker lease: "site NAME",
	// "source URL".
	Doing []state.LeaseHeld
}

// workers lists the workers alive from the leases held (state.Leases),
// one per process.
func (p *pages) workers(ctx context.Context) ([]workerView, error) {
	held, err := p.opts.Store.Leases(ctx)
	if err != nil {
		return nil, err
	}
	var out []workerView
	at := map[string]int{}
	for _, l := range held {
		id := fmt.Sprintf("%s/%d", l.Holder.Host, l.Holder.PID)
		i, ok := at[id]
		if !ok {
			i, at[id] = len(out), len(out)
			out = append(out, workerView{Host: l.Holder.Host, PID: l.Holder.PID, Command: l.Holder.Command, Since: l.Holder.Started})
		}
		w := &out[i]
		if l.Kind() == state.LeaseWorker {
			w.Command, w.Since = l.Holder.Command, l.Holder.Started // the daemon's own
			continue
		}
		w.Doing = append(w.Doing, l)
	}
	return out, nil
}

// shownEvents is how many of a site's latest harvest log events its page
// shows.
const shownEvents = 20

func (p *pages) site(w http.ResponseWriter, r *http.Request) {
	s, err := site.Registry{Store: p.opts.Store}.Site(r.Context(), r.PathValue("name"))
	if errors.Is(err, state.ErrNoSite) {
		http.NotFound(w, r)
		return
	} else if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	v, err := p.view(r.Context(), s, true)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	// Its runs by page, newest first: those before run ?before=ID.
	before, _ := strconv.ParseInt(r.URL.Query().Get("before"), 10, 64)
	runs, err := p.opts.Store.SiteRuns(r.Context(), s.Name, before, pageSize+1)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	views := make([]runView, 0, min(len(runs), pageSize))
	for _, run := range runs[:min(len(runs), pageSize)] {
		views = append(views, newRunView(run))
	}
	nav := map[string]any{}
	if len(runs) > pageSize {
		nav["Older"] = "/site/" + url.PathEscape(s.Name) + "?before=" + strconv.FormatInt(runs[pageSize-1].ID, 10)
	}
	if before > 0 {
		nav["Newest"] = "/site/" + url.PathEscape(s.Name)
	}
	last, err := p.opts.Store.SiteRuns(r.Context(), s.Name, 0, charted)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	events, err := p.opts.Store.SiteEvents(r.Context(), s.Name, shownEvents)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	id := who(r)
	render(w, "site", map[string]any{"Site": v, "Runs": views, "Events": events, "Nav": nav, "Chart": runsChart(last),
		"Who": id, "CanAct": id.role == roleOperator && p.opts.Act != nil, "CSRF": p.csrfToken(id)})
}

// runFailuresShown bounds the failures a run's page lists: a run may fail
// as many resources as it has; the harvest log lists them all.
const runFailuresShown = 1000

func (p *pages) run(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	run, err := p.opts.Store.Run(r.Context(), id)
	if errors.Is(err, state.ErrNotFound) {
		http.NotFound(w, r)
		return
	} else if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	fails, more, err := p.opts.Store.Failures(r.Context(), id, runFailuresShown)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	render(w, "run", map[string]any{"Run": newRunView(run), "Failures": fails, "More": more, "Who": who(r)})
}

// act does an operator's action on a site: POST /site/NAME/ACTION with
// the form's CSRF token (and, for schedule, the field schedule); then
// back to the site's page.
func (p *pages) act(w http.ResponseWriter, r *http.Request) {
	id := who(r)
	if id.role != roleOperator {
		http.Error(w, "a viewer cannot act: an operator's credentials are needed", http.StatusForbidden)
		return
	}
	if p.opts.Act == nil {
		http.Error(w, "actions are not served here", http.StatusNotFound)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(p.csrfToken(id))) {
		http.Error(w, "the form's token is missing or wrong: reload the page and try again", http.StatusForbidden)
		return
	}
	name := r.PathValue("name")
	err := p.opts.Act(r.Context(), site.Action{Site: name, Verb: r.PathValue("action"), Schedule: r.PostForm.Get("schedule"), Who: id.String()})
	switch {
	case errors.Is(err, state.ErrNoSite):
		http.NotFound(w, r)
	case errors.Is(err, site.ErrBadAction):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	default:
		http.Redirect(w, r, "/site/"+url.PathEscape(name), http.StatusSeeOther)
	}
}

func render(w http.ResponseWriter, name string, data any) {
	var b bytes.Buffer
	if err := pageT.ExecuteTemplate(&b, name, data); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
}

// style is the pages' style sheet, served at /style.css (the pages'
// Content-Security-Policy allows no inline style).
const style = `body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{padding:.3em .8em;border-bottom:1px solid #ddd;text-align:left}
.ok{color:#060}.running{color:#036}.partial,.paused{color:#a60}.failed,.interrupted,.error{color:#b00}form{display:inline;margin-right:1em}
header{display:flex;justify-content:space-between}
#counts a{margin-right:1em}#counts a.shown{font-weight:bold;text-decoration:none}figure{margin:1em 0}figcaption{font-size:.8em;color:#555}
`

var pageT = template.Must(template.New("").Funcs(map[string]any{
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "now"
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
}).Parse(`{{define "head"}}<!doctype html><html lang="en"><head><meta charset="utf-8">{{if .Refresh}}<meta http-equiv="refresh" content="15">{{end}}<title>rsharvest{{if .Title}} – {{.Title}}{{end}}</title>
<link rel="stylesheet" href="/style.css"></head><body>
<header><nav><a href="/">sites</a></nav><span id="who">{{.Who}}</span></header>{{end}}
{{define "running"}}<span class="running">running since {{ago .Started}}: {{if .Units}}units {{.UnitsDone}} of {{.Units}} done, {{end}}{{if .Planned}}{{.Done}} of {{if not .PlanRead}}at least {{end}}{{.Planned}} done, {{end}}{{.Written}} written, {{.Deleted}} deleted, {{.Unchanged}} unchanged, {{.Failed}} failed</span>{{end}}
{{define "sites"}}{{template "head" (dict "Title" "" "Refresh" true "Who" .Who)}}<h1>Sites</h1>
<p id="counts">{{range .Counts}}<a class="count{{if .Shown}} shown{{end}}" href="{{.URL}}">{{.State}} <b>{{.Sites}}</b></a> {{end}}</p>
<form id="search" method="get" action="/"><label>name <input id="q" name="q" value="{{.Query.Q}}"></label>
<label>state <select id="state" name="state"><option value="">any</option>{{range .States}}<option{{if eq . $.Query.State}} selected{{end}}>{{.}}</option>{{end}}</select></label> <button>Show</button></form>
<figure>{{.Chart}}<figcaption>Harvests begun per hour, the last three days: ended ok, solid; failed, hatched.</figcaption></figure>
<p id="pages">page {{.Nav.Page}} of {{.Nav.Pages}}{{with .Nav.Prev}} · <a id="prev" href="{{.}}">previous</a>{{end}}{{with .Nav.Next}} · <a id="next" href="{{.}}">next</a>{{end}}</p>
<table id="sites"><tr><th>site</th><th>schedule</th><th>last harvest</th><th>status</th><th>written</th><th>deleted</th><th>failed</th><th>next harvest</th></tr>
{{range .Sites}}<tr class="site" data-site="{{.Name}}"><td><a href="/site/{{.Name}}">{{.Name}}</a></td><td>{{.When}}</td><td>{{ago .Last}}</td>
{{if .Unreadable}}<td class="failed"><span class="error">cannot be read here: {{.Unreadable}}</span></td>{{else if .Running}}<td>{{template "running" .Running}}</td>{{else}}<td class="{{.LastStatus}}">{{if .LastStatus}}{{.LastStatus}}{{else}}-{{end}}{{with .LastRun}}{{if .Error}} <span class="error">{{.Error}}</span>{{end}}{{end}}</td>{{end}}
<td>{{with .LastRun}}{{.Written}}{{end}}</td><td>{{with .LastRun}}{{.Deleted}}{{end}}</td><td>{{with .LastRun}}{{.Failed}}{{end}}</td><td>{{if .Paused}}<span class="paused">paused</span>{{else}}{{when .Next}}{{end}}</td></tr>
{{end}}</table>
<h2>Workers</h2>{{if .Workers}}<table id="workers"><tr><th>host</th><th>pid</th><th>command</th><th>since</th><th>doing</th></tr>
{{range .Workers}}<tr class="worker"><td>{{.Host}}</td><td>{{.PID}}</td><td>{{.Command}}</td><td>{{ago .Since}}</td><td>{{range $i, $d := .Doing}}{{if $i}}, {{end}}{{$d.Key}}{{else}}idle{{end}}</td></tr>
{{end}}</table>{{else}}<p>No worker holds a lease now.</p>{{end}}
{{if .Queue}}<h2>Queue</h2><table id="queue"><tr><th>state</th><th>jobs</th></tr>{{range .Queue}}<tr><td>{{.State}}</td><td>{{.Jobs}}</td></tr>{{end}}</table>{{end}}
</body></html>{{end}}
{{define "site"}}{{template "head" (dict "Title" .Site.Name "Refresh" .Site.Running "Who" .Who)}}<h1>{{.Site.Name}}</h1>
<p>{{.Site.Source}} · {{.Site.When}} · next harvest <span id="next">{{if .Site.Paused}}<span class="paused">paused</span>{{else}}{{when .Site.Next}}{{end}}</span></p>
<p id="state">{{with .Site.Running}}{{template "running" .}}{{else}}{{with .Site.LastRun}}last harvest <span class="{{.Status}}">{{.Status}}</span>, {{ago .Finished}}: {{.Written}} written, {{.Deleted}} deleted, {{.Unchanged}} unchanged, {{.Failed}} failed{{else}}never harvested{{end}}{{end}}</p>
{{if .CanAct}}<section id="actions">
{{if not .Site.Paused}}<form method="post" action="/site/{{.Site.Name}}/harvest"><input type="hidden" name="csrf" value="{{.CSRF}}"><button id="harvest-now">Harvest now</button></form>{{end}}
{{if .Site.Paused}}<form method="post" action="/site/{{.Site.Name}}/resume"><input type="hidden" name="csrf" value="{{.CSRF}}"><button id="resume">Resume</button></form>
{{else}}<form method="post" action="/site/{{.Site.Name}}/pause"><input type="hidden" name="csrf" value="{{.CSRF}}"><button id="pause">Pause</button></form>{{end}}
<form method="post" action="/site/{{.Site.Name}}/schedule"><input type="hidden" name="csrf" value="{{.CSRF}}"><label>schedule <input id="schedule" name="schedule" value="{{.Site.When}}"></label> <button id="set-schedule">Change</button></form>
</section>{{end}}
<figure>{{.Chart}}<figcaption>The last harvests, oldest first: records written, failures (hatched), duration.</figcaption></figure>
<h2>Runs</h2><p id="pages">{{with .Nav.Newest}}<a id="newest" href="{{.}}">newest</a>{{end}}{{with .Nav.Older}} <a id="older" href="{{.}}">older</a>{{end}}</p><table id="runs"><tr><th>run</th><th>mode</th><th>began</th><th>status</th><th>written</th><th>deleted</th><th>unchanged</th><th>failed</th></tr>
{{range .Runs}}<tr><td><a href="/run/{{.ID}}">{{.ID}}</a></td><td>{{.Mode}}</td><td>{{ago .Started}}</td><td class="{{.Status}}">{{.Status}}{{if .Error}} <span class="error">{{.Error}}</span>{{end}}</td>
<td>{{.Written}}</td><td>{{.Deleted}}</td><td>{{.Unchanged}}</td><td>{{.Failed}}</td></tr>
{{end}}</table>
<h2>Harvest log</h2><table id="events"><tr><th>at</th><th>operation</th><th>what</th></tr>
{{range .Events}}<tr><td>{{ago .At}}</td><td>{{.Operation}}</td><td>{{.Message}}</td></tr>
{{end}}</table></body></html>{{end}}
{{define "run"}}{{template "head" (dict "Title" (printf "run %d" .Run.ID) "Refresh" (eq .Run.Status "running") "Who" .Who)}}<h1>Run {{.Run.ID}}: {{.Run.Mode}} of {{.Run.Source}}</h1>
<p class="{{.Run.Status}}">{{.Run.Status}}{{if .Run.Error}}: {{.Run.Error}}{{end}}</p><p>{{.Run.Written}} written, {{.Run.Deleted}} deleted, {{.Run.Unchanged}} unchanged, {{.Run.Failed}} failed</p>
<h2>Detail log</h2><table id="failures"><tr><th>what</th><th>stage</th><th>kind</th><th>error</th></tr>
{{range .Failures}}<tr><td>{{.URI}}</td><td>{{.Stage}}</td><td>{{if .Permanent}}permanent{{else}}temporary{{end}}</td><td>{{.Error}}</td></tr>
{{end}}</table>{{if .More}}<p id="more-failures">… and {{.More}} more: <code>rsharvest log{{with .Run.Site}} --site {{.}}{{end}}</code> lists them all.</p>{{end}}</body></html>{{end}}`))

// collector reports the harvests' metrics, read from the state at each
// scrape.
// collector collects the registry's series for one scrape, within ctx
// (the scrape's request: a scrape given up ends its reads).
type collector struct {
	p   *pages
	ctx context.Context
}

var (
	descRuns      = prometheus.NewDesc("rsharvest_site_runs_total", "Harvests of a site, by their status.", []string{"site", "status"}, nil)
	descResources = prometheus.NewDesc("rsharvest_site_resources_total", "Resources the harvests of a site wrote, deleted, found unchanged or failed.", []string{"site", "outcome"}, nil)
	descBytes     = prometheus.NewDesc("rsharvest_site_bytes_written_total", "Bytes the harvests of a site wrote.", []string{"site"}, nil)
	descDuration  = prometheus.NewDesc("rsharvest_site_last_run_duration_seconds", "How long the last harvest of a site took.", []string{"site"}, nil)
	descNext      = prometheus.NewDesc("rsharvest_site_next_harvest_timestamp_seconds", "When the next harvest of a site is due (Unix time; 0: now).", []string{"site"}, nil)
	descSuccess   = prometheus.NewDesc("rsharvest_site_last_success_timestamp_seconds", "When the last harvest of a site that ended ok ended (Unix time; absent: never).", []string{"site"}, nil)
	descRunning   = prometheus.NewDesc("rsharvest_site_running", "Whether a harvest of a site is running (1) or not (0).", []string{"site"}, nil)
	descLast      = prometheus.NewDesc("rsharvest_site_last_run_resources", "Resources the last harvest of a site wrote, deleted, found unchanged or failed.", []string{"site", "outcome"}, nil)
	descPlanned   = prometheus.NewDesc("rsharvest_site_running_resources_planned", "Resources the plan of a site's running harvest has named so far (its units of work).", []string{"site"}, nil)
	descDone      = prometheus.NewDesc("rsharvest_site_running_resources_done", "Resources a site's running harvest has done so far.", []string{"site"}, nil)
	descWorkers   = prometheus.NewDesc("rsharvest_workers", "Workers alive: processes holding a lease (a daemon holds one for its life), on every machine sharing the state.", nil, nil)
	descHarvests  = prometheus.NewDesc("rsharvest_worker_harvests", "Sites (else sources) a worker is harvesting now.", []string{"host", "pid"}, nil)
	descUnits     = prometheus.NewDesc("rsharvest_worker_units", "Units of spread harvests a worker is executing now.", []string{"host", "pid"}, nil)
	descRunUnits  = prometheus.NewDesc("rsharvest_site_running_units", "Units of a site's running harvest spread over the workers: all, or done.", []string{"site", "units"}, nil)
	descJobs      = prometheus.NewDesc("rsharvest_jobs", "The daemons' jobs by state (available and scheduled: the queue's depth).", []string{"state"}, nil)

	descRunsAll    = prometheus.NewDesc("rsharvest_runs_total", "Harvests in the harvest log, by status.", []string{"status"}, nil)
	descSites      = prometheus.NewDesc("rsharvest_sites", "Sites of the registry, by state: failing (the last harvest failed, ended partial or was interrupted), running, due, paused, ok.", []string{"state"}, nil)
	descLastAll    = prometheus.NewDesc("rsharvest_last_harvests_resources", "Resources the sites' last harvests wrote, deleted, found unchanged or failed, summed by protocol.", []string{"outcome", "protocol"}, nil)
	descFailingRow = prometheus.NewDesc("rsharvest_sites_failing_in_a_row", "Sites whose last harvests failed, at least this many in a row.", []string{"at_least"}, nil)
	descLastStart  = prometheus.NewDesc("rsharvest_last_harvest_start_timestamp_seconds", "When the newest harvest of the log began (Unix time).", nil, nil)
)

// constMetric is prometheus.MustNewConstMetric without its panic: a label
// value that is not UTF-8 (a site's name in a state written by hand) is
// given with its other bytes escaped as \xNN (site names are ASCII
// without a backslash, so no two names meet), and any other refusal is
// that series' error in the scrape.
func constMetric(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) prometheus.Metric {
	for i, l := range labels {
		if !utf8.ValidString(l) {
			q := strconv.QuoteToGraphic(l)
			labels[i] = q[1 : len(q)-1]
		}
	}
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRuns, descResources, descBytes, descDuration, descNext, descSuccess, descRunning, descLast,
		descPlanned, descDone, descWorkers, descHarvests, descUnits, descRunUnits, descJobs,
		descRunsAll, descSites, descLastAll, descFailingRow, descLastStart} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx := c.ctx
	workers, err := c.p.workers(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descWorkers, err)
		return
	}
	ch <- constMetric(descWorkers, prometheus.GaugeValue, float64(len(workers)))
	for _, w := range workers {
		sites, sources, units := 0, 0, 0
		for _, d := range w.Doing {
			switch d.Kind() {
			case state.LeaseSite:
				sites++
			case state.LeasePart:
				units++
			case state.LeaseSource:
				sources++
			}
		}
		ch <- constMetric(descHarvests, prometheus.GaugeValue, float64(cmp.Or(sites, sources)), w.Host, strconv.Itoa(w.PID))
		ch <- constMetric(descUnits, prometheus.GaugeValue, float64(units), w.Host, strconv.Itoa(w.PID))
	}
	if c.p.opts.Queue != nil {
		counts, err := c.p.opts.Queue.Counts(ctx)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(descJobs, err)
			return
		}
		for st, n := range counts {
			ch <- constMetric(descJobs, prometheus.GaugeValue, float64(n), st)
		}
	}
	views, err := c.totals(ctx, ch)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descRunsAll, err)
		return
	}
	for _, v := range views {
		runs, err := c.p.opts.Store.RunsSince(ctx, time.Time{}, v.Name)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(descRuns, err)
			return
		}
		byStatus := map[string]float64{}
		var written, deleted, unchanged, failed, bytes float64
		var success time.Time
		running := 0.0
		for _, r := range runs {
			byStatus[r.Status]++
			if r.Status == runreport.StatusOK && r.Finished.After(success) {
				success = r.Finished
			}
			if r.Status == state.StatusRunning {
				running = 1
			}
			rv := newRunView(r)
			written, deleted, unchanged, failed, bytes = written+float64(rv.Written), deleted+float64(rv.Deleted), unchanged+float64(rv.Unchanged), failed+float64(rv.Failed), bytes+float64(rv.Bytes)
		}
		for status, n := range byStatus {
			ch <- constMetric(descRuns, prometheus.CounterValue, n, v.Name, status)
		}
		for outcome, n := range map[string]float64{"written": written, "deleted": deleted, "unchanged": unchanged, "failed": failed} {
			ch <- constMetric(descResources, prometheus.CounterValue, n, v.Name, outcome)
		}
		ch <- constMetric(descBytes, prometheus.CounterValue, bytes, v.Name)
		ch <- constMetric(descRunning, prometheus.GaugeValue, running, v.Name)
		if r := v.Running; r != nil {
			ch <- constMetric(descPlanned, prometheus.GaugeValue, float64(r.Planned), v.Name)
			ch <- constMetric(descDone, prometheus.GaugeValue, float64(r.Done), v.Name)
			if r.Units > 0 {
				ch <- constMetric(descRunUnits, prometheus.GaugeValue, float64(r.Units), v.Name, "all")
				ch <- constMetric(descRunUnits, prometheus.GaugeValue, float64(r.UnitsDone), v.Name, "done")
			}
		}
		if !success.IsZero() {
			ch <- constMetric(descSuccess, prometheus.GaugeValue, float64(success.Unix()), v.Name)
		}
		if r := v.LastRun; r != nil && !r.Finished.IsZero() {
			ch <- constMetric(descDuration, prometheus.GaugeValue, r.Finished.Sub(r.Started).Seconds(), v.Name)
			for outcome, n := range map[string]int64{"written": r.Written, "deleted": r.Deleted, "unchanged": r.Unchanged, "failed": r.Failed} {
				ch <- constMetric(descLast, prometheus.GaugeValue, float64(n), v.Name, outcome)
			}
		}
		next := 0.0
		if !v.Next.IsZero() {
			next = float64(v.Next.Unix())
		}
		ch <- constMetric(descNext, prometheus.GaugeValue, next, v.Name)
	}
}

// failingRuns is the number of failed harvests in a row that
// rsharvest_sites_failing_in_a_row counts.
const failingRuns = 3

// DefaultMetricsSites is the size of registry up to which every site has
// its own series in /metrics (Options.MetricsSites).
const DefaultMetricsSites = 100

var (
	protocolKey = regexp.MustCompile(`(?m)^protocol:\s*"?([A-Za-z0-9_-]+)`)
	metricsKey  = regexp.MustCompile(`(?m)^metrics:\s*true\s*$`)
)

// totals sends the series of the whole registry — its harvests by status,
// its sites by state, the resources of the sites' last harvests by
// outcome and protocol, the sites failing again and again, the newest
// harvest's start: a few reads, whatever the size of the registry and of
// the log — and returns the sites whose own series are sent too: every
// site of a registry of at most Options.MetricsSites, else those marked
// (metrics: true).
func (c *collector) totals(ctx context.Context, ch chan<- prometheus.Metric) ([]siteView, error) {
	st := c.p.opts.Store
	runs, err := st.RunCounts(ctx)
	if err != nil {
		return nil, err
	}
	for status, n := range runs {
		ch <- constMetric(descRunsAll, prometheus.CounterValue, float64(n), status)
	}
	page, err := st.SitePage(ctx, state.SiteQuery{Limit: 1, Now: time.Now()})
	if err != nil {
		return nil, err
	}
	all := 0
	for _, s := range state.SiteStates {
		ch <- constMetric(descSites, prometheus.GaugeValue, float64(page.Counts[s]), s)
		all += page.Counts[s]
	}
	limit := cmp.Or(c.p.opts.MetricsSites, DefaultMetricsSites)
	sums := map[[2]string]int64{}
	var own []siteView
	err = st.SitesLastRuns(ctx, func(row state.Site, last state.Run) error {
		protocol := "auto"
		if m := protocolKey.FindStringSubmatch(row.Definition); m != nil {
			protocol = m[1]
		}
		if last.ID > 0 {
			v := newRunView(last)
			for outcome, n := range map[string]int64{"written": v.Written, "deleted": v.Deleted, "unchanged": v.Unchanged, "failed": v.Failed} {
				sums[[2]string{outcome, protocol}] += n
			}
		}
		if all > limit && !metricsKey.MatchString(row.Definition) {
			return nil
		}
		s, err := site.FromRow(row)
		if err != nil {
			return nil // a site this machine cannot read has no series of its own
		}
		v, err := c.p.view(ctx, s, true)
		own = append(own, v)
		return err
	})
	if err != nil {
		return nil, err
	}
	for k, n := range sums {
		ch <- constMetric(descLastAll, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	failing := 0
	if n := page.Counts[state.SiteFailing]; n > 0 {
		fp, err := st.SitePage(ctx, state.SiteQuery{State: state.SiteFailing, Limit: n, Now: time.Now()})
		if err != nil {
			return nil, err
		}
		for _, s := range fp.Sites {
			last, err := st.SiteRuns(ctx, s.Name, 0, failingRuns)
			if err != nil {
				return nil, err
			}
			if len(last) == failingRuns && !slices.ContainsFunc(last, func(r state.Run) bool { return r.Status != runreport.StatusFailed }) {
				failing++
			}
		}
	}
	ch <- constMetric(descFailingRow, prometheus.GaugeValue, float64(failing), strconv.Itoa(failingRuns))
	if newest, err := st.Runs(ctx, 1); err != nil {
		return nil, err
	} else if len(newest) == 1 {
		ch <- constMetric(descLastStart, prometheus.GaugeValue, float64(newest[0].Started.Unix()))
	}
	return own, nil
}

// Serve serves the status page of opts (see Handler) on listen until stop
// is called, and gives the address it listens on. Without credentials it
// serves /healthz alone; a failure to listen is an *httpserve.ListenError.
func Serve(ctx context.Context, listen string, opts Options) (stop func(), addr string, err error) {
	h, err := Handler(opts)
	if err != nil {
		return nil, "", err
	}
	return httpserve.Start(ctx, listen, h)
}

// MetricsHelp is the reference of the series /metrics gives (beside Go's
// and the process's): a Markdown table of each one's name, labels and
// meaning, made from the collector's own descriptions.
func MetricsHelp() string {
	ch := make(chan *prometheus.Desc, 64)
	(&collector{}).Describe(ch)
	close(ch)
	re := regexp.MustCompile(`fqName: "([^"]*)", help: "((?:[^"\\]|\\.)*)".*variableLabels: \{([^}]*)\}`)
	var b strings.Builder
	b.WriteString("| series | labels | meaning |\n|---|---|---|\n")
	for d := range ch {
		m := re.FindStringSubmatch(d.String())
		if m == nil {
			continue
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", m[1], strings.ReplaceAll(m[3], ",", ", "), strings.ReplaceAll(m[2], `\"`, `"`))
	}
	return b.String()
}
