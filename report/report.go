// Package report writes what harvests did, for people (seed 004, steps 15
// and 16): after each site's harvest a report to its contact — what was
// harvested, what failed and why, the next scheduled harvest — by the
// site's notification policy, and a composite report of several sites'
// harvests to the administrator. Each is plain text and HTML, written to
// a directory always and sent by e-mail when a mailer is given; the state
// store records each report sent, so that none is sent twice.
package report

import (
	"bytes"
	"context"
	"fmt"
	htmltemplate "html/template"
	"os"
	"path/filepath"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/rsharvest/rsharvest/state"
)

// MaxFailures caps the failures a site's report lists (the rest are
// counted; the harvest log has them all).
const MaxFailures = 100

// Failure is one thing a harvest could not do.
type Failure struct {
	URI, Stage, Error string
	// Temporary says the next harvest tries it again.
	Temporary bool
}

// Document is what a harvest did to one record with a version: inserted,
// updated (from Previous to Version) or held (Version held already).
type Document struct {
	URI, Outcome, Version, Previous string
}

// Skip is one thing listed that a harvest left out, and why.
type Skip struct {
	URI, Reason string
}

// Site is one site's harvest, as its report tells it.
type Site struct {
	Name, Source string
	// Contact is where the report goes ("": nowhere but the directory),
	// and Notify when (always, on_error, on_change; "": always).
	Contact, Notify string
	// Status is the harvest's: ok, partial, failed or interrupted.
	Status string
	// RunID is the harvest's run (0: it failed before it began).
	RunID             int64
	Mode              string
	Started, Finished time.Time
	// Written … Skipped are the resources' counts.
	Written, Deleted, Unchanged, Failed, Skipped int64
	// Failures are the first MaxFailures failures; MoreFailures counts
	// the others.
	Failures     []Failure
	MoreFailures int
	// Inserted, Updated and Held count the records with versions (a
	// harvest list's documents by revision); Documents are the first
	// MaxFailures of them, MoreDocuments counts the others.
	Inserted, Updated, Held int64
	Documents               []Document
	MoreDocuments           int
	// Skips are the first MaxFailures things listed and left out, and
	// why (a lower revision than held, a docid listed twice, no longer
	// listed); MoreSkips counts the others.
	Skips     []Skip
	MoreSkips int
	// Error is what ended the harvest when it failed as a whole.
	Error string
	// Next is the next scheduled harvest.
	Next time.Time
}

// OK reports whether the harvest succeeded in full.
func (s *Site) OK() bool { return s.Status == "ok" }

// Changed reports whether the harvest changed what the sinks hold.
func (s *Site) Changed() bool { return s.Written > 0 || s.Deleted > 0 }

// Wanted reports whether the site's contact is to hear of this harvest:
// always; on_error, when it did not succeed in full; on_change, when it
// changed something or did not succeed in full.
func (s *Site) Wanted() bool {
	switch s.Notify {
	case "on_error":
		return !s.OK()
	case "on_change":
		return !s.OK() || s.Changed()
	}
	return true
}

// Subject is the report's e-mail subject.
func (s *Site) Subject() string {
	return fmt.Sprintf("rsharvest: %s harvest of %s: %s (%d written, %d deleted, %d failed)", s.Mode, s.Name, s.Status, s.Written, s.Deleted, s.Failed)
}

// Key names the report for the record of reports sent.
func (s *Site) Key() string {
	if s.RunID > 0 {
		return fmt.Sprintf("site:%s:run:%d", s.Name, s.RunID)
	}
	return fmt.Sprintf("site:%s:at:%s", s.Name, s.Started.UTC().Format(time.RFC3339Nano))
}

// Admin is a composite report of several sites' harvests.
type Admin struct {
	// Key names it (for the record of reports sent): one per run of the
	// harvester, or per day.
	Key string
	// Title says what it covers ("run --due at …", "the day up to …").
	Title string
	Sites []Site
}

// Totals sums the sites' counts: resources written, deleted, unchanged,
// failed, skipped, and the records with versions inserted, updated, held.
func (a *Admin) Totals() Site {
	var t Site
	for _, s := range a.Sites {
		t.Written, t.Deleted, t.Unchanged, t.Failed, t.Skipped = t.Written+s.Written, t.Deleted+s.Deleted, t.Unchanged+s.Unchanged, t.Failed+s.Failed, t.Skipped+s.Skipped
		t.Inserted, t.Updated, t.Held = t.Inserted+s.Inserted, t.Updated+s.Updated, t.Held+s.Held
	}
	return t
}

// Failed counts the sites whose harvest did not succeed in full.
func (a *Admin) Failed() int {
	n := 0
	for i := range a.Sites {
		if !a.Sites[i].OK() {
			n++
		}
	}
	return n
}

// Subject is the composite report's e-mail subject.
func (a *Admin) Subject() string {
	return fmt.Sprintf("rsharvest: %s: %d site(s) harvested, %d not in full", a.Title, len(a.Sites), a.Failed())
}

