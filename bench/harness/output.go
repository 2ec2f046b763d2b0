package harness

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
)

// WriteTable writes the rows as an aligned text table, after a line
// describing the dump, and the notes.
func (r *Result) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "dump: %d resources, %.1f MB payload, %d packages (%.1f MB) in %s%s\n",
		r.Dump.Resources, float64(r.Dump.PayloadBytes)/1e6, r.Dump.Packages,
		float64(r.Dump.PackageBytes)/1e6, r.Dump.Dir, map[bool]string{true: " (cached)"}[r.Dump.Cached])
	link := "unlimited"
	if r.LinkBytesPerSec > 0 {
		link = fmt.Sprintf("%.1f MB/s", r.LinkBytesPerSec/1e6)
	}
	if r.ConnLinkBytesPerSec > 0 {
		link += fmt.Sprintf(", %.1f MB/s per connection", r.ConnLinkBytesPerSec/1e6)
	}
	fmt.Fprintf(w, "link %s, latency %s, GOMAXPROCS %d, inflater %s, work dir %s\n\n", link, r.Latency, r.GOMAXPROCS, r.Inflater, r.WorkDir)
	width := len("name")
	for _, row := range r.Rows {
		width = max(width, len(row.Name))
	}
	fmt.Fprintf(w, "%-*s %8s %8s %8s %7s %9s %12s %14s %9s %8s %7s %11s %8s\n", width, "name",
		"seconds", "MB/s", "res/s", "CPU s", "CPU s/GB", "peak RSS MB", "MB downloaded", "vs limit", "x python", "x naive", "x download", "speedup")
	for _, row := range r.Rows {
		if row.Skipped {
			fmt.Fprintf(w, "%-*s skipped: %s\n", width, row.Name, row.Note)
			continue
		}
		ratio := "-"
		if row.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f", row.Ratio)
		}
		fmtPos := func(v float64, f string) string {
			if v > 0 {
				return fmt.Sprintf(f, v)
			}
			return "-"
		}
		fmt.Fprintf(w, "%-*s %8.2f %8.1f %8.0f %7.2f %9s %12.1f %14.1f %9s %8s %7s %11s %8s\n", width, row.Name, row.Seconds, row.MBps,
			row.ResPerSec, row.CPUSeconds, fmtPos(row.CPUPerGB, "%.2f"), row.PeakRSSMB, row.DownloadedMB, ratio,
			fmtPos(row.VsPython, "%.2f"), fmtPos(row.VsNaive, "%.2f"), fmtPos(row.VsDownload, "%.2f"), fmtPos(row.Speedup, "%.1f"))
	}
	fmt.Fprintln(w)
	names := make([]string, len(r.Stages))
	stages := make([]Stages, len(r.Stages))
	for i, st := range r.Stages {
		names[i], stages[i] = st.Name, st.Seconds
	}
	writeStages(w, names, stages)
	for _, row := range r.Rows {
		if !row.Skipped && row.Note != "" {
			fmt.Fprintf(w, "%s: %s\n", row.Name, row.Note)
		}
	}
	for _, n := range r.Notes {
		if _, err := fmt.Fprintf(w, "note: %s\n", n); err != nil {
			return err
		}
	}
	return nil
}

// WriteJSON writes the result as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// Chart geometry.
const (
	svgWidth   = 900
	labelWidth = 300
	barHeight  = 26
	barGap     = 8
	padTop     = 60
	lineHeight = 300
)

