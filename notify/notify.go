// Package notify tells people what harvests did: after each site's
// harvest its contact, by the site's notification policy, and the
// administrator with a composite of several sites' harvests. What it tells
// is the run's report (runreport.Report), with what the site adds: its
// name, contact and next harvest. Each is plain text and HTML, written to
// a directory always and sent by e-mail when a mailer is given; the state
// store records each report sent, so that none is sent twice.
package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"os"
	"path/filepath"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/state"
)

// MaxListed caps the failures, documents and skips a report lists (the
// rest are counted; the harvest log has them all).
const MaxListed = 100

// Harvest is one site's harvest as its contact hears of it: the run's
// report, and the site's.
type Harvest struct {
	// Site names the site, Source its source.
	Site, Source string
	// Contact is where the report goes ("": nowhere but the directory),
	// and Notify when (always, on_error, on_change; "": always).
	Contact, Notify string
	// Status is the harvest's: ok, partial, failed or interrupted.
	Status string
	// Run is the run's report (its RunID 0 when the harvest failed before
	// it began; Mode "sync" then).
	Run runreport.Report
	// Failures are the run's failures as the state keeps them, the first
	// MaxListed; MoreFailures counts the others.
	Failures     []runreport.Failure
	MoreFailures int
	// Error is what ended the harvest when it failed as a whole.
	Error string
	// Next is the next scheduled harvest.
	Next time.Time
	// Listed caps the documents and skips listed (0: MaxListed).
	Listed int
}

// listed is the cap of h's lists.
func (h *Harvest) listed() int {
	if h.Listed > 0 {
		return h.Listed
	}
	return MaxListed
}

// OK reports whether the harvest succeeded in full.
func (h *Harvest) OK() bool { return h.Status == "ok" }

// Changed reports whether the harvest changed what the sinks hold.
func (h *Harvest) Changed() bool { return h.Run.Resources.Written > 0 || h.Run.Resources.Deleted > 0 }

// Wanted reports whether the site's contact is to hear of this harvest:
// always; on_error, when it did not succeed in full; on_change, when it
// changed something or did not succeed in full.
func (h *Harvest) Wanted() bool {
	switch h.Notify {
	case "on_error":
		return !h.OK()
	case "on_change":
		return !h.OK() || h.Changed()
	}
	return true
}

// Subject is the report's e-mail subject.
func (h *Harvest) Subject() string {
	c := h.Run.Resources
	return fmt.Sprintf("rsharvest: %s harvest of %s: %s (%d written, %d deleted, %d failed)", h.Run.Mode, h.Site, h.Status, c.Written, c.Deleted, c.Failed)
}

// Key names the report for the record of reports sent.
func (h *Harvest) Key() string {
	if h.Run.RunID > 0 {
		return fmt.Sprintf("site:%s:run:%d", h.Site, h.Run.RunID)
	}
	return fmt.Sprintf("site:%s:at:%s", h.Site, h.Run.Started.UTC().Format(time.RFC3339Nano))
}

// Documents are the first MaxListed records with versions the run
// reports; MoreDocuments counts the others.
func (h *Harvest) Documents() []runreport.Document {
	return h.Run.Documents[:min(len(h.Run.Documents), h.listed())]
}

// MoreDocuments counts the records with versions not in Documents.
func (h *Harvest) MoreDocuments() int64 {
	v := h.Run.Versions
	return max(0, v.Inserted+v.Updated+v.Held-int64(len(h.Documents())))
}

// Skips are the first MaxListed things listed and left out, and why (a
// lower revision than held, a docid listed twice, no longer listed).
func (h *Harvest) Skips() []runreport.Skip { return h.Run.Skips[:min(len(h.Run.Skips), h.listed())] }

// MoreSkips counts what was left out and is not in Skips.
func (h *Harvest) MoreSkips() int64 { return max(0, h.Run.Resources.Skipped-int64(len(h.Skips()))) }

// Composite is the report of several sites' harvests, to the
// administrator.
type Composite struct {
	// Key names it (for the record of reports sent): one per run of the
	// harvester, or per day.
	Key string
	// Title says what it covers ("run --due at …", "the day up to …").
	Title    string
	Harvests []Harvest
}

// A composite report stays a message a mail server takes, whatever the
// sites: it details at most compositeHarvests harvests (those not in full
// first), each with at most compositeListed failures, documents and skips;
// the rest are counted (the harvest log has them all).
const (
	compositeHarvests = 500
	compositeListed   = 3
)