var funcs = map[string]any{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"took": func(a, b time.Time) string {
		if a.IsZero() || b.IsZero() {
			return "-"
		}
		return b.Sub(a).Round(time.Second).String()
	},
	"kind": func(temporary bool) string {
		if temporary {
			return "temporary: tried again at the next harvest"
		}
		return "permanent"
	},
}

const siteText = `{{define "site"}}Site:        {{.Name}} ({{.Source}})
Harvest:     {{.Mode}}, {{.Status}}{{if .RunID}} (run {{.RunID}}){{end}}
Began:       {{when .Started}}, took {{took .Started .Finished}}
Resources:   {{.Written}} written, {{.Deleted}} deleted, {{.Unchanged}} unchanged, {{.Failed}} failed, {{.Skipped}} skipped
{{- if or .Inserted .Updated .Held}}
Documents:   {{.Inserted}} inserted, {{.Updated}} updated, {{.Held}} held at their version
{{- range .Documents}}
  - {{.URI}}: {{.Outcome}}{{if .Previous}} {{.Previous}} → {{.Version}}{{else}} at {{.Version}}{{end}}
{{- end}}
{{- if .MoreDocuments}}
  … and {{.MoreDocuments}} more
{{- end}}
{{- end}}
{{- if .Error}}
The harvest failed: {{.Error}}
{{- end}}
{{- if .Failures}}
What failed, and why:
{{- range .Failures}}
  - {{.URI}} ({{.Stage}}, {{kind .Temporary}}): {{.Error}}
{{- end}}
{{- if .MoreFailures}}
  … and {{.MoreFailures}} more (rsharvest log --site {{.Name}})
{{- end}}
{{- end}}
{{- if .Skips}}
What was left out, and why:
{{- range .Skips}}
  - {{.URI}}: {{.Reason}}
{{- end}}
{{- if .MoreSkips}}
  … and {{.MoreSkips}} more
{{- end}}
{{- end}}
Next harvest: {{when .Next}}
{{end}}`

var (
	siteTextT  = texttemplate.Must(texttemplate.New("").Funcs(funcs).Parse(siteText + `{{template "site" .}}`))
	adminTextT = texttemplate.Must(texttemplate.New("").Funcs(funcs).Parse(siteText + `{{.Title}}: {{len .Sites}} site(s) harvested, {{.Failed}} not in full.
{{with .Totals}}In all: {{.Written}} written, {{.Deleted}} deleted, {{.Unchanged}} unchanged, {{.Failed}} failed, {{.Skipped}} skipped{{if or .Inserted .Updated .Held}}; documents {{.Inserted}} inserted, {{.Updated}} updated, {{.Held}} held{{end}}.{{end}}
{{range .Sites}}
{{template "site" .}}{{end}}`))
)

const siteHTML = `{{define "site"}}<h2>{{.Name}}: {{.Status}}</h2>
<table>
<tr><th>Source</th><td>{{.Source}}</td></tr>
<tr><th>Harvest</th><td>{{.Mode}}{{if .RunID}}, run {{.RunID}}{{end}}</td></tr>
<tr><th>Began</th><td>{{when .Started}}, took {{took .Started .Finished}}</td></tr>
<tr><th>Resources</th><td>{{.Written}} written, {{.Deleted}} deleted, {{.Unchanged}} unchanged, {{.Failed}} failed, {{.Skipped}} skipped</td></tr>
{{- if or .Inserted .Updated .Held}}
<tr><th>Documents</th><td>{{.Inserted}} inserted, {{.Updated}} updated, {{.Held}} held at their version</td></tr>
{{- end}}
<tr><th>Next harvest</th><td>{{when .Next}}</td></tr>
</table>
{{- if .Error}}
<p class="error">The harvest failed: {{.Error}}</p>
{{- end}}
{{- if .Failures}}
<h3>What failed, and why</h3>
<ul>
{{- range .Failures}}
<li><code>{{.URI}}</code> ({{.Stage}}, {{kind .Temporary}}): {{.Error}}</li>
{{- end}}
{{- if .MoreFailures}}
<li>… and {{.MoreFailures}} more</li>
{{- end}}
</ul>
{{- end}}
{{- if .Documents}}
<h3>Documents</h3>
<ul>
{{- range .Documents}}
<li><code>{{.URI}}</code>: {{.Outcome}}{{if .Previous}} {{.Previous}} → {{.Version}}{{else}} at {{.Version}}{{end}}</li>
{{- end}}
{{- if .MoreDocuments}}
<li>… and {{.MoreDocuments}} more</li>
{{- end}}
</ul>
{{- end}}
{{- if .Skips}}
<h3>What was left out, and why</h3>
<ul>
{{- range .Skips}}
<li><code>{{.URI}}</code>: {{.Reason}}</li>
{{- end}}
{{- if .MoreSkips}}
<li>… and {{.MoreSkips}} more</li>
{{- end}}
</ul>
{{- end}}
{{end}}`

