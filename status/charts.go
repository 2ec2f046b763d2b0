package status

import (
	"fmt"
	"html"
	"html/template"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/state"
)

// The charts are drawn here, as SVG inside the page: the page's
// Content-Security-Policy (default-src 'none') stays, nothing is fetched,
// no script runs. They are readable without colour: failures are hatched,
// every bar says its figures (a title, shown on hover and read by screen
// readers), and each chart is labelled.

// charted is how many of a site's last harvests its page charts.
const charted = 30

// hatch is the pattern failures are drawn with, id its id.
func hatch(id string) string {
	return `<defs><pattern id="` + id + `" width="4" height="4" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">` +
		`<rect width="4" height="4" fill="#fdd"/><rect width="2" height="4" fill="#b00"/></pattern></defs>`
}

// hourChart charts the harvests begun in each of the hours hours before
// now: those that ended ok (or partial), solid, and those that failed (or
// were interrupted), hatched, stacked.
func hourChart(counts []state.HourCount, now time.Time, hours int) template.HTML {
	end := now.UTC().Truncate(time.Hour)
	start := end.Add(-time.Duration(hours-1) * time.Hour)
	by := map[time.Time]state.HourCount{}
	top := 1
	for _, c := range counts {
		by[c.Hour] = c
		top = max(top, c.OK+c.Failed+c.Others)
	}
	const bar, height, left, bottom = 8, 120, 40, 20
	width := left + hours*bar + 10
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="hours-chart" role="img" aria-labelledby="hours-title" width="%d" height="%d" viewBox="0 0 %d %d" xmlns="http://www.w3.org/2000/svg">`,
		width, height+bottom+20, width, height+bottom+20)
	fmt.Fprintf(&b, `<title id="hours-title">Harvests begun per hour over the last %d hours: ended ok (solid) and failed (hatched); the tallest hour had %d</title>`, hours, top)
	b.WriteString(hatch("hatch-hours"))
	fmt.Fprintf(&b, `<text x="0" y="12" font-size="10">%d</text><text x="0" y="%d" font-size="10">0</text>`, top, height)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/>`, left, height, width-10, height)
	for i := range hours {
		h := start.Add(time.Duration(i) * time.Hour)
		c := by[h]
		x := left + i*bar
		okH, failH := c.OK*height/top, c.Failed*height/top
		fmt.Fprintf(&b, `<g><title>%s: %d ok, %d failed, %d other</title>`, h.Format("2006-01-02 15:00 UTC"), c.OK, c.Failed, c.Others)
		fmt.Fprintf(&b, `<rect x="%d" y="0" width="%d" height="%d" fill="none" pointer-events="all"/>`, x, bar, height)
		if okH > 0 {
			fmt.Fprintf(&b, `<rect class="ok-bar" x="%d" y="%d" width="%d" height="%d" fill="#2a7"/>`, x, height-okH, bar-1, okH)
		}
		if failH > 0 {
			fmt.Fprintf(&b, `<rect class="failed-bar" x="%d" y="%d" width="%d" height="%d" fill="url(#hatch-hours)" stroke="#b00"/>`, x, height-okH-failH, bar-1, failH)
		}
		b.WriteString(`</g>`)
		if i%24 == 0 || i == hours-1 {
			fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="10">%s</text>`, x, height+14, h.Format("Jan 2 15:00"))
		}
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="#2a7"/><text x="%d" y="%d" font-size="10">ended ok</text>`, left, height+bottom+2, left+14, height+bottom+11)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="url(#hatch-hours)" stroke="#b00"/><text x="%d" y="%d" font-size="10">failed</text>`, left+80, height+bottom+2, left+94, height+bottom+11)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// runsChart charts a site's last harvests (runs, newest first), oldest on
// the left: the records each wrote, its failures (hatched) and how long it
// took, each in a row of its own with its largest figure.
func runsChart(runs []state.Run) template.HTML {
	if len(runs) == 0 {
		return ""
	}
	type point struct {
		label           string
		written, failed int64
		seconds         float64
		status          string
	}
	pts := make([]point, 0, len(runs))
	for i := len(runs) - 1; i >= 0; i-- {
		v := newRunView(runs[i])
		p := point{label: fmt.Sprintf("run %d, %s", v.ID, v.Started.UTC().Format("2006-01-02 15:04 UTC")), written: v.Written, failed: v.Failed, status: v.Status}
		if !v.Finished.IsZero() {
			p.seconds = v.Finished.Sub(v.Started).Seconds()
		}
		pts = append(pts, p)
	}
	const bar, rowH, left = 14, 50, 90
	width := left + charted*bar + 10
	rows := []struct {
		name  string
		value func(point) float64
		fill  string
	}{
		{"records written", func(p point) float64 { return float64(p.written) }, "#2a7"},
		{"failures", func(p point) float64 { return float64(p.failed) }, "url(#hatch-runs)"},
		{"duration (s)", func(p point) float64 { return p.seconds }, "#36a"},
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="runs-chart" role="img" aria-labelledby="runs-title" width="%d" height="%d" viewBox="0 0 %d %d" xmlns="http://www.w3.org/2000/svg">`,
		width, len(rows)*(rowH+16), width, len(rows)*(rowH+16))
	fmt.Fprintf(&b, `<title id="runs-title">The last %d harvests, oldest first: records written, failures (hatched) and duration</title>`, len(pts))
	b.WriteString(hatch("hatch-runs"))
	for k, row := range rows {
		y0 := k*(rowH+16) + 4
		top := 0.0
		for _, p := range pts {
			top = max(top, row.value(p))
		}
		fmt.Fprintf(&b, `<text x="0" y="%d" font-size="10">%s</text><text x="0" y="%d" font-size="10">max %s</text>`,
			y0+12, html.EscapeString(row.name), y0+26, figure(top))
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/>`, left, y0+rowH, width-10, y0+rowH)
		for i, p := range pts {
			v := row.value(p)
			h := 0
			if top > 0 {
				h = int(v / top * rowH)
			}
			x := left + i*bar
			fmt.Fprintf(&b, `<g><title>%s (%s): %s %s</title><rect x="%d" y="%d" width="%d" height="%d" fill="none" pointer-events="all"/>`,
				html.EscapeString(p.label), html.EscapeString(p.status), figure(v), html.EscapeString(row.name), x, y0, bar, rowH)
			if h > 0 {
				stroke := ""
				if strings.HasPrefix(row.fill, "url(") {
					stroke = ` stroke="#b00"`
				}
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"%s/>`, x, y0+rowH-h, bar-2, h, row.fill, stroke)
			}
			b.WriteString(`</g>`)
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// figure writes v for a chart's label: an integer, or one decimal.
func figure(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprint(int64(v))
	}
	return fmt.Sprintf("%.1f", v)
}