// Detailed are the harvests the report details (see compositeHarvests):
// those not in full first, each in the order given.
func (c *Composite) Detailed() []Harvest {
	var out []Harvest
	for _, failing := range []bool{true, false} {
		for _, h := range c.Harvests {
			if h.OK() == failing || len(out) == compositeHarvests {
				continue
			}
			h.Listed = compositeListed
			if n := len(h.Failures); n > compositeListed {
				h.Failures, h.MoreFailures = h.Failures[:compositeListed], h.MoreFailures+n-compositeListed
			}
			out = append(out, h)
		}
	}
	return out
}

// NotDetailed counts the harvests the report counts but does not detail.
func (c *Composite) NotDetailed() int { return max(0, len(c.Harvests)-compositeHarvests) }

// Totals sums the harvests' counts: resources written, deleted,
// unchanged, failed, skipped, and the records with versions inserted,
// updated, held.
func (c *Composite) Totals() runreport.Report {
	var t runreport.Report
	for _, h := range c.Harvests {
		t.Add(&h.Run)
	}
	return t
}

// Failed counts the harvests that did not succeed in full.
func (c *Composite) Failed() int {
	n := 0
	for i := range c.Harvests {
		if !c.Harvests[i].OK() {
			n++
		}
	}
	return n
}

// Subject is the composite report's e-mail subject.
func (c *Composite) Subject() string {
	return fmt.Sprintf("rsharvest: %s: %d site(s) harvested, %d not in full", c.Title, len(c.Harvests), c.Failed())
}

var funcs = map[string]any{
	// printable shows a name or message a source gave on one line of
	// text, its control characters escaped (the HTML is escaped anyway).
	"printable": runreport.Printable,
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
	"kind": func(permanent bool) string {
		if !permanent {
			return "temporary: tried again at the next harvest"
		}
		return "permanent"
	},
}

const siteText = `{{define "site"}}Site:        {{.Site}} ({{.Source}})
Harvest:     {{.Run.Mode}}, {{.Status}}{{if .Run.RunID}} (run {{.Run.RunID}}){{end}}
Began:       {{when .Run.Started}}, took {{took .Run.Started .Run.Finished}}
{{with .Run.Resources}}Resources:   {{.Written}} written, {{.Deleted}} deleted, {{.Unchanged}} unchanged, {{.Failed}} failed, {{.Skipped}} skipped{{end}}
{{- with .Run.Versions}}{{if or .Inserted .Updated .Held}}
Documents:   {{.Inserted}} inserted, {{.Updated}} updated, {{.Held}} held at their version{{end}}{{end}}
{{- range .Documents}}
  - {{printable .URI}}: {{.Outcome}}{{if .Previous}} {{printable .Previous}} → {{printable .Version}}{{else}} at {{printable .Version}}{{end}}
{{- end}}
{{- if .MoreDocuments}}
  … and {{.MoreDocuments}} more
{{- end}}
{{- if .Error}}
The harvest failed: {{printable .Error}}
{{- end}}
{{- if .Failures}}
What failed, and why:
{{- range .Failures}}
  - {{printable .URI}} ({{.Stage}}, {{kind .Permanent}}): {{printable .Error}}
{{- end}}
{{- if .MoreFailures}}
  … and {{.MoreFailures}} more (rsharvest log --site {{.Site}})
{{- end}}
{{- end}}
{{- if .Skips}}
What was left out, and why:
{{- range .Skips}}
  - {{printable .Entry}}: {{printable .Reason}}
{{- end}}
{{- if .MoreSkips}}
  … and {{.MoreSkips}} more
{{- end}}
{{- end}}
Next harvest: {{when .Next}}
{{end}}`

var (
	siteTextT      = texttemplate.Must(texttemplate.New("").Funcs(funcs).Parse(siteText + `{{template "site" .}}`))
	compositeTextT = texttemplate.Must(texttemplate.New("").Funcs(funcs).Parse(siteText + `{{.Title}}: {{len .Harvests}} site(s) harvested, {{.Failed}} not in full.
{{with .Totals}}{{with .Resources}}In all: {{.Written}} written, {{.Deleted}} deleted, {{.Unchanged}} unchanged, {{.Failed}} failed, {{.Skipped}} skipped{{end}}{{with .Versions}}{{if or .Inserted .Updated .Held}}; documents {{.Inserted}} inserted, {{.Updated}} updated, {{.Held}} held{{end}}{{end}}.{{end}}
{{range .Detailed}}
{{template "site" .}}{{end}}{{if .NotDetailed}}
… and {{.NotDetailed}} more harvests, not detailed (rsharvest log has them).{{end}}`))
)