var (
	siteHTMLT  = htmltemplate.Must(htmltemplate.New("").Funcs(funcs).Parse(siteHTML + `<!doctype html><html><head><meta charset="utf-8"><title>{{.Subject}}</title></head><body>{{template "site" .}}</body></html>`))
	adminHTMLT = htmltemplate.Must(htmltemplate.New("").Funcs(funcs).Parse(siteHTML + `<!doctype html><html><head><meta charset="utf-8"><title>{{.Subject}}</title></head><body>
<h1>{{.Title}}</h1><p>{{len .Sites}} site(s) harvested, {{.Failed}} not in full.{{with .Totals}} In all: {{.Written}} written, {{.Deleted}} deleted, {{.Unchanged}} unchanged, {{.Failed}} failed, {{.Skipped}} skipped{{if or .Inserted .Updated .Held}}; documents {{.Inserted}} inserted, {{.Updated}} updated, {{.Held}} held{{end}}.{{end}}</p>
{{range .Sites}}{{template "site" .}}{{end}}</body></html>`))
)

// Render returns the site report as plain text and HTML.
func (s *Site) Render() (text, html string, err error) { return render(siteTextT, siteHTMLT, s) }

// Render returns the composite report as plain text and HTML.
func (a *Admin) Render() (text, html string, err error) { return render(adminTextT, adminHTMLT, a) }

func render(t *texttemplate.Template, h *htmltemplate.Template, v any) (string, string, error) {
	var tb, hb bytes.Buffer
	if err := t.Execute(&tb, v); err != nil {
		return "", "", err
	}
	if err := h.Execute(&hb, v); err != nil {
		return "", "", err
	}
	return tb.String(), hb.String(), nil
}

// Mailer sends one message.
type Mailer interface {
	Send(ctx context.Context, to []string, subject, text, html string) error
}

// Sender writes reports to Dir and sends them through Mail.
type Sender struct {
	// Dir is where every report is written ("": nowhere).
	Dir string
	// Mail sends the reports (nil: none is sent).
	Mail Mailer
	// Admin is the administrator's address for composite reports ("":
	// none is sent).
	Admin string
	// Store records the reports sent.
	Store Store
}

// Store is what a Sender keeps in the state: which reports were claimed
// and sent, so that each is sent once across processes (state.Store
// implements it; see state/statetest).
type Store interface {
	ClaimReport(ctx context.Context, key string) (bool, error)
	ReportSent(ctx context.Context, key string) error
	ReleaseReport(ctx context.Context, key string) error
}

var _ Store = (*state.Store)(nil)

// Site writes s's report and sends it to the site's contact when its
// policy wants it and it was not sent before.
func (r *Sender) Site(ctx context.Context, s *Site) error {
	text, html, err := s.Render()
	if err != nil {
		return err
	}
	name := fmt.Sprintf("site-%s-%s", s.Name, s.Started.UTC().Format("20060102T150405Z"))
	if s.RunID > 0 {
		name = fmt.Sprintf("site-%s-run%d", s.Name, s.RunID)
	}
	if err := r.write(name, text, html); err != nil {
		return err
	}
	if s.Contact == "" || !s.Wanted() {
		return nil
	}
	return r.send(ctx, s.Key(), []string{s.Contact}, s.Subject(), text, html)
}

// Composite writes a's report and sends it to the administrator, once.
func (r *Sender) Composite(ctx context.Context, a *Admin) error {
	text, html, err := a.Render()
	if err != nil {
		return err
	}
	if err := r.write("admin-"+safeName(a.Key), text, html); err != nil {
		return err
	}
	if r.Admin == "" {
		return nil
	}
	return r.send(ctx, "admin:"+a.Key, []string{r.Admin}, a.Subject(), text, html)
}

// write writes a report's text and HTML to Dir as NAME.txt and NAME.html.
func (r *Sender) write(name, text, html string) error {
	if r.Dir == "" {
		return nil
	}
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	for ext, body := range map[string]string{".txt": text, ".html": html} {
		p := filepath.Join(r.Dir, name+ext)
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			return fmt.Errorf("report: %w", err)
		}
		if err := os.Rename(tmp, p); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	return nil
}

// send sends a report unless it was claimed before (see
// state.Store.ClaimReport).
func (r *Sender) send(ctx context.Context, key string, to []string, subject, text, html string) error {
	if r.Mail == nil {
		return nil
	}
	claimed, err := r.Store.ClaimReport(ctx, key)
	if err != nil || !claimed {
		return err
	}
	if err := r.Mail.Send(ctx, to, subject, text, html); err != nil {
		if rerr := r.Store.ReleaseReport(context.WithoutCancel(ctx), key); rerr != nil {
			err = fmt.Errorf("%w (and releasing its claim: %v)", err, rerr)
		}
		return fmt.Errorf("report %s: %w", key, err)
	}
	return r.Store.ReportSent(context.WithoutCancel(ctx), key)
}

// safeName makes s a file name.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ':' || r == ' ' {
			return '-'
		}
		return r
	}, s)
}