// WriteSVG writes a chart: horizontal bars of MB/s, labelled with CPU
// seconds per GB, for every run, other build and processing reference (not
// the re-syncs, nor the download-only time), and,
// when the pipeline ran at several concurrencies, a line of MB/s against
// concurrency with the machine limit as a dashed line.
func (r *Result) WriteSVG(w io.Writer) error {
	var rows []Row
	for _, row := range r.Rows {
		if !row.Skipped && row.Kind != KindResync && row.Name != RefDownload {
			rows = append(rows, row)
		}
	}
	var runs []Row
	for _, row := range rows {
		if row.Kind == KindRun && !row.VerifyAll { // the line is throughput against concurrency, as by default
			runs = append(runs, row)
		}
	}
	maxMB := 0.0
	for _, row := range rows {
		maxMB = math.Max(maxMB, row.MBps)
	}
	top, step := niceScale(maxMB)
	barsH := padTop + len(rows)*(barHeight+barGap) + 40
	height := barsH
	withLine := len(runs) > 1
	if withLine {
		height += lineHeight + 60
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="13">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgWidth, height)
	text(&b, svgWidth/2, 24, "middle", 16, fmt.Sprintf("Payload throughput, MB/s — %d resources, %.0f MB",
		r.Dump.Resources, float64(r.Dump.PayloadBytes)/1e6))

	// Bars.
	x0, x1 := float64(labelWidth), float64(svgWidth-150)
	scale := func(v float64) float64 { return x0 + (x1-x0)*v/top }
	axisY := padTop + len(rows)*(barHeight+barGap)
	for v := 0.0; v <= top+step/2; v += step {
		x := scale(v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x, padTop-6, x, axisY)
		text(&b, int(x), axisY+16, "middle", 12, trimFloat(v))
	}
	text(&b, int((x0+x1)/2), axisY+34, "middle", 12, "MB/s (payload)")
	for i, row := range rows {
		y := padTop + i*(barHeight+barGap)
		color := "#4a7ab5"
		switch row.Kind {
		case KindReference:
			color = "#b5844a"
		case KindCompare:
			color = "#8a8a8a"
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n",
			x0, y, math.Max(scale(row.MBps)-x0, 1), barHeight, color)
		text(&b, labelWidth-8, y+barHeight/2+5, "end", 13, row.Name)
		label := fmt.Sprintf("%.1f", row.MBps)
		if row.CPUPerGB > 0 {
			label += fmt.Sprintf(" · %.1f CPU s/GB", row.CPUPerGB)
		}
		text(&b, int(scale(row.MBps))+6, y+barHeight/2+5, "start", 12, label)
	}

	if withLine {
		r.writeLine(&b, runs, barsH+30)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeLine draws MB/s against concurrency below the bars, at y offset top.
func (r *Result) writeLine(b *strings.Builder, runs []Row, top int) {
	limit := 0.0
	maxMB, maxC := 0.0, 0
	for _, row := range r.Rows {
		if row.Name == RefLimit && !row.Skipped {
			limit = row.MBps
		}
	}
	for _, row := range runs {
		maxMB = math.Max(maxMB, row.MBps)
		maxC = max(maxC, row.Concurrency)
	}
	yTop, ystep := niceScale(math.Max(maxMB, limit))
	left, right := 90.0, float64(svgWidth-40)
	y0, y1 := float64(top+lineHeight-40), float64(top+20)
	xs := func(c int) float64 { return left + (right-left)*float64(c)/float64(maxC) }
	ys := func(v float64) float64 { return y0 - (y0-y1)*v/yTop }
	text(b, svgWidth/2, top, "middle", 15, "rsharvest throughput against package concurrency")
	for v := 0.0; v <= yTop+ystep/2; v += ystep {
		y := ys(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, right, y)
		text(b, int(left)-6, int(y)+4, "end", 12, trimFloat(v))
	}
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, y0, right, y0)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, y0, left, y1)
	for _, row := range runs {
		text(b, int(xs(row.Concurrency)), int(y0)+18, "middle", 12, fmt.Sprint(row.Concurrency))
	}
	text(b, int((left+right)/2), int(y0)+38, "middle", 12, "concurrency (packages in flight)")
	fmt.Fprintf(b, `<text x="24" y="%.1f" text-anchor="middle" font-size="12" transform="rotate(-90 24 %.1f)">MB/s (payload)</text>`+"\n",
		(y0+y1)/2, (y0+y1)/2)
	if limit > 0 {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#b5844a" stroke-dasharray="6 4"/>`+"\n",
			left, ys(limit), right, ys(limit))
		text(b, int(right)-4, int(ys(limit))-6, "end", 12, fmt.Sprintf("necessary-work limit %.1f MB/s", limit))
	}
	var pts []string
	for _, row := range runs {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs(row.Concurrency), ys(row.MBps)))
	}
	fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="#4a7ab5" stroke-width="2"/>`+"\n", strings.Join(pts, " "))
	for _, row := range runs {
		x, y := xs(row.Concurrency), ys(row.MBps)
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="4" fill="#4a7ab5"/>`+"\n", x, y)
		text(b, int(x), int(y)-9, "middle", 11, fmt.Sprintf("%.1f", row.MBps))
	}
}

// text writes an escaped text element.
func text(b *strings.Builder, x, y int, anchor string, size int, s string) {
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="%s" font-size="%d">`, x, y, anchor, size)
	xml.EscapeText(b, []byte(s))
	b.WriteString("</text>\n")
}

// niceScale returns an axis maximum ≥ v and a tick step of 1, 2 or 5
// times a power of ten, giving about five ticks.
func niceScale(v float64) (top, step float64) {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1, 0.2
	}
	raw := v / 5
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if step = m * p; step >= raw {
			break
		}
	}
	return math.Ceil(v/step) * step, step
}

// trimFloat formats an axis value without needless decimals.
func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "" || s == "-" {
		return "0"
	}
	return s
}