const siteHTML = `{{define "site"}}<h2>{{.Site}}: {{.Status}}</h2>
<table>
<tr><th>Source</th><td>{{.Source}}</td></tr>
<tr><th>Harvest</th><td>{{.Run.Mode}}{{if .Run.RunID}}, run {{.Run.RunID}}{{end}}</td></tr>
<tr><th>Began</th><td>{{when .Run.Started}}, took {{took .Run.Started .Run.Finished}}</td></tr>
{{with .Run.Resources}}<tr><th>Resources</th><td>{{.Written}} written, {{.Deleted}} deleted, {{.Unchanged}} unchanged, {{.Failed}} failed, {{.Skipped}} skipped</td></tr>{{end}}
{{- with .Run.Versions}}{{if or .Inserted .Updated .Held}}
<tr><th>Documents</th><td>{{.Inserted}} inserted, {{.Updated}} updated, {{.Held}} held at their version</td></tr>
{{- end}}{{end}}
<tr><th>Next harvest</th><td>{{when .Next}}</td></tr>
</table>
{{- if .Error}}
<p class="error">The harvest failed: {{.Error}}</p>
{{- end}}
{{- if .Failures}}
<h3>What failed, and why</h3>
<ul>
{{- range .Failures}}
<li><code>{{.URI}}</code> ({{.Stage}}, {{kind .Permanent}}): {{.Error}}</li>
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
<li><code>{{.Entry}}</code>: {{.Reason}}</li>
{{- end}}
{{- if .MoreSkips}}
<li>… and {{.MoreSkips}} more</li>
{{- end}}
</ul>
{{- end}}
{{end}}`

var (
	siteHTMLT      = htmltemplate.Must(htmltemplate.New("").Funcs(funcs).Parse(siteHTML + `<!doctype html><html><head><meta charset="utf-8"><title>{{.Subject}}</title></head><body>{{template "site" .}}</body></html>`))
	compositeHTMLT = htmltemplate.Must(htmltemplate.New("").Funcs(funcs).Parse(siteHTML + `<!doctype html><html><head><meta charset="utf-8"><title>{{.Subject}}</title></head><body>
<h1>{{.Title}}</h1><p>{{len .Harvests}} site(s) harvested, {{.Failed}} not in full.{{with .Totals}}{{with .Resources}} In all: {{.Written}} written, {{.Deleted}} deleted, {{.Unchanged}} unchanged, {{.Failed}} failed, {{.Skipped}} skipped{{end}}{{with .Versions}}{{if or .Inserted .Updated .Held}}; documents {{.Inserted}} inserted, {{.Updated}} updated, {{.Held}} held{{end}}{{end}}.{{end}}</p>
{{range .Detailed}}{{template "site" .}}{{end}}{{if .NotDetailed}}<p>… and {{.NotDetailed}} more harvests, not detailed (rsharvest log has them).</p>{{end}}</body></html>`))
)

// Render returns the harvest's report as plain text and HTML.
func (h *Harvest) Render() (text, html string, err error) { return render(siteTextT, siteHTMLT, h) }

// Render returns the composite report as plain text and HTML.
func (c *Composite) Render() (text, html string, err error) {
	return render(compositeTextT, compositeHTMLT, c)
}

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

// Harvest writes h's report and sends it to the site's contact when its
// policy wants it and it was not sent before.
func (r *Sender) Harvest(ctx context.Context, h *Harvest) error {
	text, html, err := h.Render()
	if err != nil {
		return err
	}
	name := fmt.Sprintf("site-%s-%s", h.Site, h.Run.Started.UTC().Format("20060102T150405.000000000Z"))
	if h.Run.RunID > 0 {
		name = fmt.Sprintf("site-%s-run%d", h.Site, h.Run.RunID)
	}
	// A report that cannot be written (a full disk, often why the
	// harvest failed) is still mailed.
	werr := r.write(name, text, html)
	if h.Contact == "" || !h.Wanted() {
		return werr
	}
	return errors.Join(werr, r.send(ctx, h.Key(), []string{h.Contact}, h.Subject(), text, html))
}

// Composite writes c's report and sends it to the administrator, once.
func (r *Sender) Composite(ctx context.Context, c *Composite) error {
	text, html, err := c.Render()
	if err != nil {
		return err
	}
	werr := r.write("admin-"+safeName(c.Key), text, html)
	if r.Admin == "" {
		return werr
	}
	return errors.Join(werr, r.send(ctx, "admin:"+c.Key, []string{r.Admin}, c.Subject(), text, html))
}

// write writes a report's text and HTML to Dir as NAME.txt and NAME.html.
func (r *Sender) write(name, text, html string) error {
	if r.Dir == "" {
		return nil
	}
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	for ext, body := range map[string]string{".txt": text, ".html": html} {
		p := filepath.Join(r.Dir, name+ext)
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			return fmt.Errorf("notify: %w", err)
		}
		if err := os.Rename(tmp, p); err != nil {
			return fmt.Errorf("notify: %w", err)
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
